// Names that become paths: kernel names (kernel/<name>_v<N>.py, log/<name>_log.md) and
// workbench session ids (the session's workspace directory). Both are checked against a
// small alphabet, so nothing a client sends can escape its workspace or reach another one.
#pragma once

#include <string>
#include <string_view>

#include "kforge/common/status.h"

namespace kforge::workbench {

// Longest kernel name accepted (after normalisation).
inline constexpr size_t kMaxKernelNameLength = 48;

// The kernel name as used in file names: lower case, with spaces and '-' turned into '_' (as
// the Triton-kernel MCP server did), then 1-48 characters of [a-z0-9_] starting with a letter.
// kInvalidArgument naming field `name` otherwise (".." or "/" never pass).
StatusOr<std::string> normalize_kernel_name(std::string_view name);

// A session id: "wb_" and 16 lowercase hex digits (64 random bits).
bool is_session_id(std::string_view id);
std::string new_session_id();

}  // namespace kforge::workbench
