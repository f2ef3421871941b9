// The input cases of a test_input_code (docs/workbench.md "What your code must define").
//
// One case: the code defines `args` (a list or tuple) and optionally `kwargs` (a dict).
// Several sizes: it defines `sizes = [...]` at the top level and `make_inputs(size)`, which
// returns `args` or `(args, kwargs)` for one size; every size becomes its own job and its own
// row in the results. The server never runs the code, so `sizes` must be a literal: a list or
// tuple of integer expressions (+ - * // % ** << >> and parentheses over integer literals) or
// of tuples/lists of them, e.g. `sizes = [1 << 12, 1 << 16, (4096, 4096)]`.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "kforge/common/status.h"

namespace kforge::workbench {

inline constexpr size_t kMaxInputCases = 16;

struct InputCase {
  int index = -1;             // index into `sizes`; -1 for the single `args` case
  std::string label;          // "4096", "4096x4096", or "args"
  std::vector<int64_t> dims;  // the size's integers (empty for the `args` case)
};

// The cases of `test_input_code`. kInvalidArgument (field "test_input_code") when `sizes` is
// assigned but is not such a literal, is empty or has more than kMaxInputCases entries.
StatusOr<std::vector<InputCase>> input_cases(std::string_view test_input_code);

}  // namespace kforge::workbench
