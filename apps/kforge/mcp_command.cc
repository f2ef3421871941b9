#include "mcp_command.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <boost/asio/thread_pool.hpp>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <thread>

#include "kforge/common/log.h"
#include "kforge/frontends/mcp/dispatcher.h"
#include "kforge/frontends/mcp/remote_job_service.h"
#include "kforge/frontends/mcp/server_catalog.h"
#include "kforge/frontends/mcp/stdio_transport.h"
#include "kforge/jobs/engine.h"
#include "network_flags.h"
#include "version.h"

namespace kforge::app {
namespace {

namespace mcp = frontends::mcp;

// ~/.cache/kforge/mcp-data (XDG_CACHE_HOME respected).
std::filesystem::path default_data_root() {
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
    return std::filesystem::path(xdg) / "kforge";
  }
  const char* home = std::getenv("HOME");
  return std::filesystem::path(home != nullptr ? home : ".") / ".cache" / "kforge";
}

// The embedded engine. A data directory is locked by one process at a time: with the default
// directory, a second `kforge mcp` (another editor window) takes mcp-data-2, and so on.
StatusOr<jobs::Engine> start_engine(const McpConfig& c) {
  jobs::EngineOptions eo = engine_options(c.engine);
  std::vector<std::filesystem::path> candidates;
  if (!c.data_dir.empty()) {
    candidates.emplace_back(c.data_dir);
  } else {
    const auto root = default_data_root();
    candidates.push_back(root / "mcp-data");
    for (int i = 2; i <= 8; ++i)
      candidates.push_back(root / ("mcp-data-" + std::to_string(i)));
  }
  Status last;
  for (const auto& dir : candidates) {
    eo.data_dir = dir;
    auto engine = jobs::build_engine(eo);
    if (engine.is_ok()) {
      KF_LOG_INFO("kforge mcp: data dir {}", dir.string());
      return engine;
    }
    last = engine.status();
    if (last.code() != ErrorCode::kFailedPrecondition) break;  // not merely "in use"
  }
  return last;
}

}  // namespace

CLI::App* add_mcp_command(CLI::App& app, McpConfig& c) {
  CLI::App* cmd = app.add_subcommand(
      "mcp",
      "Run an MCP server on stdin/stdout (one JSON-RPC message per line); jobs run in an "
      "embedded engine, or on a running `kforge serve` with --server");
  cmd->add_option("--data-dir", c.data_dir,
                  "Jobs database of the embedded engine (default ~/.cache/kforge/mcp-data; "
                  "mcp-data-2.. when another kforge mcp holds it)")
      ->envname("KFORGE_MCP_DATA_DIR");
  add_engine_flags(*cmd, c.engine,
                   "Devices of the embedded engine: all, gpus, cpu, or a list such as cpu,cuda:0");
  cmd->add_option("--log-level", c.log_level, "trace, debug, info, warning, error (to stderr)")
      ->envname("KFORGE_LOG_LEVEL")
      ->capture_default_str();
  cmd->add_option("--server", c.server,
                  "Forward tool calls to this kforge serve (http://host:port) instead of "
                  "running jobs here")
      ->envname("KFORGE_SERVER");
  add_secret_flags(*cmd, c.secrets, "API token of the --server");
  add_json_depth_flag(*cmd);
  cmd->add_flag("--conformance-fixtures", c.conformance_fixtures,
                "Also serve the MCP conformance suite's fixture tools, resources and prompts");
  cmd->add_option("--max-message-mb", c.max_message_mb, "Largest message accepted (MiB)")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  return cmd;
}

int run_mcp(const McpConfig& c) {
  if (Status s = log::init(c.log_level); !s) {
    std::cerr << "kforge mcp: " << s.to_string() << '\n';
    return 2;
  }
  auto token = protect_process_and_read_token(c.secrets);
  if (!token.is_ok()) {
    KF_LOG_ERROR("kforge mcp: {}", token.status().to_string());
    return 2;
  }
  const sigset_t signals = block_termination_signals();

  std::unique_ptr<jobs::JobService> remote;
  std::optional<jobs::Engine> engine;
  jobs::JobService* service = nullptr;
  if (!c.server.empty()) {
    auto client = mcp::RestClient::create({c.server, *token, std::chrono::seconds(30)});
    if (!client.is_ok()) {
      KF_LOG_ERROR("kforge mcp: {}", client.status().to_string());
      return 2;
    }
    remote = std::make_unique<mcp::RemoteJobService>(std::move(client).value());
    service = remote.get();
    KF_LOG_INFO("kforge mcp: forwarding tool calls to {}", c.server);
  } else {
    auto started = start_engine(c);
    if (!started.is_ok()) {
      KF_LOG_ERROR("kforge mcp: cannot start the engine: {}", started.status().to_string());
      return 2;
    }
    engine = std::move(started).value();
    if (Status s = engine->service->start(); !s) {
      KF_LOG_ERROR("kforge mcp: cannot start the job service: {}", s.to_string());
      return 2;
    }
    service = engine->service.get();
  }
  std::unique_ptr<jobs::RetentionSweeper> retention;  // stopped before the engine
  if (engine) {
    auto started = start_retention(c.engine, *engine->service);
    if (!started.is_ok()) {
      KF_LOG_ERROR("kforge mcp: {}", started.status().to_string());
      engine->service->stop();
      return 2;
    }
    retention = std::move(started).value();
  }

  int code = 0;
  {
    boost::asio::thread_pool pool(4);
    const auto blocking = frontends::http::make_blocking_executor(pool);
    mcp::ServerCatalogOptions options;
    options.version = std::string(kVersion);
    options.conformance_fixtures = c.conformance_fixtures;
    auto catalog = mcp::build_server_catalog(*service, blocking, options);
    if (!catalog.is_ok()) {
      KF_LOG_ERROR("kforge mcp: {}", catalog.status().to_string());
      code = 2;
    } else {
      mcp::Dispatcher dispatcher(**catalog, blocking);
      mcp::StdioTransport transport(dispatcher, STDIN_FILENO, STDOUT_FILENO,
                                    {c.max_message_mb << 20});
      std::thread signal_thread([&] {
        int sig = 0;
        sigwait(&signals, &sig);  // a real signal, or the wake-up below once input ended
        transport.stop();
      });
      Status s = transport.run();
      if (!s.is_ok()) {
        KF_LOG_ERROR("kforge mcp: {}", s.to_string());
        code = 1;
      }
      KF_LOG_INFO("kforge mcp: input closed, shutting down");
      pthread_kill(signal_thread.native_handle(), SIGTERM);
      signal_thread.join();
      if (engine) engine->service->stop();  // no more callbacks into the tools
      pool.join();
    }
  }
  return code;
}

}  // namespace kforge::app
