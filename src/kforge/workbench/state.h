// The workbench's states and which tool may run in which (docs/workbench.md "The workflow").
//
//   start ──set_kernel_name──► write ──write_kernel_code──► evaluation ──get_best_kernel──► end
//                                ▲                              │ (≥ min versions written
//                                └── force_transition_to_write ─┘  and evaluated)
//   (force_transition_to_write from any state; a failed validation also goes back to write)
//
// Information tools (overview, syntax, op info, templates, GPU status, status, context usage,
// sessions) run in every state. Execution tools run on the latest version in `write` and
// `evaluation`; their stateless forms (the kernel code passed explicitly) in every state.
// A call outside its states fails with a message naming the current state, the states that
// allow the tool and the call that gets there.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kforge/common/status.h"

namespace kforge::workbench {

enum class State { kStart, kWrite, kEvaluation, kEnd };

std::string_view to_string(State s);
std::optional<State> state_from(std::string_view s);

enum class Tool {
  kGetOverview,
  kGetTritonSyntax,
  kGetTorchOpInfo,
  kGetKernelTemplate,
  kCheckGpuStatus,
  kGetCurrentStatus,
  kCheckContextUsage,
  kListSessions,
  kResumeSession,
  kSetKernelName,
  kWriteTestCode,
  kWriteKernelCode,
  kForceTransitionToWrite,
  kRunTritonKernel,
  kValidateCorrectness,
  kMeasureKernelTime,
  kBenchmarkKernel,
  kGetBestKernel,
};

// Every tool, in the order tools/list shows them.
const std::vector<Tool>& all_tools();
std::string_view tool_name(Tool t);
std::optional<Tool> tool_from_name(std::string_view name);
// True for the run/validate/measure/benchmark tools.
bool is_execution_tool(Tool t);
// The states where the tool runs (its stateful form).
std::vector<State> allowed_states(Tool t);

// OK when `tool` may run in `state`. `stateless` is true for an execution tool called with
// its kernel code (it touches no version, so it runs in every state). Otherwise
// kFailedPrecondition: "<tool> is not available in state '<state>'; it runs in <states>. To
// get there: <calls>."
Status gate(Tool tool, State state, bool stateless = false);

// The calls that take a session from `from` to `to` ("" when from == to).
std::string path_between(State from, State to);

}  // namespace kforge::workbench
