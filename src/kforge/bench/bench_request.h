// A bench requested as JSON: the body of `POST /bench` and the arguments of the MCP tool
// `run_benchmark_suite` (docs/rest-api.md, docs/mcp.md), and the JSON they answer with.
//
//   {"ops": ["add", "softmax"] | "add,softmax", "sizes": [...] | "small,large",
//    "size_preset": "default" | "seed", "runs": 10,
//    "device": "cuda:0", "dtype": "float16", "log_lang": "en" | "ko",
//    "kernels": {"softmax": {"v1_baseline": "<python source>", ...}},
//    "retries": {"softmax": {"v2_tiling": 1}}, "correct_trials": 5, "job_timeout_s": 600,
//    "peaks": true,
//    "kernels_dir": "/path", "out_dir": "/path"}      <- local paths: only where allowed
//
// Local paths are accepted only from a local user (`kforge mcp` on stdio); a server takes
// kernels as sources and answers with the files instead of writing them. `regenerate_cmd`
// (and its tries and timeout) is refused everywhere: running a command is the CLI's alone.
#pragma once

#include <filesystem>
#include <string>

#include "kforge/bench/bench_plan.h"
#include "kforge/bench/bench_render.h"
#include "kforge/common/json.h"
#include "kforge/common/status.h"

namespace kforge::bench {

struct BenchPolicy {
  bool allow_local_paths = false;  // kernels_dir and out_dir
  std::filesystem::path library;   // empty: find_kernel_library() per request
  std::string kforge_version = "dev";
};

struct BenchRequest {
  BenchOptions options;
  LogLang lang = LogLang::kEn;
  std::filesystem::path out_dir;  // empty: answer with the files only
};

// kInvalidArgument naming the field for anything malformed or not allowed by `policy`.
StatusOr<BenchRequest> parse_bench_request(const Json& body, const BenchPolicy& policy);

// {"report": <report>, "files": {"softmax_log.md": "...", ...}, "out_dir": "..."?}; writes
// the files when the request named an out_dir.
StatusOr<Json> bench_answer(const Json& report, const BenchRequest& request);

// The JSON Schema of the request (the MCP tool's inputSchema); local-path fields only when
// `allow_local_paths`.
Json bench_request_schema(bool allow_local_paths);

}  // namespace kforge::bench
