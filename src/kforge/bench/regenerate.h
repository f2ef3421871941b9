// The regeneration loop of `kforge bench --regenerate-cmd CMD` (docs/bench.md "Regeneration"):
// after the bench's jobs have run, every version of a `--kernels DIR` op that failed (did not
// load, compile, run, or match torch at some size) is handed to CMD, a shell command (an agent
// CLI, a script) expected to write a new version file, and judged again at every size.
//
// The command contract: `/bin/sh -c CMD kforge-regenerate <version path> <error file>`, so $1
// is the version file to rewrite (an absolute path) and $2 a file holding the failure; the
// environment is kforge's own plus KFORGE_OP, KFORGE_VERSION, KFORGE_VERSION_PATH,
// KFORGE_OP_DIR, KFORGE_MANIFEST, KFORGE_ERROR_KIND, KFORGE_ERROR (the failure, clipped),
// KFORGE_ERROR_FILE, KFORGE_TRY, KFORGE_MAX_TRIES, KFORGE_DEVICE and KFORGE_DTYPE. Its stdin is
// /dev/null; its stdout and stderr are captured (their end goes into the report). It runs as
// the user, in kforge's working directory, in its own process group, killed after `timeout_s`.
//
// An op has at most `max_tries` runs of the command, shared by its failing versions in version
// order. A run that fails (non-zero exit, a signal, the timeout) or leaves the file unchanged is
// a spent try without a new judgement. Every try is recorded in OpPlan::regeneration, which the
// report (bench_report.h) and the logs show.
//
// Only the CLI runs commands: POST /bench and the MCP tool refuse `regenerate_cmd`.
//
// Example:
//   RegenerateOptions r{.command = "my-agent fix", .max_tries = 3};
//   KF_RETURN_IF_ERROR(validate_regenerate(r, plan.options));
//   KF_RETURN_IF_ERROR(regenerate_failures(plan, outcomes, r, run_jobs, note, stopped));
#pragma once

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "kforge/bench/bench_plan.h"
#include "kforge/bench/bench_report.h"
#include "kforge/common/json.h"
#include "kforge/common/status.h"

namespace kforge::bench {

struct RegenerateOptions {
  std::string command;      // run with /bin/sh -c
  int max_tries = 3;        // runs of the command per op
  double timeout_s = 1800;  // per run

  Json to_json() const;
};

// kInvalidArgument naming regenerate_cmd, regenerate_tries or regenerate_timeout_s: an empty
// command, a bench without a kernels directory (the library is never rewritten), tries outside
// 1..10, a timeout outside 1..86400 s.
Status validate_regenerate(const RegenerateOptions& regenerate, const BenchOptions& options);

// Runs a plan's jobs to the end and returns their outcomes, parallel to plan.jobs
// (BenchRun::start_jobs and a wait, in the CLI). An error stops the loop.
using RunJobsFn = std::function<StatusOr<std::vector<JobOutcome>>(const BenchPlan& plan)>;
// A line for the user about the loop's progress.
using NoteFn = std::function<void(const std::string& line)>;
// True once the user asked to stop (Ctrl-C): the command is killed, the loop ends kCancelled.
using StopFn = std::function<bool()>;

// The loop over a finished run: `plan` and `outcomes` (parallel to plan.jobs) are updated in
// place (a regenerated version's source, its jobs and their outcomes replace the old ones;
// each op's `regeneration` records its tries), so build_report(plan, outcomes, ...) reports
// the final files. Errors: a refused submit or kCancelled.
Status regenerate_failures(BenchPlan& plan, std::vector<JobOutcome>& outcomes,
                           const RegenerateOptions& regenerate, const RunJobsFn& run_jobs,
                           const NoteFn& note, const StopFn& stopped);

// How one run of the command ended.
struct CommandRun {
  std::optional<int> exit_code;  // unset when it was killed (timeout, stop) or died of a signal
  std::string how;               // "exited with code 0", "timed out after 5 s", ...
  bool timed_out = false;
  double seconds = 0;
  std::string output_tail;  // the end of its stdout and stderr together
};

// `/bin/sh -c command kforge-regenerate <args...>` (so the args are $1, $2, ...) with the
// process's environment plus `env`; stdout and stderr go to `output` (a file). Blocks until it
// ends, `timeout` passes (it is killed: a result with timed_out) or `stopped()` (killed:
// kCancelled).
StatusOr<CommandRun> run_shell_command(const std::string& command,
                                       const std::vector<std::string>& args,
                                       const std::map<std::string, std::string>& env,
                                       const std::filesystem::path& output,
                                       std::chrono::milliseconds timeout, const StopFn& stopped);

}  // namespace kforge::bench
