// JSON Schemas of the kernel tools (kernel_tools.h): what tools/list advertises and what
// tools/call validates before the arguments reach model::parse_* (which checks the
// semantics and names the same fields). Argument names and defaults follow the kernel
// evaluation server's MCP tools (docs/compatibility.md §1); kforge adds `device`,
// `num_correct_trials`, `timing`, and `reference_kernel_*` on validate_kernel.
#pragma once

#include "kforge/common/json.h"

namespace kforge::frontends::mcp {

enum class KernelTool { kEvaluate, kCompare, kValidate };

// Defaults applied when an argument is absent (those of the old server's tools).
inline constexpr int kDefaultNumTrials = 100;
inline constexpr int kDefaultNumWarmup = 10;
inline constexpr double kDefaultTimeoutS = 120.0;
inline constexpr double kDefaultValidateTimeoutS = 60.0;

const Json& kernel_tool_input_schema(KernelTool tool);
// `kernel_type`: a string among model::kernel_type_names() (every tool that takes one).
const Json& kernel_type_schema();
// The job view (jobs/job_view.h) plus `warnings`: the structured result of the kernel tools
// and of get_job_status.
const Json& job_view_schema();
const Json& job_status_input_schema();
const Json& server_stats_input_schema();
const Json& server_stats_schema();

}  // namespace kforge::frontends::mcp
