// The catalog an MCP frontend serves (the same for Streamable HTTP and stdio): kforge's
// identity and instructions, the kernel tools on a JobService, the Triton workbench's tools,
// resources and prompts when a workbench is given, and — only when asked for with
// --conformance-fixtures — the conformance suite's fixtures next to them; the agent skills of
// --skills-dir (skills.h).
#pragma once

#include <memory>
#include <string>

#include "kforge/bench/bench_request.h"
#include "kforge/common/status.h"
#include "kforge/frontends/http/blocking_executor.h"
#include "kforge/frontends/mcp/kernel_tools.h"
#include "kforge/frontends/mcp/protocol/catalog.h"
#include "kforge/jobs/job_service.h"
#include "kforge/workbench/workbench.h"

namespace kforge::frontends::mcp {

struct ServerCatalogOptions {
  std::string version = "dev";
  bool conformance_fixtures = false;
  std::string skills_dir;  // non-empty: serve its skills (skills.h)
  // Non-empty: batch_compare and run_benchmark_suite run as durable tasks (task_book.h) kept in
  // this directory (kforge serve and kforge mcp: <data dir>/mcp-tasks).
  std::string tasks_dir;
  KernelToolsOptions kernel_tools;
  bench::BenchPolicy bench;                   // run_benchmark_suite
  workbench::Workbench* workbench = nullptr;  // must outlive the catalog when set
};

// The catalog is heap-allocated because its entries keep pointers into it; it must outlive
// the dispatcher. `service` and the pool behind `blocking` must outlive every tool call.
StatusOr<std::unique_ptr<Catalog>> build_server_catalog(jobs::JobService& service,
                                                        http::BlockingExecutor blocking,
                                                        const ServerCatalogOptions& options);

}  // namespace kforge::frontends::mcp
