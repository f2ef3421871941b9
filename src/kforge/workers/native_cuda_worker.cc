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
  explicit ProcessExits(Process& process) : process_(process) {}
  int poll_fd() const override { return process_.exit_fd(); }
  void on_readable() override { (void)process_.try_wait(); }
  std::optional<ExitStatus> exit_of(pid_t pid) override {
    if (pid != process_.pid()) return std::nullopt;
    return process_.try_wait();
  }
  bool alive() const override { return true; }

 private:
  Process& process_;
};

}  // namespace

NativeCudaWorker::NativeCudaWorker(NativeCudaWorkerOptions options)
    : options_(std::move(options)), pool_(options_.device, options_.warm_children, pool_hooks()) {}

NativeCudaWorker::~NativeCudaWorker() {
  shutdown();
}

void NativeCudaWorker::set_state(WorkerState state, std::string error) {
  std::lock_guard lock(mu_);
  state_ = state;
  if (!error.empty()) last_error_ = std::move(error);
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
  UniqueFd devnull(::open("/dev/null", O_RDONLY | O_CLOEXEC));

  LaunchOptions launch;
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
  KF_ASSIGN_OR_RETURN(Process process, launch_process(launch));
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
  {
    std::lock_guard lock(mu_);
    ++started_;
  }
  return child;
}

Status NativeCudaWorker::wait_ready(Child& child) {
  if (child.channel.ready) return Status::ok();
  ProcessExits exits(child.process);
  KF_RETURN_IF_ERROR(
      wait_child_ready(child.channel, exits, Clock::now() + options_.child_ready_timeout));
  const Json& ready = child.channel.ready_message;
  std::lock_guard lock(mu_);
  child_device_ = ready.value("device", Json());
  child_warmup_ms_ = ready.value("warmup_ms", 0.0);
  child_warmup_steps_ = ready.value("warmup_steps_ms", Json::object());
  if (ready.contains("warmup_errors") && ready["warmup_errors"].is_object() &&
      !ready["warmup_errors"].empty()) {
    last_error_ = "warm-up: " + ready["warmup_errors"].dump();
  }
  return Status::ok();
}

WarmPool<NativeCudaWorker::Child>::Hooks NativeCudaWorker::pool_hooks() {
  WarmPool<Child>::Hooks hooks;
  hooks.start = [this]() -> StatusOr<std::unique_ptr<Child>> {
    auto child = start_child();
    if (!child.is_ok()) set_state(WorkerState::kFailed, child.status().message());
    return child;
  };
  hooks.wait_ready = [this](Child& child) { return wait_ready(child); };
  hooks.discard = [this](Child& child, const Status& why) {
    KF_LOG_WARN("worker=cuda device={} process pid={} failed before ready: {}", options_.device,
                child.channel.pid, why.message());
    child.channel.kill_all();
    std::lock_guard lock(mu_);
    ++child_crashes_;
    last_error_ = why.message();
  };
  return hooks;
}

void NativeCudaWorker::prepare() {
  set_state(WorkerState::kStarting);
  size_t ready = pool_.warm_all();
  set_state(ready > 0 ? WorkerState::kReady : WorkerState::kFailed);
  KF_LOG_INFO("worker=cuda device={} {} warm process(es) ready", options_.device, ready);
}

WorkerOutcome NativeCudaWorker::run(const WorkerJob& job, CancelToken& cancel,
                                    const ProgressSink& progress) {
  set_state(WorkerState::kBusy);
  if (progress) progress("starting", "waiting for a warm native CUDA worker process", 0.02);
  auto taken = pool_.take();
  if (!taken.is_ok()) {
    set_state(WorkerState::kFailed, taken.status().message());
    return {WorkerOutcome::Kind::kWorkerFailure, Json(),
            "the native CUDA worker for " + options_.device +
                " is unavailable: " + taken.status().message()};
  }
  std::unique_ptr<Child> active = std::move(taken).value();
  Json spec = job.spec;
  spec["scratch_dir"] = active->channel.sandbox->scratch.string();
  spec["cache_dir"] = (options_.data_dir / "cache").string();
  Json message = {{"type", "job"}, {"job", spec}};

  // The process taken is replaced once this job is done, not while it runs: a starting
  // process creates a CUDA context, which stalls the driver calls of the running job (on an
  // H100 that doubled the timing phase of a small job). The other warm processes serve the
  // next jobs.
  ProcessExits exits(active->process);
  ChildJobEnd end = run_job_on_child(active->channel, message, job.timeout, cancel, progress, exits,
                                     options_.limits);
  (void)pool_.top_up();
  Json worker_info = {{"type", "cuda"},
                      {"pid", active->channel.pid},
                      {"warmup_ms", active->channel.ready_message.value("warmup_ms", 0.0)}};
  worker_info["sandbox"] = active->channel.ready_message.value("sandbox", Json::object());
  Json result = assemble_result(spec, end, job.timeout, worker_info);
  active.reset();  // kills what is left of the process and removes its scratch directory
  {
    std::lock_guard lock(mu_);
    ++jobs_run_;
    if (end.kind == ChildJobEnd::Kind::kCrashed || end.kind == ChildJobEnd::Kind::kMemoryLimit ||
        end.kind == ChildJobEnd::Kind::kProtocolError) {
      ++child_crashes_;
    }
    if (end.kind == ChildJobEnd::Kind::kTimeout) ++timeouts_;
    state_ = WorkerState::kReady;
  }
  if (end.kind == ChildJobEnd::Kind::kCancelled) {
    return {WorkerOutcome::Kind::kCancelled, std::move(result), "cancelled"};
  }
  return {WorkerOutcome::Kind::kResult, std::move(result), {}};
}

Json NativeCudaWorker::status() const {
  std::lock_guard lock(mu_);
  Json s = {{"type", "cuda"},
            {"device", options_.device},
            {"state", worker_state_name(state_)},
            {"processes_started", started_},
            {"jobs_run", jobs_run_},
            {"child_crashes", child_crashes_},
            {"timeouts", timeouts_},
            {"child_warmup_ms", child_warmup_ms_},
            {"child_warmup_steps_ms", child_warmup_steps_},
            {"warm_children_target", options_.warm_children}};
  if (!last_error_.empty()) s["last_error"] = last_error_;
  if (!child_device_.is_null()) s["child_device"] = child_device_;
  return s;
}

void NativeCudaWorker::shutdown() {
  // Closing the protocol socket makes a waiting process exit; ~Process kills and reaps.
  pool_.clear();
  set_state(WorkerState::kStopped);
}

}  // namespace kforge::workers
