#include "mcp_command.h"

#include <signal.h>
#include <unistd.h>

#include <boost/asio/thread_pool.hpp>
#include <iostream>
#include <memory>
#include <optional>

#include "kforge/app/engine.h"
#include "kforge/common/files.h"
#include "kforge/common/log.h"
#include "kforge/frontends/mcp/protocol/dispatcher.h"
#include "kforge/frontends/mcp/protocol/input_required.h"
#include "kforge/frontends/mcp/remote_job_service.h"
#include "kforge/frontends/mcp/server_catalog.h"
#include "kforge/frontends/mcp/stdio_transport.h"
#include "network_flags.h"
#include "version.h"

namespace kforge::app {
namespace {

namespace mcp = frontends::mcp;

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
  cmd->add_option("--skills-dir", c.skills_dir,
                  "Serve the agent skills of this directory (each <name>/SKILL.md; e.g. "
                  "kforge's skills/) through the skills extension")
      ->envname("KFORGE_SKILLS_DIR");
  cmd->add_option("--mcp-state-key-file", c.mcp_state_key_file,
                  "The key that signs 2026-07-28 requestState values (64 hex characters; created "
                  "when missing). Default: <data dir>/mcp-state.key")
      ->envname("KFORGE_MCP_STATE_KEY_FILE");
  add_workbench_flags(*cmd, c.workbench);
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
  // A configuration that cannot serve still answers the client: every request gets a
  // JSON-RPC error with the reason (an MCP client shows it; a closed pipe says nothing).
  // A terminal gets the log line alone; SIGINT and SIGTERM end the wait as they would.
  auto cannot_serve = [](const std::string& why) {
    KF_LOG_ERROR("kforge mcp: {}", why);
    if (::isatty(STDIN_FILENO) == 0) {
      const sigset_t termination = termination_signals();
      pthread_sigmask(SIG_UNBLOCK, &termination, nullptr);
      (void)mcp::answer_requests_with_error(STDIN_FILENO, STDOUT_FILENO,
                                            "kforge mcp cannot start: " + why);
    }
    return 2;
  };
  auto token = protect_process_and_read_token(c.secrets);
  if (!token.is_ok()) return cannot_serve(token.status().to_string());
  const sigset_t signals = block_termination_signals();

  std::unique_ptr<jobs::JobService> remote;
  std::optional<app::Engine> engine;
  jobs::JobService* service = nullptr;
  // The workbench's sessions live in the engine's SQLite file (workbench_database());
  // forwarding to a server, in a database of their own in the workspace root.
  std::filesystem::path data_dir;
  std::filesystem::path workbench_db;
  if (!c.server.empty()) {
    auto client = mcp::RestClient::create({c.server, *token, std::chrono::seconds(30)});
    if (!client.is_ok()) return cannot_serve(client.status().to_string());
    remote = std::make_unique<mcp::RemoteJobService>(std::move(client).value());
    service = remote.get();
    KF_LOG_INFO("kforge mcp: forwarding tool calls to {}", c.server);
    // No engine, no data directory: the workbench keeps its own under the cache root.
    data_dir = default_data_root();
    workbench_db = workspace_root(c.workbench, data_dir) / "workbench.db";
  } else {
    auto started = start_embedded_engine(c.engine, c.data_dir, "mcp-data");
    if (!started.is_ok()) return cannot_serve("the engine: " + started.status().to_string());
    data_dir = started->data_dir;
    workbench_db = workbench_database(data_dir, c.engine.store);
    engine = std::move(started->engine);
    if (Status s = engine->service->start(); !s) {
      return cannot_serve("the job service: " + s.to_string());
    }
    service = engine->service.get();
  }
  std::unique_ptr<jobs::RetentionSweeper> retention;  // stopped before the engine
  if (engine) {
    auto started = start_retention(c.engine, *engine->service);
    if (!started.is_ok()) {
      engine->service->stop();
      return cannot_serve(started.status().to_string());
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
    options.skills_dir = c.skills_dir;
    options.tasks_dir = (data_dir / "mcp-tasks").string();
    const std::filesystem::path key_file = c.mcp_state_key_file.empty()
                                               ? data_dir / "mcp-state.key"
                                               : std::filesystem::path(c.mcp_state_key_file);
    options.bench.allow_local_paths = true;  // the user on stdio owns the files
    options.bench.kforge_version = options.version;
    auto workbench = build_workbench(c.workbench, data_dir, workbench_db, *service, blocking);
    if (workbench.is_ok()) options.workbench = workbench->get();
    Status ready = workbench.is_ok() ? make_dirs(key_file.parent_path())
                                     : workbench.status().with_context("workbench");
    if (ready.is_ok()) ready = mcp::mrtr::use_key_file(key_file);
    auto catalog = ready.is_ok() ? mcp::build_server_catalog(*service, blocking, options)
                                 : StatusOr<std::unique_ptr<mcp::Catalog>>(ready);
    if (!catalog.is_ok()) {
      if (engine) engine->service->stop();
      pool.join();
      code = cannot_serve(catalog.status().to_string());
    } else {
      mcp::Dispatcher dispatcher(**catalog, blocking);
      mcp::StdioTransport transport(dispatcher, STDIN_FILENO, STDOUT_FILENO,
                                    {c.max_message_mb << 20});
      std::optional<SignalWatch> watch(std::in_place, signals, [&](int) { transport.stop(); });
      Status s = transport.run();
      if (!s.is_ok()) {
        KF_LOG_ERROR("kforge mcp: {}", s.to_string());
        code = 1;
      }
      KF_LOG_INFO("kforge mcp: input closed, shutting down");
      watch.reset();
      if (engine) engine->service->stop();  // no more callbacks into the tools
      pool.join();
    }
  }
  return code;
}

}  // namespace kforge::app
