// kforge: GPU kernel workbench and evaluation service. main() only wires subcommands.
#include <CLI/CLI.hpp>
#include <iostream>

#include "mcp_command.h"
#include "serve_command.h"
#include "version.h"

int main(int argc, char** argv) {
  CLI::App app{"kforge: compile, check and time GPU kernels (Triton, CUDA, PyTorch)"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string(kforge::app::kVersion));

  kforge::app::ServeConfig serve;
  CLI::App* serve_cmd = kforge::app::add_serve_command(app, serve);
  kforge::app::McpConfig mcp;
  CLI::App* mcp_cmd = kforge::app::add_mcp_command(app, mcp);

  CLI11_PARSE(app, argc, argv);
  if (serve_cmd->parsed()) return kforge::app::run_serve(serve);
  if (mcp_cmd->parsed()) return kforge::app::run_mcp(mcp);
  std::cerr << app.help() << '\n';
  return 2;
}
