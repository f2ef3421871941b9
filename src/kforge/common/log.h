// Leveled logging (spdlog underneath). Messages carry job_id / worker / device as
// `key=value` fields where they concern one job, so an operator can grep for them.
//
// Example:
//   KF_LOG_INFO("job {} finished on {} in {} ms", job_id, device, ms);
#pragma once

#include <spdlog/spdlog.h>

#include <string_view>

#include "kforge/common/status.h"

namespace kforge::log {

// Sets up the process-wide logger writing to stderr at `level`
// ("trace", "debug", "info", "warning"/"warn", "error", "critical", "off").
Status init(std::string_view level);

// Parses a level name; kInvalidArgument naming `field` when unknown.
StatusOr<spdlog::level::level_enum> parse_level(std::string_view level, std::string_view field);

}  // namespace kforge::log

#define KF_LOG_TRACE(...) SPDLOG_TRACE(__VA_ARGS__)
#define KF_LOG_DEBUG(...) ::spdlog::debug(__VA_ARGS__)
#define KF_LOG_INFO(...) ::spdlog::info(__VA_ARGS__)
#define KF_LOG_WARN(...) ::spdlog::warn(__VA_ARGS__)
#define KF_LOG_ERROR(...) ::spdlog::error(__VA_ARGS__)
