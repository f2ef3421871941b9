#include "engine_flags.h"

#include <pthread.h>

#include <cstdlib>
#include <filesystem>

#include "kforge/common/log.h"
#include "version.h"

namespace kforge::app {

std::filesystem::path default_data_root() {
  // NOLINTBEGIN(concurrency-mt-unsafe): read-only; kforge unsets only before any thread starts
  if (const char* xdg = std::getenv("XDG_CACHE_HOME"); xdg != nullptr && *xdg != '\0') {
    return std::filesystem::path(xdg) / "kforge";
  }
  const char* home = std::getenv("HOME");
  // NOLINTEND(concurrency-mt-unsafe)
  return std::filesystem::path(home != nullptr ? home : ".") / ".cache" / "kforge";
}

void add_engine_flags(CLI::App& cmd, EngineFlags& f, std::string_view devices_help) {
  cmd.add_option("--devices", f.devices, std::string(devices_help))
      ->envname("KFORGE_DEVICES")
      ->capture_default_str();
  cmd.add_option("--python", f.python,
                 "Python interpreter with torch and triton (default: KFORGE_PYTHON, "
                 "~/.cache/kforge/venv/bin/python, python3)");
  cmd.add_option("--worker-path", f.worker_path,
                 "Directory containing kforge_worker/ (default: found next to the binary)")
      ->envname("KFORGE_WORKER_PATH");
  cmd.add_option("--warm-children", f.warm_children_gpu,
                 "Job processes kept forked and warm per GPU (each holds a CUDA context)")
      ->check(CLI::Range(1, 16))
      ->capture_default_str();
  cmd.add_option("--warm-children-cpu", f.warm_children_cpu,
                 "Job processes kept forked and warm for the cpu device")
      ->check(CLI::Range(1, 16))
      ->capture_default_str();
  cmd.add_option("--max-warm-children", f.max_warm_children_gpu,
                 "With --pipeline-depth > 1: Python job processes that may warm at once per GPU "
                 "when jobs are queued (a batch of 16 warms up to this many side by side)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd.add_option("--max-warm-children-cpu", f.max_warm_children_cpu,
                 "The same for the cpu device (with --test-cpu-pipeline-depth)")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd.add_option("--jobs-per-judge", f.jobs_per_judge,
                 "Jobs one judge process may serve when they share a submitter and a reference "
                 "(each job still gets a fresh candidate process); 1: a judge per job. Needs "
                 "the jail")
      ->check(CLI::Range(1, 32))
      ->capture_default_str();
  cmd.add_option("--warm-cuda-workers", f.warm_cuda_workers_gpu,
                 "Native CUDA worker processes (for `cuda` kernels) kept started per GPU")
      ->check(CLI::Range(1, 16))
      ->capture_default_str();
  cmd.add_option("--warm-cuda-workers-cpu", f.warm_cuda_workers_cpu,
                 "Native CUDA worker processes kept started for the cpu device")
      ->check(CLI::Range(1, 16))
      ->capture_default_str();
  cmd.add_option("--pipeline-depth", f.pipeline_depth,
                 "Jobs in flight per GPU: 1 runs one job at a time; N > 1 lets jobs compile "
                 "and check correctness together (Python jobs) or compile (`cuda` jobs) while "
                 "another job has the GPU; timed regions run one at a time, alone")
      ->check(CLI::Range(1, 8))
      ->capture_default_str();
  cmd.add_option("--test-cpu-pipeline-depth", f.test_cpu_pipeline_depth,
                 "TEST ONLY: pipeline the cpu device as --pipeline-depth does a GPU (shared "
                 "and exclusive grants), so the pipelined path runs without a GPU; CPU "
                 "timings under it share the CPU with other jobs' compiles (docs/architecture.md)")
      ->check(CLI::Range(1, 8))
      ->capture_default_str();
  cmd.add_option("--worker-env", f.worker_env,
                 "Extra environment variable to pass to workers (repeatable; secrets never)");
  cmd.add_option("--sandbox", f.sandbox,
                 "Job isolation: auto (jail jobs when kforge is privileged, else run them "
                 "unjailed and say so), required (refuse to start without it) or off "
                 "(docs/security.md)")
      ->envname("KFORGE_SANDBOX")
      ->check(CLI::IsMember({"auto", "required", "off"}))
      ->capture_default_str();
  cmd.add_option("--job-pids-max", f.job_pids_max,
                 "Processes and threads one job may have at once (its cgroup's pids.max)")
      ->check(CLI::Range(int64_t{64}, int64_t{1} << 22))
      ->capture_default_str();
  cmd.add_option("--job-tmp-mb", f.job_tmp_mb,
                 "Size of each place a jailed job process may write (its /tmp, /dev/shm and "
                 "scratch directory, private tmpfs counted in its memory; MiB; 0 = a quarter "
                 "of the job memory limit)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 30))
      ->capture_default_str();
  cmd.add_option("--jail-read-only", f.jail_read_only,
                 "A host path jailed jobs also see, read-only (repeatable): for a tool the "
                 "jail's minimal root does not find on its own (/health shows what it shows, "
                 "sandbox.root; never the data directory)")
      ->envname("KFORGE_JAIL_READ_ONLY")
      ->delimiter(':');
  cmd.add_option("--kernel-cache", f.kernel_cache,
                 "Kernel caches of jobs: isolated (each job compiles into its own, nothing it "
                 "compiles is loaded by another job) or shared (one for all candidates, one for "
                 "all references: faster, for one-tenant servers; docs/security.md)")
      ->envname("KFORGE_KERNEL_CACHE")
      ->check(CLI::IsMember({"isolated", "shared"}))
      ->capture_default_str();
  cmd.add_option("--sandbox-uid-base", f.sandbox_uid_base,
                 "First of 20000 uids jobs run as (each owns nothing else on the machine)")
      ->check(CLI::Range(uint32_t{1000}, uint32_t{4000000000}))
      ->capture_default_str();
  cmd.add_flag("--device-metrics", f.device_metrics,
               "Collect Nsight Compute device metrics for requests that do not set "
               "enable_device_metrics (ENABLE_DEVICE_METRICS=true, as the old server)")
      ->envname("ENABLE_DEVICE_METRICS");
  cmd.add_option("--cupy-cache-dir", f.cupy_cache_dir,
                 "Where CuPy caches the kernels candidates compile, with --kernel-cache shared "
                 "(unused with isolated caches: each job has its own)")
      ->envname("CUPY_KERNEL_CACHE_DIR");
  cmd.add_option("--job-retention", f.job_retention,
                 "Finished jobs older than this are deleted automatically: 0 (never), seconds, "
                 "or 90m, 24h, 7d")
      ->envname("KFORGE_JOB_RETENTION")
      ->check(CLI::Validator(
          [](std::string& value) {
            auto parsed = jobs::parse_retention(value, "--job-retention");
            return parsed.is_ok() ? std::string() : parsed.status().message();
          },
          "DURATION"))
      ->capture_default_str();
  cmd.add_option("--max-queued-jobs", f.queue.max_jobs,
                 "Jobs queued or running at once; 503 beyond (0: no limit)")
      ->envname("KFORGE_MAX_QUEUED_JOBS")
      ->capture_default_str();
  cmd.add_option("--max-queued-bytes", f.queue.max_bytes,
                 "Stored request bytes of the jobs queued or running (e.g. 256MiB); 503 beyond "
                 "(0: no limit)")
      ->envname("KFORGE_MAX_QUEUED_BYTES")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  cmd.add_option("--max-queued-per-client", f.queue.max_jobs_per_client,
                 "Jobs one client (API token and address) may have queued or running; 429 "
                 "beyond (0: no limit)")
      ->envname("KFORGE_MAX_QUEUED_PER_CLIENT")
      ->capture_default_str();
  cmd.add_option("--max-queued-bytes-per-client", f.queue.max_bytes_per_client,
                 "Stored request bytes one client may have queued or running; 429 beyond (0: "
                 "no limit)")
      ->envname("KFORGE_MAX_QUEUED_BYTES_PER_CLIENT")
      ->transform(CLI::AsSizeValue(false))
      ->capture_default_str();
  cmd.add_option("--sqlite-synchronous", f.sqlite_synchronous,
                 "full: every accepted job is fsynced before it is acknowledged (survives "
                 "power loss); normal: faster, survives a killed server but not an OS crash")
      ->check(CLI::IsMember({"full", "normal"}))
      ->capture_default_str();
  cmd.add_option("--store", f.store,
                 "Where jobs are stored: sqlite (a database in the data directory) or a "
                 "PostgreSQL URL postgresql://user@host:5432/db that several servers share as "
                 "one queue (docs/deployment.md); prefer KFORGE_STORE for a URL with a password")
      ->envname("KFORGE_STORE")
      ->capture_default_str();
  cmd.add_option("--node-id", f.node_id,
                 "This server's name in a shared (PostgreSQL) store (default: "
                 "hostname-pid-random)")
      ->envname("KFORGE_NODE_ID");
  cmd.add_option("--lease-seconds", f.lease_seconds,
                 "Shared store: a job claimed by a server that stops renewing it (every third "
                 "of this) goes back to the queue after this many seconds")
      ->envname("KFORGE_LEASE_SECONDS")
      ->check(CLI::Range(2, 3600))
      ->capture_default_str();
  cmd.add_option("--ncu", f.ncu,
                 "Nsight Compute executable (default: ncu on PATH, else /usr/local/cuda/bin/ncu)")
      ->envname("KFORGE_NCU");
}

app::EngineOptions engine_options(const EngineFlags& f) {
  app::EngineOptions eo;
  eo.devices = f.devices;
  eo.python = f.python;
  eo.worker_path = f.worker_path;
  eo.worker_env = f.worker_env;
  eo.warm_children_gpu = f.warm_children_gpu;
  eo.warm_children_cpu = f.warm_children_cpu;
  eo.max_warm_children_gpu = f.max_warm_children_gpu;
  eo.max_warm_children_cpu = f.max_warm_children_cpu;
  eo.jobs_per_judge = f.jobs_per_judge;
  eo.warm_cuda_workers_gpu = f.warm_cuda_workers_gpu;
  eo.warm_cuda_workers_cpu = f.warm_cuda_workers_cpu;
  eo.pipeline_depth = f.pipeline_depth;
  eo.test_cpu_pipeline_depth = f.test_cpu_pipeline_depth;
  eo.sandbox = f.sandbox;
  eo.job_pids_max = f.job_pids_max;
  eo.job_tmp_bytes = static_cast<uint64_t>(f.job_tmp_mb) << 20;
  eo.jail_read_only = f.jail_read_only;
  eo.sandbox_uid_base = f.sandbox_uid_base;
  eo.kernel_cache = f.kernel_cache;
  eo.queue = f.queue;
  eo.store_fsync = f.sqlite_synchronous == "full";
  eo.store = f.store;
  eo.node_id = f.node_id;
  eo.lease_seconds = f.lease_seconds;
  eo.version = std::string(kVersion);
  eo.device_metrics_default = f.device_metrics;
  eo.cupy_cache_dir = f.cupy_cache_dir;
  eo.ncu = f.ncu;
  return eo;
}

StatusOr<EmbeddedEngine> start_embedded_engine(const EngineFlags& flags,
                                               const std::string& data_dir,
                                               const std::string& default_name) {
  app::EngineOptions eo = engine_options(flags);
  std::vector<std::filesystem::path> candidates;
  if (!data_dir.empty()) {
    candidates.emplace_back(data_dir);
  } else {
    const auto root = default_data_root();
    candidates.push_back(root / default_name);
    for (int i = 2; i <= 8; ++i)
      candidates.push_back(root / (default_name + "-" + std::to_string(i)));
  }
  Status last;
  for (const auto& dir : candidates) {
    eo.data_dir = dir;
    auto engine = app::build_engine(eo);
    if (engine.is_ok()) {
      KF_LOG_INFO("embedded engine: data dir {}", dir.string());
      return EmbeddedEngine{std::move(engine).value(), dir};
    }
    last = engine.status();
    if (last.code() != ErrorCode::kFailedPrecondition) break;  // not merely "in use"
  }
  return last;
}

StatusOr<std::unique_ptr<jobs::RetentionSweeper>> start_retention(const EngineFlags& f,
                                                                  jobs::JobService& service) {
  KF_ASSIGN_OR_RETURN(auto retention, jobs::parse_retention(f.job_retention, "--job-retention"));
  if (retention.count() == 0) return std::unique_ptr<jobs::RetentionSweeper>();
  jobs::RetentionSweeper::Options options;
  options.retention = retention;
  return std::make_unique<jobs::RetentionSweeper>(service, options);
}

sigset_t termination_signals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  return signals;
}

sigset_t block_termination_signals() {
  const sigset_t signals = termination_signals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  return signals;
}

SignalWatch::SignalWatch(const sigset_t& signals, std::function<void(int)> on_signal)
    : thread_([this, signals, on_signal = std::move(on_signal)] {
        const timespec slice{0, 100'000'000};
        while (!done_.load()) {
          const int sig = sigtimedwait(&signals, nullptr, &slice);
          if (sig > 0) {
            on_signal(sig);
            return;
          }
        }
      }) {}

SignalWatch::~SignalWatch() {
  done_.store(true);
  thread_.join();
}

}  // namespace kforge::app
