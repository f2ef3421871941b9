// Bounds on what a job's result may hold before it is stored or sent (docs/rest-api.md
// "Result size limits"; docs/security.md).
//
// A job's code controls much of its result: an exception's message and traceback, its
// warnings, its captured output. Without a bound, one kernel raising a 100 MB message grew the
// store by 200 MB and every answer that carried the result by as much. So, in the order
// applied:
//   1. every string of the result (at any depth) longer than `max_text_bytes` keeps its head
//      and its tail around a marker that says how much was cut (cap_text);
//   2. a result whose JSON is still longer than `max_result_bytes` loses its largest members
//      that no verdict needs (kernel lists, activity, device metrics, phases, ...), largest
//      first, and says so in `result_truncated` and `warnings`;
//   3. if that is not enough, only the verdict is kept (compiled, correctness, runtime,
//      error_kind and the error texts).
// The job's `error` text gets step 1.
//
// Thread-safety: stateless functions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "kforge/common/json.h"

namespace kforge::jobs {

struct ResultLimits {
  size_t max_text_bytes = size_t{64} << 10;   // each string
  size_t max_result_bytes = size_t{8} << 20;  // the whole result, as compact JSON
};

// `text` when it has at most `max_bytes` bytes; else its head and tail (cut at UTF-8
// character boundaries) around "\n[... kforge cut N of M bytes here ...]\n", at most
// `max_bytes` bytes in all (a `max_bytes` too small for the marker keeps only the head).
std::string cap_text(std::string_view text, size_t max_bytes);

// Applies the limits to a job's result (see above); returns true when anything was cut.
bool cap_result(Json& result, const ResultLimits& limits);

}  // namespace kforge::jobs
