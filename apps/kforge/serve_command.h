// `kforge serve`: the evaluation server: the REST API and MCP (Streamable HTTP on /mcp) on one
// port, or either alone (--mode rest|mcp|both).
#pragma once

#include <CLI/CLI.hpp>
#include <cstdint>
#include <string>
#include <vector>

#include "engine_flags.h"
#include "network_flags.h"
#include "secrets.h"
#include "workbench_flags.h"

namespace kforge::app {

struct ServeConfig {
  std::string host = "127.0.0.1";
  uint16_t port = 8000;
  std::string data_dir = ".kforge";
  EngineFlags engine;
  WorkbenchFlags workbench;           // MCP: the Triton workbench
  std::string mode = "both";          // "rest" (or "fastapi"), "mcp" or "both"
  bool conformance_fixtures = false;  // MCP: add the conformance suite's fixtures
  std::string skills_dir;             // MCP: serve the agent skills found there
  std::string mcp_state_key_file;  // MCP: the requestState key (default <data dir>/mcp-state.key)
  int mcp_session_ttl_hours = 24;
  SecretFlags secrets;   // the API token
  NetworkFlags network;  // connection, JSON and MCP session limits
  std::string log_level = "info";
  bool log_level_given = false;  // --log-level or KFORGE_LOG_LEVEL (else LOG_LEVEL applies)
  std::string gpu_type;          // --gpu-type / GPU_TYPE
  std::string port_file;         // write the bound port here once listening
  size_t max_body_mb = 16;
  int64_t child_memory_mb = 0;  // 0: 3/4 of the host's RAM
  size_t output_cap_kb = 64;
  int max_attempts = 3;
  int io_threads = 2;
};

// Registers the subcommand and its flags (each also read from a KFORGE_* variable).
CLI::App* add_serve_command(CLI::App& app, ServeConfig& config);

// Runs the server until SIGINT/SIGTERM; returns the process exit code.
int run_serve(const ServeConfig& config);

}  // namespace kforge::app
