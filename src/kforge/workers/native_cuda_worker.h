// The native CUDA worker of one device: `kforge worker cuda --device D` processes started
// directly by the supervisor (no zygote: CUDA state cannot survive fork), each with the
// protocol socket as fd 3. Like the Python worker it keeps `warm_children` processes
// started and ready (NVRTC warm, CUDA context, L2 flush buffer) ahead of the jobs; each
// process runs one job, so a kernel fault or a hang costs only that process.
//
// On the cpu device (no GPU on the server) the processes compile with NVRTC and answer
// `cuda` jobs with "no CUDA device on this server".
//
// Thread-safety: prepare()/shutdown() are called by the device's runner thread only; run()
// too without a gate, and from several runner threads with one (the pool is then guarded);
// status() may be called from any thread.
#pragma once

#include <chrono>
#include <deque>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "kforge/common/json.h"
#include "kforge/common/thread_annotations.h"
#include "kforge/worker_protocol/process.h"
#include "kforge/workers/child_channel.h"
#include "kforge/workers/device_gate.h"
#include "kforge/workers/teardowns.h"
#include "kforge/workers/warm_pool.h"
#include "kforge/workers/worker.h"
#include "kforge/workers/worker_book.h"

namespace kforge::workers {

struct NativeCudaWorkerOptions {
  std::string device;                 // "cpu" or "cuda:N" (server-side name)
  std::filesystem::path executable;   // the kforge binary (`worker cuda` subcommand)
  std::filesystem::path data_dir;     // scratch/ and cache/ are below it
  std::string cuda_visible_device;    // GPU uuid for CUDA_VISIBLE_DEVICES (GPU only)
  std::string nvrtc_library;          // KFORGE_NVRTC_LIB for the processes ("" = search)
  std::string why_no_gpu;             // cpu device: why the server has no GPU
  Json device_info = Json::object();  // inventory facts, reported in status()
  std::vector<std::string> extra_env_names;
  ChildLimits limits;
  // Processes kept started and ready ahead of jobs. Each GPU one holds a CUDA context and
  // the L2 flush buffer (a few hundred MiB of GPU memory).
  int warm_children = 1;
  std::chrono::seconds child_ready_timeout{120};
  std::shared_ptr<const SandboxPolicy> sandbox;  // never null (see PythonWorkerOptions)
  int gpu_minor = -1;
  // Pipelined stages (--pipeline-depth > 1): the device's grant. Jobs then run concurrently
  // (run() is called from several runner threads), compile without the device, and ask
  // for it (`device_grant` in their spec) before they touch the GPU; processes are started
  // and warmed (a CUDA context, kernels) only while holding the grant. Null: one job at a
  // time, as before.
  std::shared_ptr<DeviceGate> gate;
  // Without a gate: the device's gate for timed regions only (see PythonWorkerOptions): a
  // job asks for it (alone) before it touches the GPU, and a process warming up (its
  // replacement is started as a job ends, so it warms while the next job runs) is registered
  // with it until a job takes it, so it is stopped while another job runs on the GPU.
  std::shared_ptr<DeviceGate> timing_gate;
};

class NativeCudaWorker final : public Worker {
 public:
  explicit NativeCudaWorker(NativeCudaWorkerOptions options);
  ~NativeCudaWorker() override;

  std::string_view type() const override { return "cuda"; }
  void prepare() override;
  WorkerOutcome run(const WorkerJob& job, CancelToken& cancel,
                    const ProgressSink& progress) override;
  // With a gate, replaces the process the job used (replenish()) once the job's result is
  // out (without one, run() starts the replacement as the job ends).
  void after_job(const WorkerJob& job) override;
  WorkerState state() const override { return book_.state(); }
  Json status() const override;
  void shutdown() override;

 private:
  // A started process and the supervisor's end of its channel.
  struct Child {
    worker_protocol::Process process;
    ChildChannel channel;
  };

  StatusOr<std::unique_ptr<Child>> start_child() REQUIRES(pool_mu_);
  // A ready process for a job; with a gate, one is started only while holding the grant.
  StatusOr<std::unique_ptr<Child>> take_process(const WorkerJob& job, CancelToken& cancel);
  // With a gate: replaces the process a job used, warmed up holding no grant but stopped
  // while an exclusive one is in, and waited for without pool_mu_.
  void replenish() EXCLUDES(pool_mu_);
  Status wait_ready(Child& child);
  WarmPool<Child>::Hooks pool_hooks();
  std::map<std::string, std::string> child_env() const;

  const NativeCudaWorkerOptions options_;
  WorkerBook book_;  // thread-safe; declared before pool_, which writes to it
  Mutex pool_mu_;    // held for every use of pool_ (and so of next_child_id_)
  int next_child_id_ GUARDED_BY(pool_mu_) = 1;
  WarmPool<Child> pool_ GUARDED_BY(pool_mu_);
  // Jobs' processes ending after their answers went out. Last: destroyed first, so every
  // teardown finishes while the rest of the worker is still there.
  Teardowns teardowns_;
};

}  // namespace kforge::workers
