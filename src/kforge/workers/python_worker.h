// The Python worker of one device: a zygote process (`python -m kforge_worker zygote`) that
// has imported torch and triton, and one forked child per job. The next child is forked
// and warmed (CUDA context, Triton launcher, torch ops) while the current job runs, so a
// job finds a ready process (docs/worker-protocol.md, docs/architecture.md "Isolation").
//
// Thread-safety: prepare()/shutdown() are called by the device's runner thread only; run()
// may be called from several runner threads (pipelined stages): without a gate it runs one
// job at a time; with one, the jobs run together (each admitted with a shared grant, timed
// under an exclusive one) and only taking a child from the pool is one at a time. status()
// may be called from any thread.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "kforge/common/json.h"
#include "kforge/common/thread_annotations.h"
#include "kforge/worker_protocol/process.h"
#include "kforge/workers/child_channel.h"
#include "kforge/workers/device_gate.h"
#include "kforge/workers/kept_judges.h"
#include "kforge/workers/teardowns.h"
#include "kforge/workers/warm_pool.h"
#include "kforge/workers/worker.h"
#include "kforge/workers/worker_book.h"

namespace kforge::workers {

struct PythonWorkerOptions {
  std::string device;                        // "cpu" or "cuda:N" (server-side name)
  std::string python = "python3";            // interpreter that has torch and triton
  std::filesystem::path worker_path;         // directory that contains kforge_worker/
  std::filesystem::path data_dir;            // scratch/ and cache/ are created below it
  std::string cuda_visible_device;           // GPU uuid for CUDA_VISIBLE_DEVICES (GPU only)
  std::string triton_arch;                   // "90" etc. so the zygote can warm Triton's compiler
  Json device_info = Json::object();         // inventory facts, reported in status()
  std::vector<std::string> extra_env_names;  // --worker-env
  std::string cuda_abi_library;  // libkforge_cuda.so, for `cuda` kernels (KFORGE_CUDA_ABI)
  std::string nvrtc_library;     // libnvrtc for it (KFORGE_NVRTC_LIB); "" = search
  std::string sandbox_library;   // libkforge_sandbox.so, the jail (KFORGE_SANDBOX_LIB)
  // Identities, cgroups and jails of the children (never null: an "off" policy still gives
  // each child its own scratch directories).
  std::shared_ptr<const SandboxPolicy> sandbox;
  int gpu_minor = -1;  // /dev/nvidiaN of this device (the others are hidden from jobs)
  std::filesystem::path cupy_cache_dir;  // CUPY_CACHE_DIR of jobs; empty: data_dir/cache/cupy
  ChildLimits limits;
  // Children kept forked and warm ahead of jobs. A GPU child's warm-up (CUDA context, first
  // Triton launch) takes longer than a small job, so a GPU keeps 3 (measured on an
  // H200: p50 0.64 s with 1, 0.35 s with 2, 0.23 s with 3 for back-to-back small jobs); each
  // waiting child holds a CUDA context (a few hundred MiB).
  int warm_children = 1;
  // With a gate: how many children may warm at once ahead of queued jobs (a batch of 16
  // announces 16; expect_jobs()). 0 or less than warm_children: warm_children.
  int max_warm_children = 0;
  std::optional<uint64_t> child_address_space_bytes;  // RLIMIT_AS for cpu children
  // Pipelined stages (--pipeline-depth > 1): the device's grant, shared with the device's
  // native CUDA worker. A Python job takes a *shared* ticket before it takes a child (its
  // candidate's code runs at import, so nothing of it runs before it is admitted), and its
  // judge asks for the *exclusive* grant around its timed regions (`exclusive_timing` in
  // the spec; docs/worker-protocol.md "Device grant"). Jobs of this worker then run
  // together. Null: no grant (one job per device, holding it for the whole job).
  std::shared_ptr<DeviceGate> gate;
  // Without a gate: the device's gate for timed regions only (shared with the native CUDA
  // worker; engine.cc makes one per device). The job's judge takes it alone around its
  // timed regions (`exclusive_timing`), and every child warming up meanwhile (the
  // replacement top_up() starts as a job begins, a CUDA context and warm-up launches) is
  // registered with it from its start until a job takes it (the pool sees it ready only
  // then; a waiting child is idle, stopping it costs nothing), so it is stopped while a
  // timed region runs. Null: no such care (tests of the worker alone).
  std::shared_ptr<DeviceGate> timing_gate;
  // Jobs one judge may serve (1: one, as every candidate does). With more, and jailing on, a
  // child is forked with jobs_per_judge - 1 spare candidate processes (jailed, warming
  // nothing), and after a job it is kept ("parked") for the next job of the same submitter
  // and the same reference: that job's candidate is a fresh spare, warmed while the judge
  // waited; the judge, its CUDA context and its warm-up are reused (docs/security.md, "A
  // judge serves several jobs"). At most KeptJudges::kMaxParked judges wait per worker,
  // each at most KeptJudges::kParkedFor (kept_judges.h).
  int jobs_per_judge = 1;
  std::chrono::seconds zygote_start_timeout{300};
  std::chrono::seconds child_ready_timeout{180};
};

class PythonWorker final : public Worker, private ExitSource {
 public:
  explicit PythonWorker(PythonWorkerOptions options);
  ~PythonWorker() override;

  std::string_view type() const override { return "python"; }
  void prepare() override;
  WorkerOutcome run(const WorkerJob& job, CancelToken& cancel,
                    const ProgressSink& progress) override;
  // With a gate: warms the children that replace those taken (see replenish()).
  void after_job(const WorkerJob& job) override;
  // With a gate: raises the pool's target to the queued jobs (up to max_warm_children) and
  // has the warmer thread start the missing children at once.
  void expect_jobs(int queued) override;
  WorkerState state() const override { return book_.state(); }
  Json status() const override;
  void shutdown() override;

 private:
  // ExitSource: exit statuses come from the zygote's `exited` messages.
  int poll_fd() const override {
    RecursiveMutexLock lock(control_mu_);
    return control_.get();
  }
  void on_readable() override;
  std::optional<worker_protocol::ExitStatus> exit_of(pid_t pid) override;
  bool alive() const override {
    RecursiveMutexLock lock(control_mu_);
    return control_.valid();
  }
  // With a gate: after a job's result is out, new warm children are forked and warmed up
  // holding no ticket, so they hold no job up; the gate stops them (SIGSTOP) while an
  // exclusive grant is in, so a warm-up (a CUDA context, a Triton launch) never runs beside
  // a timed region. The wait for their `ready` (the warm-up itself) is outside run_mu_, so
  // jobs keep taking ready children meanwhile.
  void replenish() EXCLUDES(run_mu_);
  // With a gate and room above warm_children: applies expect_jobs()'s demand and refills.
  void warmer_loop();
  void stop_warmer();

  // The key of a job whose judge may be kept or reused: its submitter, device and reference
  // (the only state a judge keeps between jobs); "" where judges are not reused.
  std::string reuse_key(const WorkerJob& job) const;
  // The gate a job's timed regions take and warm-ups register with: the pipelined grant,
  // else the timing gate (null in tests of the worker alone).
  DeviceGate* device_gate() const;
  // The zygote starts and stops with the pool emptied, so under run_mu_.
  Status start_zygote() REQUIRES(run_mu_);
  void stop_zygote() REQUIRES(run_mu_);
  Status handle_control_message(const Json& message) REQUIRES(control_mu_);
  // Forks a child through the zygote and waits for its `forked` reply.
  StatusOr<std::unique_ptr<ChildChannel>> fork_child() REQUIRES(run_mu_);
  // The pool's most children warming at once: an atomic it writes under run_mu_, read
  // without it.
  int most_children_warming() const NO_THREAD_SAFETY_ANALYSIS { return pool_.most_warming(); }
  WarmPool<ChildChannel>::Hooks pool_hooks();
  std::map<std::string, std::string> zygote_env() const;

  const PythonWorkerOptions options_;
  WorkerBook book_;  // thread-safe; declared before pool_, which writes to it

  // Held by run() for its whole job without a gate; with one, while it takes a child (the
  // pool, zygote and fork state below are used under it).
  Mutex run_mu_;
  // The zygote's control socket and what arrives on it (control_, forked_, fork_failures_,
  // exits_): used by the thread under run_mu_ and, with a gate, by every job's loop (the
  // ExitSource methods). Recursive: fork_child() calls on_readable().
  mutable RecursiveMutex control_mu_;

  // Used by the runner thread (the one in run(), or in prepare()/shutdown()).
  std::optional<worker_protocol::Process> zygote_ GUARDED_BY(control_mu_);
  worker_protocol::UniqueFd control_ GUARDED_BY(control_mu_);
  WarmPool<ChildChannel> pool_ GUARDED_BY(run_mu_);
  std::map<int, pid_t> forked_ GUARDED_BY(control_mu_);  // child_id -> pid, from `forked`
  // child_id -> error, from `fork_failed`
  std::map<int, std::string> fork_failures_ GUARDED_BY(control_mu_);
  // From `exited`, pruned.
  std::map<pid_t, worker_protocol::ExitStatus> exits_ GUARDED_BY(control_mu_);
  int next_child_id_ GUARDED_BY(control_mu_) = 1;
  // With a gate: notified whenever a warming child is adopted (or lost), so a job that finds
  // none ready waits for one already warming instead of starting another (under run_mu_).
  std::condition_variable adopted_;

  // The warmer thread and its demand (expect_jobs() never waits for run_mu_).
  Mutex warmer_mu_;
  std::condition_variable warmer_cv_;
  int demand_ GUARDED_BY(warmer_mu_) = 0;
  bool demand_changed_ GUARDED_BY(warmer_mu_) = false;
  bool warmer_stop_ GUARDED_BY(warmer_mu_) = false;
  std::thread warmer_;

  mutable Mutex mu_;
  Json hello_ GUARDED_BY(mu_) = Json::object();
  int64_t zygote_starts_ GUARDED_BY(mu_) = 0;
  pid_t zygote_pid_ GUARDED_BY(mu_) = -1;
  KeptJudges kept_;  // judges kept between jobs (jobs_per_judge > 1)

  // Jobs' processes ending after their answers went out. Last: destroyed first, so every
  // teardown finishes while the rest of the worker is still there (a kept judge is parked
  // from there, so kept_ is declared before it).
  Teardowns teardowns_;
};

}  // namespace kforge::workers
