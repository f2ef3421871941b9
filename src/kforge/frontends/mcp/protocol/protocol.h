// MCP protocol revisions and the few behaviours that differ between them, plus the logging
// levels of `logging/setLevel` (RFC 5424 order).
//
// kforge speaks the initialize-based revisions 2025-11-25, 2025-06-18 and 2025-03-26, and the
// stateless 2026-07-28 next to them (modern.h; negotiated per request, not by initialize).
// Differences handled here:
// - 2025-03-26 receives JSON-RPC batches (arrays); later revisions removed them.
// - `structuredContent`, `outputSchema` and tool `title` exist from 2025-06-18 on.
// - elicitation exists from 2025-06-18 on.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kforge/common/json.h"

namespace kforge::frontends::mcp {

inline constexpr std::string_view kLatestProtocolVersion = "2025-11-25";
// What a Streamable HTTP request without an MCP-Protocol-Version header is assumed to speak.
inline constexpr std::string_view kDefaultHttpProtocolVersion = "2025-03-26";

// Supported revisions, newest first.
const std::vector<std::string_view>& supported_protocol_versions();
bool is_supported_protocol_version(std::string_view version);

// Version negotiation of `initialize`: the client's requested version when supported, else
// the latest supported one (never an error: the client decides whether to disconnect).
std::string negotiate_protocol_version(const Json& requested);

bool batches_allowed(std::string_view version);
bool structured_content_allowed(std::string_view version);

enum class LogLevel { kDebug, kInfo, kNotice, kWarning, kError, kCritical, kAlert, kEmergency };

std::optional<LogLevel> log_level_from(std::string_view name);
std::string_view to_string(LogLevel level);

}  // namespace kforge::frontends::mcp
