#include "kforge/frontends/mcp/server_catalog.h"

#include "kforge/frontends/mcp/batch_tool.h"
#include "kforge/frontends/mcp/bench_tool.h"
#include "kforge/frontends/mcp/fixtures/conformance_fixtures.h"
#include "kforge/frontends/mcp/kernel_tasks.h"
#include "kforge/frontends/mcp/kernelbench_tool.h"
#include "kforge/frontends/mcp/protocol/skills.h"
#include "kforge/frontends/mcp/workbench_tools.h"

namespace kforge::frontends::mcp {

StatusOr<std::unique_ptr<Catalog>> build_server_catalog(jobs::JobService& service,
                                                        http::BlockingExecutor blocking,
                                                        const ServerCatalogOptions& options) {
  auto catalog = std::make_unique<Catalog>();
  catalog->info.version = options.version;
  catalog->info.description =
      "Compile, check and time GPU kernels (Triton, CUDA, PyTorch) in isolated processes.";
  catalog->info.instructions = kernel_tools_instructions();
  std::shared_ptr<TaskBook> book;
  if (!options.tasks_dir.empty()) {
    KF_ASSIGN_OR_RETURN(book, TaskBook::open(options.tasks_dir));
  }
  KernelToolsOptions kernel_tools = options.kernel_tools;
  kernel_tools.book = book;
  KF_RETURN_IF_ERROR(add_kernel_tools(catalog->tools, service, blocking, kernel_tools));
  KF_RETURN_IF_ERROR(add_bench_tool(catalog->tools, service, blocking, options.bench, book));
  KF_RETURN_IF_ERROR(add_kernel_tasks(*catalog, service, book));
  KF_RETURN_IF_ERROR(
      add_batch_tool(catalog->tools, service, blocking, options.kernel_tools.limits, book));
  KF_RETURN_IF_ERROR(
      add_kernelbench_tool(catalog->tools, service, blocking, options.kernel_tools.limits));
  if (options.workbench != nullptr) {
    catalog->info.instructions += workbench_instructions();
    KF_RETURN_IF_ERROR(
        add_workbench_tools(*catalog, *options.workbench, service, std::move(blocking)));
  }
  if (!options.skills_dir.empty()) {
    KF_ASSIGN_OR_RETURN(std::vector<Skill> skills, load_skills(options.skills_dir));
    KF_RETURN_IF_ERROR(add_skills(*catalog, std::move(skills)));
  }
  if (options.conformance_fixtures) {
    KF_RETURN_IF_ERROR(fixtures::add_conformance_fixtures(*catalog));
  }
  return catalog;
}

}  // namespace kforge::frontends::mcp
