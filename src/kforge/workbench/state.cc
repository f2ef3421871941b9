#include "kforge/workbench/state.h"

#include <algorithm>
#include <array>
#include <utility>

namespace kforge::workbench {
namespace {

constexpr std::array<std::pair<Tool, std::string_view>, 18> kNames = {{
    {Tool::kGetOverview, "get_overview"},
    {Tool::kGetTritonSyntax, "get_triton_syntax"},
    {Tool::kGetTorchOpInfo, "get_torch_op_info"},
    {Tool::kGetKernelTemplate, "get_kernel_template"},
    {Tool::kCheckGpuStatus, "check_gpu_status"},
    {Tool::kGetCurrentStatus, "get_current_status"},
    {Tool::kCheckContextUsage, "check_context_usage"},
    {Tool::kListSessions, "list_sessions"},
    {Tool::kResumeSession, "resume_session"},
    {Tool::kSetKernelName, "set_kernel_name"},
    {Tool::kWriteTestCode, "write_test_code"},
    {Tool::kWriteKernelCode, "write_kernel_code"},
    {Tool::kForceTransitionToWrite, "force_transition_to_write"},
    {Tool::kRunTritonKernel, "run_triton_kernel"},
    {Tool::kValidateCorrectness, "validate_correctness"},
    {Tool::kMeasureKernelTime, "measure_kernel_time"},
    {Tool::kBenchmarkKernel, "benchmark_kernel"},
    {Tool::kGetBestKernel, "get_best_kernel"},
}};

constexpr std::array<State, 4> kEveryState = {State::kStart, State::kWrite, State::kEvaluation,
                                              State::kEnd};

std::string join_states(const std::vector<State>& states) {
  std::string out;
  for (size_t i = 0; i < states.size(); ++i) {
    if (i > 0) out += i + 1 == states.size() ? " or " : ", ";
    out += "'" + std::string(to_string(states[i])) + "'";
  }
  return out;
}

// How many calls path_between needs (to pick the nearest allowed state).
int distance(State from, State to) {
  if (from == to) return 0;
  switch (to) {
    case State::kStart:
    case State::kWrite:
      return 1;
    case State::kEvaluation:
      return from == State::kWrite ? 1 : 2;
    case State::kEnd:
      return from == State::kEvaluation ? 1 : (from == State::kWrite ? 2 : 3);
  }
  return 3;
}

}  // namespace

std::string_view to_string(State s) {
  switch (s) {
    case State::kStart:
      return "start";
    case State::kWrite:
      return "write";
    case State::kEvaluation:
      return "evaluation";
    case State::kEnd:
      return "end";
  }
  return "?";
}

std::optional<State> state_from(std::string_view s) {
  for (State state : kEveryState) {
    if (to_string(state) == s) return state;
  }
  return std::nullopt;
}

const std::vector<Tool>& all_tools() {
  static const std::vector<Tool> tools = [] {
    std::vector<Tool> out;
    out.reserve(kNames.size());
    for (const auto& [tool, name] : kNames)
      out.push_back(tool);
    return out;
  }();
  return tools;
}

std::string_view tool_name(Tool t) {
  for (const auto& [tool, name] : kNames) {
    if (tool == t) return name;
  }
  return "?";
}

std::optional<Tool> tool_from_name(std::string_view name) {
  for (const auto& [tool, n] : kNames) {
    if (n == name) return tool;
  }
  return std::nullopt;
}

bool is_execution_tool(Tool t) {
  return t == Tool::kRunTritonKernel || t == Tool::kValidateCorrectness ||
         t == Tool::kMeasureKernelTime || t == Tool::kBenchmarkKernel;
}

std::vector<State> allowed_states(Tool t) {
  switch (t) {
    case Tool::kSetKernelName:
      return {State::kStart};
    case Tool::kWriteKernelCode:
      return {State::kWrite};
    case Tool::kWriteTestCode:
    case Tool::kRunTritonKernel:
    case Tool::kValidateCorrectness:
    case Tool::kMeasureKernelTime:
    case Tool::kBenchmarkKernel:
      return {State::kWrite, State::kEvaluation};
    case Tool::kGetBestKernel:
      return {State::kEvaluation, State::kEnd};
    default:
      return {kEveryState.begin(), kEveryState.end()};
  }
}

std::string path_between(State from, State to) {
  if (from == to) return "";
  switch (to) {
    case State::kStart:
      return "set_kernel_name(name, new_session=true) starts a new session in 'start'";
    case State::kWrite:
      return from == State::kStart ? "set_kernel_name(name)" : "force_transition_to_write()";
    case State::kEvaluation:
      if (from == State::kWrite) return "write_kernel_code(code)";
      if (from == State::kStart) return "set_kernel_name(name), then write_kernel_code(code)";
      return "force_transition_to_write(), then write_kernel_code(code)";
    case State::kEnd: {
      std::string last = "get_best_kernel() once enough versions are written and evaluated";
      if (from == State::kEvaluation) return last;
      if (from == State::kWrite) return "write_kernel_code(code), validate it, then " + last;
      return "set_kernel_name(name), write_kernel_code(code), validate it, then " + last;
    }
  }
  return "";
}

Status gate(Tool tool, State state, bool stateless) {
  if (stateless && is_execution_tool(tool)) return Status::ok();
  const std::vector<State> allowed = allowed_states(tool);
  if (std::find(allowed.begin(), allowed.end(), state) != allowed.end()) return Status::ok();
  State nearest = allowed.front();
  for (State s : allowed) {
    if (distance(state, s) < distance(state, nearest)) nearest = s;
  }
  std::string message = std::string(tool_name(tool)) + " is not available in state '" +
                        std::string(to_string(state)) + "'; it runs in " + join_states(allowed) +
                        ". To get to '" + std::string(to_string(nearest)) +
                        "': " + path_between(state, nearest) + ".";
  if (is_execution_tool(tool)) {
    message +=
        " (Its stateless form, with the kernel code passed as an argument, runs in any "
        "state.)";
  }
  return failed_precondition(message);
}

}  // namespace kforge::workbench
