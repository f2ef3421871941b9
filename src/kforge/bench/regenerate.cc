#include "kforge/bench/regenerate.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "kforge/common/files.h"
#include "kforge/worker_protocol/process.h"

extern char** environ;  // NOLINT: the process's environment, which the command inherits

namespace kforge::bench {
namespace {

constexpr int kMaxTries = 10;
constexpr double kMaxTimeoutS = 86400;
constexpr size_t kErrorEnvChars = 4000;    // KFORGE_ERROR: the whole failure is in the file
constexpr size_t kOutputTailChars = 4000;  // of the command's output, in the report
constexpr size_t kRecordErrorChars = 2000;

std::string tail(const std::string& text, size_t n) {
  return text.size() <= n ? text : "..." + text.substr(text.size() - n);
}

std::string head(const std::string& text, size_t n) {
  return text.size() <= n ? text : text.substr(0, n) + "...";
}

std::map<std::string, std::string> inherited_environment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    std::string_view entry(*e);
    const size_t eq = entry.find('=');
    if (eq == std::string_view::npos || eq == 0) continue;
    env.emplace(std::string(entry.substr(0, eq)), std::string(entry.substr(eq + 1)));
  }
  return env;
}

// A private directory for the error files and the command's output, removed with the object.
class ScratchDir {
 public:
  static StatusOr<ScratchDir> make() {
    std::string pattern = (std::filesystem::temp_directory_path() / "kforge-regen-XXXXXX").string();
    if (mkdtemp(pattern.data()) == nullptr) return errno_error("mkdtemp " + pattern, errno);
    return ScratchDir(pattern);
  }
  ScratchDir(ScratchDir&& other) noexcept : path_(std::move(other.path_)) { other.path_.clear(); }
  ScratchDir& operator=(ScratchDir&&) = delete;
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  ~ScratchDir() {
    if (!path_.empty()) remove_tree(path_).ignore();
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  explicit ScratchDir(std::filesystem::path path) : path_(std::move(path)) {}
  std::filesystem::path path_;
};

// The failure as the command reads it: what failed, then the error of every failing size.
std::string error_file_text(const std::string& op, const std::string& version,
                            const VersionFailure& failure) {
  return fmt::format("kforge bench: {} {} failed ({})\n\n{}\n", op, version, failure.error_kind,
                     failure.error);
}

// The version's jobs (old or new) out of the plan, and the new ones in.
void replace_jobs(BenchPlan& plan, std::vector<JobOutcome>& outcomes, int op,
                  const std::string& version, std::vector<PlannedJob> jobs,
                  std::vector<JobOutcome> fresh) {
  std::vector<PlannedJob> kept_jobs;
  std::vector<JobOutcome> kept_outcomes;
  for (size_t i = 0; i < plan.jobs.size(); ++i) {
    const PlannedJob& j = plan.jobs[i];
    if (j.role == JobRole::kVersion && j.op == op && j.version == version) continue;
    kept_jobs.push_back(std::move(plan.jobs[i]));
    kept_outcomes.push_back(std::move(outcomes[i]));
  }
  for (size_t i = 0; i < jobs.size(); ++i) {
    kept_jobs.push_back(std::move(jobs[i]));
    kept_outcomes.push_back(i < fresh.size() ? std::move(fresh[i]) : JobOutcome{});
  }
  plan.jobs = std::move(kept_jobs);
  outcomes = std::move(kept_outcomes);
}

Json job_ids(const std::vector<JobOutcome>& outcomes) {
  Json ids = Json::array();
  for (const auto& o : outcomes) {
    if (!o.job_id.empty()) ids.push_back(o.job_id);
  }
  return ids;
}

}  // namespace

Json RegenerateOptions::to_json() const {
  return Json{{"command", command}, {"max_tries", max_tries}, {"timeout_s", timeout_s}};
}

Status validate_regenerate(const RegenerateOptions& r, const BenchOptions& o) {
  if (r.command.find_first_not_of(" \t\r\n") == std::string::npos) {
    return invalid_argument("must not be empty", "regenerate_cmd");
  }
  if (o.kernels_dir.empty()) {
    return invalid_argument(
        "needs --kernels DIR: the command rewrites a failing version's file there (the kernel "
        "library is never rewritten)",
        "regenerate_cmd");
  }
  if (r.max_tries < 1 || r.max_tries > kMaxTries) {
    return invalid_argument("must be 1 to " + std::to_string(kMaxTries) + " (tries per op)",
                            "regenerate_tries");
  }
  if (!(r.timeout_s >= 1 && r.timeout_s <= kMaxTimeoutS)) {
    return invalid_argument("must be 1 to 86400 seconds", "regenerate_timeout_s");
  }
  return Status::ok();
}

StatusOr<CommandRun> run_shell_command(const std::string& command,
                                       const std::vector<std::string>& args,
                                       const std::map<std::string, std::string>& env,
                                       const std::filesystem::path& output,
                                       std::chrono::milliseconds timeout, const StopFn& stopped) {
  const int out = ::open(output.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (out < 0) return errno_error("opening " + output.string(), errno);
  worker_protocol::LaunchOptions launch;
  launch.argv = {"/bin/sh", "-c", command, "kforge-regenerate"};  // $0; args are $1, $2, ...
  launch.argv.insert(launch.argv.end(), args.begin(), args.end());
  launch.env = inherited_environment();
  for (const auto& [key, value] : env)
    launch.env[key] = value;
  launch.fds = {{1, out}, {2, out}};  // stdin: /dev/null
  // Its own process group, so a timeout kills what it started too; it dies with kforge.
  launch.new_session = true;
  launch.die_with_parent = true;
  launch.rlimit_core_bytes = std::nullopt;
  const auto started = std::chrono::steady_clock::now();
  auto process = worker_protocol::launch_process(launch);
  ::close(out);
  if (!process.is_ok()) return process.status().with_context("running the --regenerate-cmd");
  CommandRun run;
  const auto deadline = started + timeout;
  std::optional<worker_protocol::ExitStatus> status;
  bool stop = false;
  while (!status) {
    status = process->wait_for(std::chrono::milliseconds(100));
    if (status) break;
    if (stopped && stopped()) {
      stop = true;
      break;
    }
    if (std::chrono::steady_clock::now() >= deadline) {
      run.timed_out = true;
      break;
    }
  }
  if (!status) process->kill_and_wait(std::chrono::milliseconds(5000));
  run.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  if (run.timed_out) {
    run.how = fmt::format("timed out after {:g} s (killed)",
                          std::chrono::duration<double>(timeout).count());
  } else if (stop) {
    run.how = "stopped (interrupted)";
  } else {
    run.exit_code = status->exit_code;
    run.how = status->describe();
  }
  auto text = read_file(output);
  if (text.is_ok()) run.output_tail = tail(*text, kOutputTailChars);
  if (stop) return Status(ErrorCode::kCancelled, "interrupted while the --regenerate-cmd ran");
  return run;
}

Status regenerate_failures(BenchPlan& plan, std::vector<JobOutcome>& outcomes,
                           const RegenerateOptions& regenerate, const RunJobsFn& run_jobs,
                           const NoteFn& note, const StopFn& stopped) {
  KF_RETURN_IF_ERROR(validate_regenerate(regenerate, plan.options));
  plan.regenerate = regenerate.to_json();
  KF_ASSIGN_OR_RETURN(ScratchDir scratch, ScratchDir::make());
  const auto timeout = std::chrono::milliseconds(static_cast<int64_t>(regenerate.timeout_s * 1e3));
  for (int i = 0; i < static_cast<int>(plan.ops.size()); ++i) {
    const std::string op = plan.ops[i].manifest.op;
    // Absolute: the command may change directory before it writes.
    const std::filesystem::path op_dir = std::filesystem::absolute(plan.options.kernels_dir / op);
    int tries = 0;
    for (size_t v = 0; v < plan.ops[i].versions.size() && tries < regenerate.max_tries; ++v) {
      const std::string version = plan.ops[i].versions[v].name;
      const std::filesystem::path path = op_dir / (version + ".py");
      while (tries < regenerate.max_tries) {
        const auto failure = version_failure(plan, outcomes, i, version);
        if (!failure) break;
        if (stopped && stopped()) return Status(ErrorCode::kCancelled, "interrupted");
        ++tries;
        note(fmt::format("{} {}: try {} of {} ({}): running the --regenerate-cmd", op, version,
                         tries, regenerate.max_tries, failure->error_kind));
        const auto error_file =
            scratch.path() / fmt::format("{}.{}.try{}.error.txt", op, version, tries);
        KF_RETURN_IF_ERROR(write_file_atomic(error_file, error_file_text(op, version, *failure)));
        const std::map<std::string, std::string> env = {
            {"KFORGE_OP", op},
            {"KFORGE_VERSION", version},
            {"KFORGE_VERSION_PATH", path.string()},
            {"KFORGE_OP_DIR", op_dir.string()},
            {"KFORGE_MANIFEST", plan.ops[i].manifest_path.string()},
            {"KFORGE_ERROR_KIND", failure->error_kind},
            {"KFORGE_ERROR", head(failure->error, kErrorEnvChars)},
            {"KFORGE_ERROR_FILE", error_file.string()},
            {"KFORGE_TRY", std::to_string(tries)},
            {"KFORGE_MAX_TRIES", std::to_string(regenerate.max_tries)},
            {"KFORGE_DEVICE", plan.device},
            {"KFORGE_DTYPE", plan.ops[i].dtype}};
        const auto before = read_file(path);
        KF_ASSIGN_OR_RETURN(
            CommandRun run,
            run_shell_command(regenerate.command, {path.string(), error_file.string()}, env,
                              scratch.path() / "output.txt", timeout, stopped));
        const auto after = read_file(path);
        const bool changed = before.is_ok() != after.is_ok() ||
                             (after.is_ok() && before.is_ok() && *before != *after);
        Json record = {{"try", tries},
                       {"of", regenerate.max_tries},
                       {"after",
                        {{"error_kind", failure->error_kind},
                         {"error", head(failure->error, kRecordErrorChars)}}},
                       {"command",
                        {{"exit", run.how},
                         {"exit_code", run.exit_code ? Json(*run.exit_code) : Json()},
                         {"timed_out", run.timed_out},
                         {"seconds", run.seconds},
                         {"output_tail", run.output_tail}}},
                       {"changed", changed}};
        if (!run.exit_code || *run.exit_code != 0) {
          record["result"] = "command_failed";
          note(fmt::format("{} {}: try {}: the command {}", op, version, tries, run.how));
        } else if (!changed || !after.is_ok()) {
          record["result"] = after.is_ok() ? "unchanged" : "no_file";
          note(fmt::format("{} {}: try {}: the command left {} {}", op, version, tries,
                           path.string(), after.is_ok() ? "unchanged" : "unreadable"));
        } else {
          KernelVersion fresh = version_from_source(
              version, *after, (plan.options.kernels_dir / op / (version + ".py")).string());
          plan.ops[i].versions[v] = fresh;
          KF_ASSIGN_OR_RETURN(std::vector<PlannedJob> jobs, version_jobs(plan, i, fresh));
          BenchPlan judge = plan;
          judge.jobs = jobs;
          KF_ASSIGN_OR_RETURN(std::vector<JobOutcome> judged, run_jobs(judge));
          record["jobs"] = job_ids(judged);
          replace_jobs(plan, outcomes, i, version, std::move(jobs), std::move(judged));
          const auto now = version_failure(plan, outcomes, i, version);
          record["result"] = now ? "failing" : "correct";
          if (now) {
            record["error_kind"] = now->error_kind;
            record["error"] = head(now->error, kRecordErrorChars);
          }
          note(fmt::format("{} {}: try {}: {}", op, version, tries,
                           now ? "still failing (" + now->error_kind + ")"
                               : std::string("correct at every size")));
        }
        plan.ops[i].regeneration[version].push_back(std::move(record));
      }
    }
  }
  return Status::ok();
}

}  // namespace kforge::bench
