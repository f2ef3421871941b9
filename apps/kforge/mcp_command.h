// `kforge mcp`: an MCP server on stdin/stdout (for clients that start their servers as a
// command, e.g. Cursor's `command: kforge, args: [mcp]`). It runs jobs with an embedded
// engine (no server needed), or forwards the tool calls to a running `kforge serve` with
// --server URL. Logs go to stderr; stdout carries only MCP messages; it exits at end of input.
#pragma once

#include <CLI/CLI.hpp>
#include <cstddef>
#include <string>
#include <vector>

#include "engine_flags.h"
#include "secrets.h"
#include "workbench_flags.h"

namespace kforge::app {

struct McpConfig {
  std::string data_dir;  // empty: ~/.cache/kforge/mcp-data (or -2..-8 when taken)
  EngineFlags engine;    // of the embedded engine
  WorkbenchFlags workbench;
  std::string log_level = "info";
  std::string server;   // forward to this kforge serve instead of running an engine
  SecretFlags secrets;  // its API token
  bool conformance_fixtures = false;
  std::string skills_dir;          // serve the agent skills found there
  std::string mcp_state_key_file;  // the requestState key (default <data dir>/mcp-state.key)
  size_t max_message_mb = 16;
};

CLI::App* add_mcp_command(CLI::App& app, McpConfig& config);

// Serves until stdin closes or SIGINT/SIGTERM; returns the process exit code.
int run_mcp(const McpConfig& config);

}  // namespace kforge::app
