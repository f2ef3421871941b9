#include "kforge/workers/native_cuda_worker.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>
#include <cctype>
#include <cstdlib>

#include "kforge/common/files.h"
#include "kforge/common/log.h"
#include "kforge/workers/worker_env.h"

namespace kforge::workers {
namespace {

using Clock = std::chrono::steady_clock;

// Exit statuses of a directly started process, from its pidfd (waitpid when it is readable).
class ProcessExits final : public ExitSource {
 public:
  explicit ProcessExits(worker_protocol::Process& process) : process_(process) {}
  int poll_fd() const override { return process_.exit_fd(); }
  void on_readable() override { (void)process_.try_wait(); }
  std::optional<worker_protocol::ExitStatus> exit_of(pid_t pid) override {
    if (pid != process_.pid()) return std::nullopt;
    return process_.try_wait();
  }
  bool alive() const override { return true; }

 private:
  worker_protocol::Process& process_;
};

}  // namespace

NativeCudaWorker::NativeCudaWorker(NativeCudaWorkerOptions options)
    : options_(std::move(options)),
      pool_(options_.device, options_.warm_children, pool_hooks(), book_) {}

NativeCudaWorker::~NativeCudaWorker() {
  shutdown();
}

std::map<std::string, std::string> NativeCudaWorker::child_env() const {
  auto env = base_worker_env(options_.extra_env_names);
  env["CUDA_VISIBLE_DEVICES"] = options_.device == "cpu" ? "" : options_.cuda_visible_device;
  env["CUDA_CACHE_PATH"] = (options_.data_dir / "cache" / "cuda_jit").string();
  if (!options_.nvrtc_library.empty()) env["KFORGE_NVRTC_LIB"] = options_.nvrtc_library;
  // NOLINTNEXTLINE(concurrency-mt-unsafe): read-only; kforge unsets only before any thread starts
  if (const char* inc = std::getenv("KFORGE_CUDA_INCLUDE"); inc != nullptr && *inc != '\0') {
    env["KFORGE_CUDA_INCLUDE"] = inc;
  }
  return env;
}

StatusOr<std::unique_ptr<NativeCudaWorker::Child>> NativeCudaWorker::start_child() {
  KF_ASSIGN_OR_RETURN(ChildPipes pipes, ChildPipes::create());
  worker_protocol::UniqueFd devnull(::open("/dev/null", O_RDONLY | O_CLOEXEC));

  worker_protocol::LaunchOptions launch;
  launch.argv = {options_.executable.string(), "worker", "cuda", "--device", options_.device};
  if (options_.device == "cpu" && !options_.why_no_gpu.empty()) {
    launch.argv.push_back("--why-no-gpu");
    launch.argv.push_back(options_.why_no_gpu);
  }
  launch.env = child_env();
  launch.working_dir = options_.data_dir.string();
  launch.fds = {{0, devnull.get()},
                {1, pipes.out_w.get()},
                {2, pipes.err_w.get()},
                {3, pipes.proto_theirs.get()}};
  launch.rlimit_nofile = 4096;
  // Jailed processes start as pid 1 of their own pid namespace: they see no other process.
  launch.new_pid_namespace = options_.sandbox->jailing();
  KF_ASSIGN_OR_RETURN(worker_protocol::Process process, worker_protocol::launch_process(launch));
  auto child = std::make_unique<Child>();
  KF_RETURN_IF_ERROR(pipes.attach(child->channel));
  child->channel.child_id = next_child_id_++;
  child->channel.pid = process.pid();
  child->channel.started_at = Clock::now();
  child->process = std::move(process);
  std::string name = "cu-";
  for (char c : options_.device)
    if (std::isalnum(static_cast<unsigned char>(c))) name += c;
  name += "-" + std::to_string(child->channel.child_id);
  KF_ASSIGN_OR_RETURN(child->channel.sandbox, options_.sandbox->prepare_native_child(
                                                  name, child->process.pid(), options_.gpu_minor));
  KF_RETURN_IF_ERROR(child->channel.send_sandbox());
  return child;
}

Status NativeCudaWorker::wait_ready(Child& child) {
  if (child.channel.ready) return Status::ok();
  ProcessExits exits(child.process);
  return wait_child_ready(child.channel, exits, Clock::now() + options_.child_ready_timeout);
}

WarmPool<NativeCudaWorker::Child>::Hooks NativeCudaWorker::pool_hooks() {
  WarmPool<Child>::Hooks hooks;
  // The pool calls its hooks under the lock that guards it (warm_pool.h).
  hooks.start = [this]() REQUIRES(pool_mu_) -> StatusOr<std::unique_ptr<Child>> {
    auto child = start_child();
    if (!child.is_ok()) {
      book_.set_state(WorkerState::kFailed, child.status().message());
    } else if (!options_.gate && options_.timing_gate) {
      (*child)->channel.warming = (*child)->channel.warm_beside(*options_.timing_gate);
    }
    return child;
  };
  hooks.wait_ready = [this](Child& child) {
    Status ready = wait_ready(child);
    child.channel.warming.reset();
    return ready;
  };
  hooks.channel = [](Child& child) -> ChildChannel& { return child.channel; };
  return hooks;
}

void NativeCudaWorker::prepare() {
  book_.set_state(WorkerState::kStarting);
  size_t ready = 0;
  {
    MutexLock lock(pool_mu_);
    ready = pool_.warm_all();
  }
  book_.set_state(ready > 0 ? WorkerState::kReady : WorkerState::kFailed);
  KF_LOG_INFO("worker=cuda device={} {} warm process(es) ready", options_.device, ready);
}

StatusOr<std::unique_ptr<NativeCudaWorker::Child>> NativeCudaWorker::take_process(
    const WorkerJob& job, CancelToken& cancel) {
  if (options_.gate) {
    MutexLock lock(pool_mu_);
    // Processes waiting in the pool were warmed under the grant: taking one touches no GPU.
    if (pool_.size() > 0) {
      auto waiting = pool_.take(1);
      if (waiting.is_ok()) return waiting;
    }
  }
  std::unique_ptr<DeviceGate::Ticket> ticket;  // held while a process starts and warms up
  if (options_.gate) {
    KF_ASSIGN_OR_RETURN(
        ticket, options_.gate->acquire(job.job_id, cancel.wait_fd(), Clock::now() + job.timeout));
  }
  MutexLock lock(pool_mu_);
  return pool_.take();
}

// refill() takes pool_mu_ itself around each use of the pool (the analysis sees only the call
// on pool_ without it).
void NativeCudaWorker::replenish() NO_THREAD_SAFETY_ANALYSIS {
  // With other jobs in flight, a new process warms up (context, kernels) holding no grant,
  // so it holds no job up; the gate stops it while an exclusive grant is in, so it never
  // runs GPU work beside another job's timed region. It is waited for without pool_mu_:
  // other jobs take the processes that are ready meanwhile.
  pool_.refill(pool_mu_, [this](Child& child) -> std::shared_ptr<void> {
    return child.channel.warm_beside(*options_.gate);
  });
}

void NativeCudaWorker::after_job(const WorkerJob& /*job*/) {
  if (options_.gate) replenish();
}

WorkerOutcome NativeCudaWorker::run(const WorkerJob& job, CancelToken& cancel,
                                    const ProgressSink& progress) {
  book_.set_state(WorkerState::kBusy);
  if (progress) progress("starting", "waiting for a warm native CUDA worker process", 0.02);
  const auto asked = Clock::now();
  auto taken = take_process(job, cancel);
  const double take_ms = std::chrono::duration<double, std::milli>(Clock::now() - asked).count();
  if (!taken.is_ok()) {
    if (taken.status().code() == ErrorCode::kCancelled) {
      ChildJobEnd end;
      end.kind = ChildJobEnd::Kind::kCancelled;
      return outcome_of(end, Json());
    }
    book_.set_state(WorkerState::kFailed, taken.status().message());
    return {WorkerOutcome::Kind::kWorkerFailure, Json(),
            "the native CUDA worker for " + options_.device +
                " is unavailable: " + taken.status().message()};
  }
  std::unique_ptr<Child> active = std::move(taken).value();
  Json message = job_message_for(job, *active->channel.sandbox, options_.data_dir / "cache");
  DeviceGate* gate = options_.gate ? options_.gate.get() : options_.timing_gate.get();
  if (gate != nullptr) message["job"]["device_grant"] = true;

  ProcessExits exits(active->process);
  ChildJobEnd end = run_job_on_child(active->channel, message, job.timeout, cancel, progress, exits,
                                     options_.limits, gate, nullptr, AfterResult::kDeferTeardown);
  if (!options_.gate) {
    // The process taken is replaced once its job is done, not while it runs: a starting
    // process creates a CUDA context, which stalls the driver calls of the running job (on
    // an H100 that doubled the timing phase of a small job). Started (not waited for)
    // before the answer goes out, as measured for the back-to-back latency; the other warm
    // processes serve the next jobs.
    MutexLock lock(pool_mu_);
    (void)pool_.top_up();
  }
  Json worker_info = {
      {"type", "cuda"},
      {"pid", active->channel.pid},
      {"warmup_ms", active->channel.ready_message.value("warmup_ms", 0.0)},
      {"warmup_steps_ms", active->channel.ready_message.value("warmup_steps_ms", Json::object())}};
  worker_info["sandbox"] = active->channel.ready_message.value("sandbox", Json::object());
  Json result = assemble_result(message["job"], end, job.timeout, worker_info);
  const auto released = Clock::now();
  if (end.teardown_deferred) {
    // The answer goes out while the process ends; its device ticket goes back after.
    std::shared_ptr<Child> dying(std::move(active));
    teardowns_.add({[dying] {
                      dying->channel.kill_all();  // its cgroup, when jailed
                      dying->process.kill_and_wait(std::chrono::milliseconds(2000));
                    },
                    teardown_ticket(std::move(end.held), gate, job.job_id)});
  }
  active.reset();  // kills what is left of the process and removes its scratch directory
  result["process"]["take_ms"] = take_ms;
  result["process"]["release_ms"] =
      std::chrono::duration<double, std::milli>(Clock::now() - released).count();
  book_.note_job_end(end.kind, WorkerState::kReady);
  return outcome_of(end, std::move(result));
}

Json NativeCudaWorker::status() const {
  Json s = {{"type", "cuda"}, {"device", options_.device}};
  book_.fill_status(s);
  s["warm_children_target"] = options_.warm_children;
  s["teardowns"] = teardowns_.status();
  return s;
}

void NativeCudaWorker::shutdown() {
  teardowns_.drain();
  // Closing the protocol socket makes a waiting process exit; ~Process kills and reaps.
  MutexLock lock(pool_mu_);
  pool_.clear();
  book_.set_state(WorkerState::kStopped);
}

}  // namespace kforge::workers
