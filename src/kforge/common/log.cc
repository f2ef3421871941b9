#include "kforge/common/log.h"

#include <spdlog/sinks/stdout_color_sinks.h>

#include <string>

namespace kforge::log {

StatusOr<spdlog::level::level_enum> parse_level(std::string_view level, std::string_view field) {
  std::string l(level);
  for (char& c : l)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (l == "trace") return spdlog::level::trace;
  if (l == "debug") return spdlog::level::debug;
  if (l == "info") return spdlog::level::info;
  if (l == "warning" || l == "warn") return spdlog::level::warn;
  if (l == "error") return spdlog::level::err;
  if (l == "critical") return spdlog::level::critical;
  if (l == "off") return spdlog::level::off;
  return invalid_argument("unknown log level '" + std::string(level) +
                              "' (expected trace, debug, info, warning, error, critical or off)",
                          std::string(field));
}

Status init(std::string_view level) {
  KF_ASSIGN_OR_RETURN(auto lvl, parse_level(level, "--log-level"));
  auto logger = spdlog::stderr_color_mt("kforge");
  logger->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%l%$ %v");
  logger->set_level(lvl);
  spdlog::set_default_logger(std::move(logger));
  return Status::ok();
}

}  // namespace kforge::log
