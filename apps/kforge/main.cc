// kforge: GPU kernel workbench and evaluation service. main() only wires subcommands.
#include <CLI/CLI.hpp>
#include <iostream>

#include "batch_command.h"
#include "bench_command.h"
#include "kernelbench_command.h"
#include "mcp_command.h"
#include "secrets.h"
#include "serve_command.h"
#include "version.h"
#include "worker_command.h"

int main(int argc, char** argv, char** envp) {
  CLI::App app{"kforge: compile, check and time GPU kernels (Triton, CUDA, PyTorch)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string(kforge::app::kVersion));

  kforge::app::ServeConfig serve;
  CLI::App* serve_cmd = kforge::app::add_serve_command(app, serve);
  kforge::app::McpConfig mcp;
  CLI::App* mcp_cmd = kforge::app::add_mcp_command(app, mcp);
  kforge::app::BenchConfig bench;
  CLI::App* bench_cmd = kforge::app::add_bench_command(app, bench);
  kforge::app::BatchConfig batch;
  CLI::App* batch_cmd = kforge::app::add_batch_command(app, batch);
  kforge::app::KernelbenchConfig kernelbench;
  CLI::App* kernelbench_cmd = kforge::app::add_kernelbench_command(app, kernelbench);
  kforge::app::WorkerConfig worker;
  CLI::App* worker_cuda_cmd = kforge::app::add_worker_command(app, worker);

  CLI11_PARSE(app, argc, argv);
  // The token is parsed: wipe it from what /proc shows of this process.
  kforge::app::scrub_token_from_process(argc, argv, envp);
  if (serve_cmd->parsed()) return kforge::app::run_serve(serve);
  if (mcp_cmd->parsed()) return kforge::app::run_mcp(mcp);
  if (bench_cmd->parsed()) return kforge::app::run_bench(bench);
  if (batch_cmd->parsed()) return kforge::app::run_batch(batch);
  if (kernelbench_cmd->parsed()) return kforge::app::run_kernelbench(kernelbench);
  if (worker_cuda_cmd->parsed()) return kforge::app::run_worker_cuda(worker);
  std::cerr << app.help() << '\n';
  return 2;
}
