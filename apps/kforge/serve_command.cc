#include "serve_command.h"

#include <malloc.h>
#include <signal.h>
#include <unistd.h>

#include <boost/asio/thread_pool.hpp>
#include <cstdlib>
#include <fstream>
#include <iostream>

#include "kforge/app/engine.h"
#include "kforge/common/log.h"
#include "kforge/frontends/http/api_docs.h"
#include "kforge/frontends/http/bench_route.h"
#include "kforge/frontends/http/http_server.h"
#include "kforge/frontends/http/ui_route.h"
#include "kforge/frontends/http/workbench_routes.h"
#include "kforge/frontends/mcp/http_transport.h"
#include "kforge/frontends/mcp/protocol/dispatcher.h"
#include "kforge/frontends/mcp/protocol/input_required.h"
#include "kforge/frontends/mcp/server_catalog.h"
#include "version.h"

namespace kforge::app {
namespace {

constexpr int kMmapThresholdBytes = 256 * 1024;

std::string lower(std::string text) {
  for (char& ch : text)
    ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return text;
}

// The GPU type of submit answers: --gpu-type / GPU_TYPE, else a100, h100 or h200 when the
// first GPU's name says so (as the old server read nvidia-smi); empty when unknown.
std::string gpu_type_of(const std::string& configured, const Json& health) {
  if (!configured.empty()) return lower(configured);
  for (const auto& d : health.value("devices", Json::array())) {
    const Json facts = d.value("facts", Json::object());
    if (facts.value("kind", "") != "gpu") continue;
    const std::string name = lower(facts.value("name", ""));
    for (const char* type : {"a100", "h100", "h200"}) {
      if (name.find(type) != std::string::npos) return type;
    }
    return {};
  }
  return {};
}

}  // namespace

CLI::App* add_serve_command(CLI::App& app, ServeConfig& c) {
  CLI::App* cmd = app.add_subcommand(
      "serve", "Run the evaluation server: REST API and MCP (Streamable HTTP on /mcp), one port");
  cmd->add_option("--host", c.host,
                  "Address (or name, resolved) to bind; one that is not a loopback address "
                  "(127.0.0.0/8, ::1) needs an API token")
      ->envname("KFORGE_HOST")
      ->capture_default_str();
  cmd->add_option("--port", c.port, "TCP port; 0 picks a free one (see --port-file)")
      ->envname("KFORGE_PORT")
      ->capture_default_str();
  cmd->add_option("--data-dir", c.data_dir, "Jobs database, caches and scratch space")
      ->envname("KFORGE_DATA_DIR")
      ->capture_default_str();
  add_engine_flags(*cmd, c.engine,
                   "Devices to serve: all (cpu + every visible GPU), gpus, cpu, or a list "
                   "such as cpu,cuda:0");
  cmd->add_option("--mode", c.mode,
                  "Frontends: rest (the REST API; 'fastapi' is the old server's name for it), "
                  "mcp (MCP on /mcp) or both")
      ->envname("KFORGE_MODE")
      ->check(CLI::IsMember({"rest", "fastapi", "mcp", "both"}))
      ->capture_default_str();
  cmd->add_option("--gpu-type", c.gpu_type,
                  "GPU type named in submit answers (gpu_type, X-GPU-Type), e.g. h100; default: "
                  "from the first GPU's name when it is an A100, H100 or H200")
      ->envname("GPU_TYPE");
  cmd->add_flag("--conformance-fixtures", c.conformance_fixtures,
                "MCP: also serve the fixture tools, resources and prompts of the official MCP "
                "conformance suite (for testing MCP conformance only)");
  cmd->add_option("--skills-dir", c.skills_dir,
                  "MCP: serve the agent skills of this directory (each <name>/SKILL.md; e.g. "
                  "kforge's skills/) through the skills extension")
      ->envname("KFORGE_SKILLS_DIR");
  cmd->add_option("--mcp-state-key-file", c.mcp_state_key_file,
                  "MCP: the key that signs 2026-07-28 requestState values (64 hex characters; "
                  "created when missing). Give every server behind one address the same file. "
                  "Default: <data dir>/mcp-state.key")
      ->envname("KFORGE_MCP_STATE_KEY_FILE");
  add_workbench_flags(*cmd, c.workbench);
  cmd->add_option("--mcp-session-ttl-hours", c.mcp_session_ttl_hours,
                  "MCP: an idle session is forgotten after this many hours")
      ->check(CLI::Range(1, 24 * 365))
      ->capture_default_str();
  add_secret_flags(*cmd, c.secrets,
                   "API token (the user principal 'default'); with any token every request needs "
                   "'Authorization: Bearer <token>'");
  add_principal_flags(*cmd, c.secrets);
  add_network_flags(*cmd, c.network);
  add_json_depth_flag(*cmd);
  cmd->add_option("--log-level", c.log_level,
                  "trace, debug, info, warning, error, critical (also from LOG_LEVEL)")
      ->envname("KFORGE_LOG_LEVEL")
      ->each([&c](const std::string&) { c.log_level_given = true; })
      ->capture_default_str();
  cmd->add_option("--port-file", c.port_file, "Write the bound port to this file when listening");
  cmd->add_option("--max-body-mb", c.max_body_mb, "Largest request body accepted (MiB)")
      ->envname("KFORGE_MAX_BODY_MB")
      ->capture_default_str();
  cmd->add_option("--child-memory-mb", c.child_memory_mb,
                  "Host memory limit per job (MiB; its cgroup's memory.max; 0 = 3/4 of the "
                  "machine's or kforge's own cgroup limit, whichever is smaller)")
      ->envname("KFORGE_CHILD_MEMORY_MB")
      ->capture_default_str();
  cmd->add_option("--output-cap-kb", c.output_cap_kb,
                  "Captured stdout/stderr per job and stream (KiB)")
      ->capture_default_str();
  cmd->add_option("--max-attempts", c.max_attempts,
                  "Starts per job across server restarts before it is failed")
      ->capture_default_str();
  cmd->add_option("--io-threads", c.io_threads, "Network threads")->capture_default_str();
  return cmd;
}

int run_serve(const ServeConfig& config) {
  // Request bodies (up to --max-body-mb) and the strings parsed from them are large and
  // short-lived: from mmap they go back to the system when freed, so the server's RSS follows
  // what it holds (queued work lives in the store). glibc's dynamic threshold otherwise moves
  // them into its heap after the first one is freed, where they stay.
  ::mallopt(M_MMAP_THRESHOLD, kMmapThresholdBytes);  // NOLINT(concurrency-mt-unsafe): no thread yet
  ServeConfig c = config;
  if (c.mode == "fastapi") c.mode = "rest";
  // The old server's variable; read before any thread starts.
  const char* level = std::getenv("LOG_LEVEL");  // NOLINT(concurrency-mt-unsafe)
  if (!c.log_level_given && level != nullptr) c.log_level = level;
  if (Status s = log::init(c.log_level); !s) {
    std::cerr << "kforge: " << s.to_string() << '\n';
    return 2;
  }
  auto token = protect_process_and_read_token(c.secrets);
  if (!token.is_ok()) {
    KF_LOG_ERROR("cannot start: {}", token.status().to_string());
    return 2;
  }
  auto tokens = read_principal_tokens(c.secrets, *token);
  if (!tokens.is_ok()) {
    KF_LOG_ERROR("cannot start: {}", tokens.status().to_string());
    return 2;
  }
  // The host is resolved and its address checked (127.0.0.0/8 or ::1 needs no token) before
  // anything starts; the server checks the address it binds again.
  const bool has_token = !token->empty() || !tokens->empty();
  if (Status s = frontends::http::HttpServer::check_bind_policy(c.host, has_token); !s) {
    KF_LOG_ERROR("cannot start: {}{}", s.to_string(),
                 s.code() == ErrorCode::kFailedPrecondition
                     ? " (kforge runs arbitrary code by design)"
                     : "");
    return 2;
  }
  frontends::http::HttpServer::Options ho;
  frontends::mcp::HttpTransportOptions to;
  if (Status s = apply_network_flags(c.network, raise_open_file_limit(), ho, to); !s) {
    KF_LOG_ERROR("cannot start: {}", s.to_string());
    return 2;
  }
  // Signals are taken by a dedicated thread (sigwait); every other thread blocks them.
  const sigset_t signals = block_termination_signals();

  app::EngineOptions eo = engine_options(c.engine);
  eo.data_dir = c.data_dir;
  eo.child_memory_bytes = c.child_memory_mb << 20;
  eo.output_cap_bytes = c.output_cap_kb << 10;
  eo.max_attempts = c.max_attempts;
  auto engine = app::build_engine(eo);
  if (!engine.is_ok()) {
    KF_LOG_ERROR("cannot start: {}", engine.status().to_string());
    return 2;
  }
  jobs::JobServiceImpl& service = *engine->service;
  if (Status s = service.start(); !s) {
    KF_LOG_ERROR("cannot start the job service: {}", s.to_string());
    return 2;
  }
  auto retention = start_retention(c.engine, service);
  if (!retention.is_ok()) {
    KF_LOG_ERROR("cannot start: {}", retention.status().to_string());
    service.stop();
    return 2;
  }

  boost::asio::thread_pool blocking_pool(4);
  ho.host = c.host;
  ho.port = c.port;
  ho.token = *token;
  ho.tokens = std::move(tokens).value();
  ho.max_body_bytes = c.max_body_mb << 20;
  ho.io_threads = c.io_threads;
  ho.rest.gpu_type = gpu_type_of(c.gpu_type, service.health());
  const auto blocking = frontends::http::make_blocking_executor(blocking_pool);
  frontends::http::Router router;
  if (c.mode != "mcp") {
    bench::BenchPolicy bench_policy;
    bench_policy.kforge_version = std::string(kVersion);
    Status s = frontends::http::add_rest_routes(router, service, blocking, ho.rest);
    // Finished bench reports are kept in the data dir, for GET /bench/reports.
    auto reports =
        bench::BenchReportBook::open({.dir = std::filesystem::path(c.data_dir) / "bench-reports"});
    if (s.is_ok() && !reports.is_ok()) s = reports.status().with_context("bench reports");
    if (s.is_ok()) {
      s = frontends::http::add_bench_route(router, service, blocking, bench_policy,
                                           std::move(reports).value());
    }
    if (s.is_ok()) s = frontends::http::add_ui_routes(router);  // the web UI reads the REST API
    if (!s.is_ok()) {
      KF_LOG_ERROR("cannot set up the REST API: {}", s.to_string());
      service.stop();
      return 2;
    }
  }
  // The MCP catalog and dispatcher outlive the server and the pool's tasks (declared first).
  std::unique_ptr<workbench::Workbench> workbench;
  std::unique_ptr<frontends::mcp::Catalog> catalog;
  std::unique_ptr<frontends::mcp::Dispatcher> dispatcher;
  if (c.mode != "rest") {
    frontends::mcp::ServerCatalogOptions mo;
    mo.version = std::string(kVersion);
    mo.conformance_fixtures = c.conformance_fixtures;
    mo.skills_dir = c.skills_dir;
    mo.tasks_dir = (std::filesystem::path(c.data_dir) / "mcp-tasks").string();
    const std::filesystem::path key_file = c.mcp_state_key_file.empty()
                                               ? std::filesystem::path(c.data_dir) / "mcp-state.key"
                                               : std::filesystem::path(c.mcp_state_key_file);
    mo.kernel_tools.limits = ho.rest.limits;
    mo.bench.kforge_version = std::string(kVersion);
    // The workbench's sessions: in the engine's SQLite file, or the node's own beside it.
    auto wb = build_workbench(c.workbench, c.data_dir,
                              workbench_database(c.data_dir, c.engine.store), service, blocking);
    const Status wb_status = wb.status();
    if (wb_status.is_ok()) {
      workbench = std::move(wb).value();
      mo.workbench = workbench.get();
    }
    const Status ready = wb_status.is_ok() ? frontends::mcp::mrtr::use_key_file(key_file)
                                           : wb_status.with_context("workbench");
    auto built = ready.is_ok() ? frontends::mcp::build_server_catalog(service, blocking, mo)
                               : StatusOr<std::unique_ptr<frontends::mcp::Catalog>>(ready);
    Status s = built.is_ok() ? Status::ok() : built.status();
    if (s.is_ok()) {
      catalog = std::move(built).value();
      dispatcher = std::make_unique<frontends::mcp::Dispatcher>(*catalog, blocking);
      to.sessions.idle_ttl = std::chrono::hours(c.mcp_session_ttl_hours);
      s = frontends::mcp::add_mcp_routes(router, *dispatcher, blocking, to);
    }
    // The REST API reads the workbench's stored sessions (its MCP tools change them).
    if (s.is_ok() && c.mode != "mcp") {
      s = frontends::http::add_workbench_routes(router, *workbench, blocking);
    }
    if (!s.is_ok()) {
      KF_LOG_ERROR("cannot set up MCP: {}", s.to_string());
      service.stop();
      return 2;
    }
  }
  if (Status s = frontends::http::add_docs_routes(router); !s) {
    KF_LOG_ERROR("cannot set up /openapi.json and /docs: {}", s.to_string());
    service.stop();
    return 2;
  }
  auto server = frontends::http::HttpServer::create(ho, std::move(router));
  if (!server.is_ok()) {
    KF_LOG_ERROR("cannot listen on {}:{}: {}", c.host, c.port, server.status().to_string());
    service.stop();
    return 2;
  }
  uint16_t port = (*server)->bound_port();
  if (!c.port_file.empty()) {
    std::ofstream(c.port_file + ".tmp") << port << '\n';
    std::rename((c.port_file + ".tmp").c_str(), c.port_file.c_str());
  }
  KF_LOG_INFO("kforge {} listening on http://{}:{} ({}; data dir {})", kVersion, c.host, port,
              c.mode == "both"  ? "REST API and MCP on /mcp"
              : c.mode == "mcp" ? "MCP on /mcp"
                                : "REST API",
              c.data_dir);

  {
    SignalWatch watch(signals, [&](int sig) {
      KF_LOG_INFO("received signal {}, shutting down", sig);
      (*server)->stop();
    });
    (*server)->run();
  }  // run() returned: either a signal stopped it or it failed; the watch ends here
  blocking_pool.join();  // handlers still running on the pool may call into the service
  service.stop();
  KF_LOG_INFO("kforge stopped");
  return 0;
}

}  // namespace kforge::app
