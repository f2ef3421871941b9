#include "bench_command.h"

#include <signal.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include <atomic>
#include <boost/asio/post.hpp>
#include <boost/asio/thread_pool.hpp>
#include <chrono>
#include <future>
#include <iostream>
#include <memory>
#include <optional>

#include "kforge/bench/bench_plan.h"
#include "kforge/bench/bench_render.h"
#include "kforge/bench/bench_run.h"
#include "kforge/bench/regenerate.h"
#include "kforge/common/files.h"
#include "kforge/common/log.h"
#include "kforge/common/thread_annotations.h"
#include "kforge/frontends/mcp/remote_job_service.h"
#include "version.h"

namespace kforge::app {
namespace {

// "sizes[1]" -> "--sizes": option errors name the flag the user typed.
std::string flag_of(const std::string& field) {
  std::string name = field.substr(0, field.find_first_of("[."));
  if (name == "kernels_dir" || name == "kernels") return "--kernels";
  for (char& ch : name) {
    if (ch == '_') ch = '-';
  }
  return "--" + name;
}

int option_error(const Status& s) {
  std::cerr << "kforge bench: "
            << (s.field_path().empty() ? s.message() : flag_of(s.field_path()) + ": " + s.message())
            << '\n';
  return 2;
}

// Progress on stderr: a redrawn bar on a terminal, one line per job otherwise.
class ProgressPrinter {
 public:
  explicit ProgressPrinter(bool quiet) : quiet_(quiet), tty_(isatty(STDERR_FILENO) == 1) {}

  void update(const bench::BenchProgress& p) {
    if (quiet_) return;
    if (!tty_) {
      std::cerr << "[" << p.done << "/" << p.total << "] " << p.message << '\n';
      return;
    }
    constexpr int kBar = 24;
    const int filled = p.total > 0 ? kBar * p.done / p.total : kBar;
    std::string line = "[" + std::string(filled, '#') + std::string(kBar - filled, '.') + "] " +
                       std::to_string(p.done) + "/" + std::to_string(p.total) + " " + p.message;
    const size_t width = terminal_width();
    if (line.size() > width - 1) line.resize(width - 1);
    std::cerr << "\r\033[K" << line << std::flush;
    drawn_ = true;
  }

  void finish() {
    if (drawn_) std::cerr << '\n';
    drawn_ = false;
  }

  // A line of its own (the regeneration loop's), under the bar.
  void note(const std::string& line) {
    if (quiet_) return;
    finish();
    std::cerr << "kforge bench: " << line << '\n';
  }

 private:
  static size_t terminal_width() {
    winsize ws{};
    if (ioctl(STDERR_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 20) return ws.ws_col;
    return 100;
  }

  const bool quiet_;
  const bool tty_;
  bool drawn_ = false;
};

int write_outputs(const Json& report, bench::LogLang lang, const std::string& out_dir) {
  auto files = bench::render_bench_files(report, lang);
  if (!files.is_ok()) {
    std::cerr << "kforge bench: " << files.status().to_string() << '\n';
    return 1;
  }
  if (Status s = bench::write_bench_files(*files, out_dir); !s.is_ok()) {
    std::cerr << "kforge bench: " << s.to_string() << '\n';
    return 1;
  }
  std::cout << files->at("summary.md") << '\n';
  std::cout << "Wrote to " << out_dir << "/:";
  for (const auto& [name, content] : *files)
    std::cout << ' ' << name;
  std::cout << '\n';
  return 0;
}

int render_saved(const BenchConfig& c, bench::LogLang lang) {
  auto text = read_file(c.from_json);
  if (!text.is_ok()) {
    std::cerr << "kforge bench: --from-json: " << text.status().to_string() << '\n';
    return 2;
  }
  auto report = parse_json(*text);
  if (!report.is_ok()) {
    std::cerr << "kforge bench: --from-json: " << c.from_json << ": " << report.status().message()
              << '\n';
    return 2;
  }
  return write_outputs(*report, lang, c.out_dir);
}

bench::BenchOptions bench_options(const BenchConfig& c, std::filesystem::path library) {
  bench::BenchOptions o;
  o.ops = c.ops;
  o.sizes = c.sizes;
  o.size_preset = c.size_preset;
  o.runs = c.runs;
  o.correct_trials = c.correct_trials;
  o.job_timeout_s = c.job_timeout_s;
  o.device = c.device;
  o.dtype = c.dtype;
  o.library = std::move(library);
  o.kernels_dir = c.kernels_dir;
  o.peaks = !c.no_peaks;
  o.torch_compile = !c.no_torch_compile;
  o.kforge_version = std::string(kVersion);
  return o;
}

int64_t now_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Runs plans' jobs one plan at a time (the bench's, then each regenerated version's) with
// progress on stderr; a termination signal cancels the run in flight and every later one.
class JobRunner {
 public:
  JobRunner(jobs::JobService& service, const sigset_t& signals, bool quiet)
      : service_(service), printer_(quiet) {
    watch_.emplace(signals, [this](int sig) {
      interrupted_.store(true);
      MutexLock lock(mu_);
      if (current_) current_->cancel("interrupted (signal " + std::to_string(sig) + ")");
    });
  }
  ~JobRunner() {
    watch_.reset();
    pool_.join();
  }
  JobRunner(const JobRunner&) = delete;
  JobRunner& operator=(const JobRunner&) = delete;

  StatusOr<std::vector<bench::JobOutcome>> run(const bench::BenchPlan& plan) {
    if (interrupted_.load()) return Status(ErrorCode::kCancelled, "interrupted");
    if (!plan.jobs.empty()) {  // the first line, before the first job ends
      printer_.update(bench::BenchProgress{0, static_cast<int>(plan.jobs.size()),
                                           "running " + plan.jobs.front().label});
    }
    std::promise<StatusOr<std::vector<bench::JobOutcome>>> promise;
    auto future = promise.get_future();
    bench::Executor executor = [this](std::function<void()> task) {
      boost::asio::post(pool_, std::move(task));
    };
    auto run = bench::BenchRun::start_jobs(
        service_, executor, plan, "kforge bench",
        [this](const bench::BenchProgress& p) { printer_.update(p); },
        [&promise](StatusOr<std::vector<bench::JobOutcome>> outcomes) {
          promise.set_value(std::move(outcomes));
        });
    {
      MutexLock lock(mu_);
      current_ = run;
    }
    if (interrupted_.load()) run->cancel("interrupted");
    auto outcomes = future.get();
    {
      MutexLock lock(mu_);
      current_.reset();
    }
    printer_.finish();
    return outcomes;
  }

  bool interrupted() const { return interrupted_.load(); }
  void note(const std::string& line) { printer_.note(line); }

 private:
  jobs::JobService& service_;
  boost::asio::thread_pool pool_{2};
  ProgressPrinter printer_;
  std::atomic<bool> interrupted_{false};
  Mutex mu_;
  std::shared_ptr<bench::BenchRun> current_ GUARDED_BY(mu_);
  std::optional<SignalWatch> watch_;  // last: it calls into the members above
};

// The --regenerate-* flags, checked; nullopt when there is no loop.
StatusOr<std::optional<bench::RegenerateOptions>> regenerate_options(
    const BenchConfig& c, const bench::BenchOptions& options) {
  if (!c.regenerate_cmd) {
    if (c.regenerate_tries) {
      return invalid_argument("has no effect without --regenerate-cmd", "regenerate_tries");
    }
    if (c.regenerate_timeout_s) {
      return invalid_argument("has no effect without --regenerate-cmd", "regenerate_timeout_s");
    }
    return std::optional<bench::RegenerateOptions>();
  }
  bench::RegenerateOptions r;
  r.command = *c.regenerate_cmd;
  if (c.regenerate_tries) r.max_tries = *c.regenerate_tries;
  if (c.regenerate_timeout_s) r.timeout_s = *c.regenerate_timeout_s;
  KF_RETURN_IF_ERROR(bench::validate_regenerate(r, options));
  return std::optional<bench::RegenerateOptions>(std::move(r));
}

// The bench's jobs, then the regeneration loop when asked for; the report of both.
StatusOr<Json> run_bench_jobs(jobs::JobService& service, bench::BenchPlan plan,
                              const std::optional<bench::RegenerateOptions>& regenerate,
                              const sigset_t& signals, bool quiet) {
  const int64_t started = now_ms();
  JobRunner runner(service, signals, quiet);
  KF_ASSIGN_OR_RETURN(std::vector<bench::JobOutcome> outcomes, runner.run(plan));
  if (regenerate) {
    KF_RETURN_IF_ERROR(bench::regenerate_failures(
        plan, outcomes, *regenerate, [&runner](const bench::BenchPlan& p) { return runner.run(p); },
        [&runner](const std::string& line) { runner.note(line); },
        [&runner] { return runner.interrupted(); }));
  }
  return bench::build_report(plan, outcomes, started, now_ms());
}

}  // namespace

CLI::App* add_bench_command(CLI::App& app, BenchConfig& c) {
  CLI::App* cmd = app.add_subcommand(
      "bench",
      "Benchmark the kernel library's versions of each op (or your own, --kernels) against "
      "torch and torch.compile, and write the development logs, charts and a summary");
  cmd->add_option("--ops", c.ops,
                  "Ops to benchmark, in order (add, softmax, gelu, layer_norm, mha)")
      ->delimiter(',');
  cmd->add_option("--sizes", c.sizes, "Sizes: any of small, medium, large")
      ->delimiter(',')
      ->capture_default_str();
  cmd->add_option("--size-preset", c.size_preset,
                  "What small/medium/large are: default (the device's: 16x64, 32x128, 64x256 "
                  "on cpu; 256x256, 1024x1024, 4096x4096 on a GPU) or seed (256x256, "
                  "1024x1024, 4096x4096 on any device; slow in the cpu interpreter)")
      ->capture_default_str();
  cmd->add_option("--runs", c.runs, "Timed runs per kernel and size")->capture_default_str();
  cmd->add_option("--device", c.device, "cpu or cuda:N (default: the first GPU, else cpu)");
  cmd->add_option("--dtype", c.dtype,
                  "float32, float16 or bfloat16 (default: each op's: float16 for mha, "
                  "float32 otherwise)");
  cmd->add_option("--kernels", c.kernels_dir,
                  "Benchmark the versions in DIR/<op>/v1_baseline.py .. v4_optimized.py (the "
                  "kernel library's layout; DIR/<op>/manifest.json and retries.json optional)");
  cmd->add_option("--out", c.out_dir, "Directory for the logs, charts, summary and JSON")
      ->capture_default_str();
  cmd->add_option("--log-lang", c.log_lang,
                  "Language of the logs: en, or ko (the skill's "
                  "original Korean headings)")
      ->capture_default_str();
  cmd->add_option("--correct-trials", c.correct_trials, "Correctness trials per version and size")
      ->capture_default_str();
  cmd->add_option("--job-timeout-s", c.job_timeout_s, "Timeout of each job (seconds)")
      ->capture_default_str();
  cmd->add_flag("--no-peaks", c.no_peaks,
                "Do not measure the copy bandwidth / matmul peaks Phase 4 compares against");
  cmd->add_flag("--no-torch-compile", c.no_torch_compile,
                "Leave out the torch.compile baseline (it compiles for a minute per size on "
                "the cpu device)");
  cmd->add_option("--regenerate-cmd", c.regenerate_cmd,
                  "With --kernels: run this shell command for each failing version ($1 / "
                  "KFORGE_VERSION_PATH the file to rewrite, $2 / KFORGE_ERROR_FILE the failure; "
                  "docs/bench.md), then judge the new file again");
  cmd->add_option("--regenerate-tries", c.regenerate_tries,
                  "Runs of --regenerate-cmd per op, shared by its failing versions (1-10; "
                  "default 3)");
  cmd->add_option("--regenerate-timeout-s", c.regenerate_timeout_s,
                  "Timeout of each run of --regenerate-cmd (seconds; default 1800)");
  cmd->add_option("--from-json", c.from_json,
                  "Render a saved bench.json again (into --out, in --log-lang); runs nothing");
  cmd->add_flag("--quiet", c.quiet, "No progress output");
  cmd->add_option("--server", c.server,
                  "Run the jobs on this kforge serve (http://host:port) instead of an embedded "
                  "engine")
      ->envname("KFORGE_SERVER");
  cmd->add_option("--token", c.token, "API token of the --server")->envname("KFORGE_TOKEN");
  cmd->add_option("--data-dir", c.data_dir,
                  "Jobs database of the embedded engine (default ~/.cache/kforge/bench-data)");
  add_engine_flags(*cmd, c.engine, "Devices of the embedded engine (default: --device, else all)");
  cmd->add_option("--log-level", c.log_level, "trace, debug, info, warning, error (to stderr)")
      ->capture_default_str();
  return cmd;
}

int run_bench(const BenchConfig& c) {
  if (Status s = log::init(c.log_level); !s) {
    std::cerr << "kforge bench: " << s.to_string() << '\n';
    return 2;
  }
  auto lang = bench::parse_log_lang(c.log_lang, "log_lang");
  if (!lang.is_ok()) return option_error(lang.status());
  if (!c.from_json.empty()) return render_saved(c, *lang);
  auto library = bench::find_kernel_library();
  if (!library.is_ok()) {
    std::cerr << "kforge bench: " << library.status().to_string() << '\n';
    return 2;
  }
  bench::BenchOptions options = bench_options(c, *library);
  if (Status s = bench::validate_options(options); !s.is_ok()) return option_error(s);
  auto regenerate = regenerate_options(c, options);
  if (!regenerate.is_ok()) return option_error(regenerate.status());
  const sigset_t signals = block_termination_signals();

  std::unique_ptr<jobs::JobService> remote;
  std::optional<app::Engine> engine;
  jobs::JobService* service = nullptr;
  if (!c.server.empty()) {
    auto client = frontends::mcp::RestClient::create({c.server, c.token, std::chrono::seconds(30)});
    if (!client.is_ok()) return option_error(client.status());
    remote = std::make_unique<frontends::mcp::RemoteJobService>(std::move(client).value());
    service = remote.get();
  } else {
    EngineFlags flags = c.engine;
    if (!c.device.empty() && flags.devices == "all") flags.devices = c.device;
    auto started = start_embedded_engine(flags, c.data_dir, "bench-data");
    if (!started.is_ok()) {
      std::cerr << "kforge bench: cannot start the engine: " << started.status().to_string()
                << '\n';
      return 2;
    }
    engine = std::move(started->engine);
    if (Status s = engine->service->start(); !s) {
      std::cerr << "kforge bench: cannot start the job service: " << s.to_string() << '\n';
      return 2;
    }
    service = engine->service.get();
  }

  auto stop_engine = [&] {
    if (engine) engine->service->stop();
  };
  auto plan = bench::plan_bench(options, service->health());
  if (!plan.is_ok()) {
    stop_engine();
    return option_error(plan.status());
  }
  if (!c.quiet) {
    std::cerr << "kforge bench: " << plan->ops.size() << " op(s) on " << plan->device << " ("
              << plan->device_facts.value("name", plan->interpreter ? "Triton interpreter" : "")
              << "), " << plan->jobs.size() << " jobs; logs to " << c.out_dir << "/\n";
  }
  StatusOr<Json> report =
      run_bench_jobs(*service, std::move(plan).value(), *regenerate, signals, c.quiet);
  stop_engine();
  if (!report.is_ok()) {
    std::cerr << "kforge bench: " << report.status().to_string() << '\n';
    return report.status().code() == ErrorCode::kCancelled ? 130 : 1;
  }
  return write_outputs(*report, *lang, c.out_dir);
}

}  // namespace kforge::app
