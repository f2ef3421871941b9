// `kforge serve`'s limits on its network surface (docs/security.md "Network surface and
// limits"): connections and their timeouts, JSON nesting depth, MCP sessions.
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>

#include "kforge/common/status.h"
#include "kforge/frontends/http/http_server.h"
#include "kforge/frontends/mcp/http_transport.h"

namespace kforge::app {

struct NetworkFlags {
  size_t max_connections = 0;  // 0: derived from RLIMIT_NOFILE (see raise_open_file_limit)
  int idle_timeout_s = 60;
  int header_timeout_s = 30;
  int body_timeout_s = 60;
  size_t mcp_max_sessions = 10000;
  size_t mcp_max_pending_sessions = 1000;
  size_t mcp_max_sessions_per_client = 5000;
};

// Registers --max-connections, --idle-timeout-s, --header-timeout-s, --body-timeout-s and
// the --mcp-max-* session limits.
void add_network_flags(CLI::App& cmd, NetworkFlags& flags);

// Registers --max-json-depth (serve and mcp) and applies it when parsed.
void add_json_depth_flag(CLI::App& cmd);

// Raises the soft RLIMIT_NOFILE to the hard limit and returns the resulting soft limit.
size_t raise_open_file_limit();

// The connection cap for `open_files` descriptors when none is configured: half of what
// the workers, the store and the logs leave (256 kept for them), between 16 and 4096.
size_t default_max_connections(size_t open_files);

// Copies the flags into the HTTP server's and the MCP transport's options.
// kInvalidArgument when --max-connections does not leave room for the server's own files.
Status apply_network_flags(const NetworkFlags& flags, size_t open_files,
                           frontends::http::HttpServer::Options& http,
                           frontends::mcp::HttpTransportOptions& mcp);

}  // namespace kforge::app
