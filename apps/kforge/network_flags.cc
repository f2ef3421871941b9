#include "network_flags.h"

#include <sys/resource.h>

#include <algorithm>
#include <string>

#include "kforge/common/json.h"
#include "kforge/common/log.h"

namespace kforge::app {
namespace {

constexpr size_t kReservedFiles = 256;  // workers' pipes, the store, logs, eventfds

}  // namespace

void add_network_flags(CLI::App& cmd, NetworkFlags& f) {
  cmd.add_option("--max-connections", f.max_connections,
                 "Open connections at once; at the cap the longest-idle connection is closed "
                 "for a new one, or the new one gets 503 (0: half the open-file limit, at most "
                 "4096)")
      ->envname("KFORGE_MAX_CONNECTIONS")
      ->capture_default_str();
  cmd.add_option("--idle-timeout-s", f.idle_timeout_s,
                 "Close a connection that has not started a request for this long")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  cmd.add_option("--header-timeout-s", f.header_timeout_s,
                 "A request head must arrive within this long of its first byte")
      ->check(CLI::Range(1, 600))
      ->capture_default_str();
  cmd.add_option("--body-timeout-s", f.body_timeout_s,
                 "A request body must arrive within this long after its head")
      ->check(CLI::Range(1, 3600))
      ->capture_default_str();
  cmd.add_option("--mcp-max-sessions", f.mcp_max_sessions,
                 "MCP: sessions in use at once; initialize is answered 503 beyond (sessions "
                 "in use are never evicted)")
      ->check(CLI::Range(size_t{1}, size_t{1} << 24))
      ->capture_default_str();
  cmd.add_option("--mcp-max-pending-sessions", f.mcp_max_pending_sessions,
                 "MCP: sessions initialized but not used yet; past this the oldest is dropped")
      ->check(CLI::Range(size_t{1}, size_t{1} << 24))
      ->capture_default_str();
  cmd.add_option("--mcp-max-sessions-per-client", f.mcp_max_sessions_per_client,
                 "MCP: sessions of one client (token and address); 429 beyond")
      ->check(CLI::Range(size_t{1}, size_t{1} << 24))
      ->capture_default_str();
}

void add_json_depth_flag(CLI::App& cmd) {
  cmd.add_option_function<size_t>(
         "--max-json-depth",
         [](const size_t& depth) {
           // The range check below makes this succeed.
           set_max_json_depth(depth).ignore();
         },
         "Deepest nesting of arrays and objects accepted in any JSON input (requests, MCP "
         "messages, worker frames); deeper input is refused while parsing (default " +
             std::to_string(kDefaultMaxJsonDepth) + ")")
      ->envname("KFORGE_MAX_JSON_DEPTH")
      ->check(CLI::Range(size_t{1}, kMaxJsonDepthCeiling));
}

size_t raise_open_file_limit() {
  rlimit limit{};
  if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) return 1024;
  if (limit.rlim_cur < limit.rlim_max) {
    rlimit raised = limit;
    raised.rlim_cur = limit.rlim_max;
    if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) limit = raised;
  }
  if (limit.rlim_cur == RLIM_INFINITY) return size_t{1} << 20;
  return static_cast<size_t>(limit.rlim_cur);
}

size_t default_max_connections(size_t open_files) {
  const size_t spare = open_files > kReservedFiles ? open_files - kReservedFiles : 0;
  return std::clamp<size_t>(spare / 2, 16, 4096);
}

Status apply_network_flags(const NetworkFlags& f, size_t open_files,
                           frontends::http::HttpServer::Options& http,
                           frontends::mcp::HttpTransportOptions& mcp) {
  http.max_connections =
      f.max_connections != 0 ? f.max_connections : default_max_connections(open_files);
  if (http.max_connections + kReservedFiles > open_files) {
    return invalid_argument("--max-connections " + std::to_string(http.max_connections) +
                                " leaves too few of the " + std::to_string(open_files) +
                                " open files allowed (RLIMIT_NOFILE) for the server itself (" +
                                std::to_string(kReservedFiles) + ")",
                            "--max-connections");
  }
  http.idle_timeout = std::chrono::seconds(f.idle_timeout_s);
  http.header_timeout = std::chrono::seconds(f.header_timeout_s);
  http.body_timeout = std::chrono::seconds(f.body_timeout_s);
  mcp.sessions.max_sessions = f.mcp_max_sessions;
  mcp.sessions.max_pending_sessions = f.mcp_max_pending_sessions;
  mcp.sessions.max_sessions_per_client = f.mcp_max_sessions_per_client;
  KF_LOG_INFO("limits: {} connections (open files {}), JSON depth {}, MCP sessions {}",
              http.max_connections, open_files, max_json_depth(), f.mcp_max_sessions);
  return Status::ok();
}

}  // namespace kforge::app
