// What `kforge serve` and `kforge mcp` share for the Triton workbench (docs/workbench.md):
// its flags and how it is built from them (store, knowledge base, workspace root).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>

#include "kforge/common/status.h"
#include "kforge/jobs/job_service.h"
#include "kforge/workbench/workbench.h"

namespace kforge::app {

struct WorkbenchFlags {
  std::string workspace;  // empty: <data-dir>/workbench
  std::string device;     // empty: the first GPU, else cpu
  int min_versions = 3;
  int64_t context_budget = 128000;
};

// Registers --workspace, --workbench-device, --min-versions and --context-budget.
void add_workbench_flags(CLI::App& cmd, WorkbenchFlags& flags);

// The workspace root the flags give for a data directory.
std::filesystem::path workspace_root(const WorkbenchFlags& flags,
                                     const std::filesystem::path& data_dir);

// The SQLite file of the workbench's sessions for an engine whose store is `store` (--store):
// the engine's own database, <data-dir>/kforge.db, when that is SQLite, so sessions and jobs
// share one file; with a PostgreSQL store, a file of the workbench's own, <data-dir>/workbench.db.
// Sessions stay on the node in either case: their workspace files are on this node's disk, so a
// session row in a database other nodes read would name files they do not have
// (docs/deployment.md "Several nodes (PostgreSQL)").
std::filesystem::path workbench_database(const std::filesystem::path& data_dir,
                                         const std::string& store);

// Opens the workbench's store in `database` (workbench_database(); a file of its own in the
// workspace root when jobs run on a remote server) and builds the workbench. `executor` runs
// its blocking work.
StatusOr<std::unique_ptr<workbench::Workbench>> build_workbench(
    const WorkbenchFlags& flags, const std::filesystem::path& data_dir,
    const std::filesystem::path& database, jobs::JobService& service, workbench::Executor executor);

}  // namespace kforge::app
