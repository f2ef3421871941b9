#include "workbench_flags.h"

#include "kforge/common/log.h"
#include "kforge/store/sqlite/sqlite_workbench_store.h"
#include "kforge/workbench/knowledge.h"

namespace kforge::app {

void add_workbench_flags(CLI::App& cmd, WorkbenchFlags& flags) {
  cmd.add_option("--workspace", flags.workspace,
                 "Triton workbench: directory of the session workspaces (kernel versions, "
                 "tests, logs), e.g. a project folder (default <data-dir>/workbench)")
      ->envname("KFORGE_WORKSPACE");
  cmd.add_option("--workbench-device", flags.device,
                 "Triton workbench: device of the sessions' jobs (default: the first GPU, "
                 "else cpu)");
  cmd.add_option("--min-versions", flags.min_versions,
                 "Triton workbench: versions written and evaluated before get_best_kernel")
      ->check(CLI::Range(1, 20))
      ->capture_default_str();
  cmd.add_option("--context-budget", flags.context_budget,
                 "Triton workbench: the agent's context budget in tokens (summary at 70 %)")
      ->check(CLI::Range(int64_t{1000}, int64_t{10'000'000}))
      ->capture_default_str();
}

std::filesystem::path workspace_root(const WorkbenchFlags& flags,
                                     const std::filesystem::path& data_dir) {
  if (!flags.workspace.empty()) return std::filesystem::absolute(flags.workspace);
  return std::filesystem::absolute(data_dir / "workbench");
}

std::filesystem::path workbench_database(const std::filesystem::path& data_dir,
                                         const std::string& store) {
  const bool sqlite = store.empty() || store == "sqlite";  // as store::open_store reads it
  return data_dir / (sqlite ? "kforge.db" : "workbench.db");
}

StatusOr<std::unique_ptr<workbench::Workbench>> build_workbench(
    const WorkbenchFlags& flags, const std::filesystem::path& data_dir,
    const std::filesystem::path& database, jobs::JobService& service,
    workbench::Executor executor) {
  KF_ASSIGN_OR_RETURN(auto knowledge, workbench::Knowledge::load());
  KF_ASSIGN_OR_RETURN(auto store, store::SqliteWorkbenchStore::open({.path = database}));
  workbench::WorkbenchOptions options;
  options.root = workspace_root(flags, data_dir);
  options.device = flags.device;
  options.min_versions = flags.min_versions;
  options.context_budget_tokens = flags.context_budget;
  KF_LOG_INFO("workbench: workspaces in {}, sessions in {}", options.root.string(),
              database.string());
  return workbench::Workbench::create(std::move(options), service,
                                      std::shared_ptr<store::WorkbenchStore>(std::move(store)),
                                      std::move(knowledge), std::move(executor));
}

}  // namespace kforge::app
