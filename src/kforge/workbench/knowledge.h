// The knowledge base the workbench serves (knowledge/ in the repository, compiled into the
// binary): overview.md (the workflow), triton_syntax.md (a Triton 3.x reference),
// torch_ops.json (per op: definition, shapes, bound, bytes/FLOPs formulas, pitfalls,
// optimisations, reference_code and test_input_code) and templates/templates.json (per
// pattern: a complete kernel, its entry function, test inputs and reference).
//
// load() checks the whole base once (every op has the fields the tools read; every template's
// file is embedded); the test suite executes every template and reference snippet.
//
// Thread-safety: immutable after load(); share it freely.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kforge/common/json.h"
#include "kforge/common/status.h"

namespace kforge::workbench {

struct KernelTemplate {
  std::string pattern;  // elementwise | reduction | matmul | fused | attention
  std::string title;
  std::string description;
  std::string file;             // where it comes from ("kernels/add/v4_optimized.py")
  std::string entry;            // the wrapper it defines ("triton_add")
  std::string source;           // the file, plus `solve = <entry>` when entry is not solve
  std::string test_input_code;  // inputs it is tested with (workbench convention)
  std::string reference_code;   // the torch reference it is validated against
};

class Knowledge {
 public:
  // Parses the embedded base; kInternal naming the file and field when it is malformed.
  static StatusOr<std::shared_ptr<const Knowledge>> load();

  std::string_view overview() const { return overview_; }
  std::string_view triton_syntax() const { return triton_syntax_; }
  // kernels/interpreter_compat.py: the Triton interpreter fix cpu-device jobs carry.
  std::string_view interpreter_compat() const { return interpreter_compat_; }

  // The op by name or alias ("add" -> vector_add, "layernorm" -> layer_norm); case and
  // '-'/' ' are ignored. nullptr when unknown.
  const Json* op(std::string_view name) const;
  // The canonical name of an op or alias; "" when unknown.
  std::string op_name(std::string_view name) const;
  std::vector<std::string> op_names() const;

  const KernelTemplate* find_template(std::string_view pattern) const;
  const std::vector<KernelTemplate>& templates() const { return templates_; }

  // Every embedded file by repository path, for the MCP resources.
  std::optional<std::string_view> file(std::string_view path) const;

 private:
  Knowledge() = default;

  std::string overview_;
  std::string triton_syntax_;
  std::string interpreter_compat_;
  Json ops_ = Json::object();
  std::vector<KernelTemplate> templates_;
};

}  // namespace kforge::workbench
