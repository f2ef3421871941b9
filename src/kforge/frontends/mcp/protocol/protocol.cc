#include "kforge/frontends/mcp/protocol/protocol.h"

#include <algorithm>
#include <array>

namespace kforge::frontends::mcp {
namespace {

constexpr std::array<std::string_view, 8> kLevelNames = {
    "debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"};

}  // namespace

const std::vector<std::string_view>& supported_protocol_versions() {
  static const std::vector<std::string_view> versions = {kLatestProtocolVersion, "2025-06-18",
                                                         "2025-03-26"};
  return versions;
}

bool is_supported_protocol_version(std::string_view version) {
  const auto& all = supported_protocol_versions();
  return std::find(all.begin(), all.end(), version) != all.end();
}

std::string negotiate_protocol_version(const Json& requested) {
  if (requested.is_string() && is_supported_protocol_version(requested.get<std::string>())) {
    return requested.get<std::string>();
  }
  return std::string(kLatestProtocolVersion);
}

bool batches_allowed(std::string_view version) {
  return version == "2025-03-26";
}

bool structured_content_allowed(std::string_view version) {
  // Revisions are dates, so they order as strings.
  return version >= std::string_view("2025-06-18");
}

std::optional<LogLevel> log_level_from(std::string_view name) {
  for (size_t i = 0; i < kLevelNames.size(); ++i) {
    if (kLevelNames[i] == name) return static_cast<LogLevel>(i);
  }
  return std::nullopt;
}

std::string_view to_string(LogLevel level) {
  return kLevelNames[static_cast<size_t>(level)];
}

}  // namespace kforge::frontends::mcp
