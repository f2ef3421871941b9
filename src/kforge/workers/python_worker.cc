#include "kforge/workers/python_worker.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>

#include "kforge/common/files.h"
#include "kforge/common/hash.h"
#include "kforge/common/log.h"
#include "kforge/workers/reference_staging.h"
#include "kforge/workers/worker_env.h"

namespace kforge::workers {
namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kMaxRememberedExits = 1024;
constexpr std::chrono::seconds kForkReplyTimeout{30};

Status set_nonblocking(int fd) {
  int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags | O_NONBLOCK) < 0) {
    return errno_error("fcntl(O_NONBLOCK)", errno);
  }
  return Status::ok();
}

}  // namespace

PythonWorker::PythonWorker(PythonWorkerOptions options)
    : options_(std::move(options)),
      pool_(options_.device, options_.warm_children, pool_hooks(), book_,
            options_.gate ? options_.max_warm_children : 0) {}

PythonWorker::~PythonWorker() {
  shutdown();
}

std::map<std::string, std::string> PythonWorker::zygote_env() const {
  auto env = base_worker_env(options_.extra_env_names);
  std::string pythonpath = options_.worker_path.string();
  env["PYTHONPATH"] = pythonpath;
  env["PYTHONUNBUFFERED"] = "1";
  env["PYTHONDONTWRITEBYTECODE"] = "1";
  env["PYTHONHASHSEED"] = "0";
  env["PYTHONSAFEPATH"] = "1";  // `-m` must not put the working directory on sys.path
  env["TRITON_CACHE_DIR"] = (options_.data_dir / "cache" / "triton").string();
  env["TORCH_EXTENSIONS_DIR"] = (options_.data_dir / "cache" / "torch_extensions").string();
  env["CUPY_CACHE_DIR"] = options_.cupy_cache_dir.empty()
                              ? (options_.data_dir / "cache" / "cupy").string()
                              : options_.cupy_cache_dir.string();
  if (options_.device == "cpu") {
    env["TRITON_INTERPRET"] = "1";
    env["CUDA_VISIBLE_DEVICES"] = "";
  } else {
    env["CUDA_VISIBLE_DEVICES"] = options_.cuda_visible_device;
    env["CUDA_MODULE_LOADING"] = "LAZY";
  }
  if (!options_.cuda_abi_library.empty()) env["KFORGE_CUDA_ABI"] = options_.cuda_abi_library;
  if (!options_.nvrtc_library.empty()) env["KFORGE_NVRTC_LIB"] = options_.nvrtc_library;
  if (!options_.sandbox_library.empty()) env["KFORGE_SANDBOX_LIB"] = options_.sandbox_library;
  if (options_.child_address_space_bytes) {
    env["KFORGE_CHILD_AS_BYTES"] = std::to_string(*options_.child_address_space_bytes);
  }
  return env;
}

Status PythonWorker::start_zygote() {
  RecursiveMutexLock control_lock(control_mu_);
  book_.set_state(WorkerState::kStarting);
  // The zygote's warm Triton cache (children read it); their scratch directories are
  // SandboxPolicy's.
  KF_RETURN_IF_ERROR(make_dirs(options_.data_dir / "cache" / "triton"));
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
    return errno_error("socketpair", errno);
  }
  worker_protocol::UniqueFd ours(pair[0]);
  worker_protocol::UniqueFd theirs(pair[1]);
  worker_protocol::UniqueFd devnull(::open("/dev/null", O_RDONLY | O_CLOEXEC));
  worker_protocol::LaunchOptions launch;
  launch.argv = {options_.python, "-m", "kforge_worker", "zygote", "--device", options_.device};
  if (!options_.triton_arch.empty()) {
    launch.argv.push_back("--arch");
    launch.argv.push_back(options_.triton_arch);
  }
  launch.env = zygote_env();
  launch.working_dir = options_.data_dir.string();
  // The zygote's own diagnostics go to the server's stderr; kernels' output never does
  // (children get their own pipes).
  launch.fds = {{0, devnull.get()}, {1, STDERR_FILENO}, {2, STDERR_FILENO}, {3, theirs.get()}};
  KF_ASSIGN_OR_RETURN(worker_protocol::Process zygote, worker_protocol::launch_process(launch));
  theirs.reset();
  KF_RETURN_IF_ERROR(set_nonblocking(ours.get()));
  control_ = std::move(ours);
  pid_t pid = zygote.pid();
  zygote_ = std::move(zygote);
  KF_LOG_INFO("worker device={} starting zygote pid={} ({})", options_.device, pid,
              options_.python);

  auto deadline = Clock::now() + options_.zygote_start_timeout;
  while (true) {
    pollfd p{control_.get(), POLLIN, 0};
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      stop_zygote();
      return {ErrorCode::kDeadlineExceeded,
              "the Python worker did not start within " +
                  std::to_string(options_.zygote_start_timeout.count()) + " s"};
    }
    int n = ::poll(&p, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (n <= 0) {
      if (auto exit = zygote_->try_wait()) {
        stop_zygote();
        return unavailable("the Python worker (" + options_.python + " -m kforge_worker) " +
                           exit->describe() +
                           " while starting; check that torch and triton are installed (make "
                           "setup) — its output is in the server log");
      }
      continue;
    }
    auto msg = worker_protocol::recv_control(control_.get());
    if (!msg.is_ok()) {
      stop_zygote();
      return msg.status();
    }
    if (msg->kind == worker_protocol::ControlRead::Kind::kWouldBlock) continue;
    if (msg->kind == worker_protocol::ControlRead::Kind::kClosed) {
      auto exit = zygote_->wait_for(std::chrono::milliseconds(2000));
      stop_zygote();
      return unavailable("the Python worker " +
                         (exit ? exit->describe() : std::string("closed its socket")) +
                         " while starting — its output is in the server log");
    }
    const Json& m = msg->message;
    if (m.value("type", "") != "hello") {
      KF_RETURN_IF_ERROR(handle_control_message(m));
      continue;
    }
    if (Status v = worker_protocol::check_protocol_version(m); !v) {
      stop_zygote();
      return v;
    }
    bool restart = false;
    {
      MutexLock lock(mu_);
      hello_ = m;
      zygote_pid_ = pid;
      restart = zygote_starts_++ > 0;
    }
    if (restart) book_.note_restart();
    book_.set_state(WorkerState::kReady);
    KF_LOG_INFO("worker device={} zygote ready pid={} startup_ms={}", options_.device, pid,
                m.value("startup_ms", 0.0));
    return Status::ok();
  }
}

void PythonWorker::stop_zygote() {
  RecursiveMutexLock control_lock(control_mu_);
  pool_.clear();
  kept_.clear();
  if (control_.valid()) {
    (void)worker_protocol::send_control(control_.get(), Json{{"type", "shutdown"}});
  }
  control_.reset();
  if (zygote_) {
    if (!zygote_->wait_for(std::chrono::milliseconds(200))) zygote_->kill_group();
    (void)zygote_->wait_for(std::chrono::milliseconds(2000));
    zygote_.reset();
  }
  MutexLock lock(mu_);
  zygote_pid_ = -1;
}

Status PythonWorker::handle_control_message(const Json& m) {
  const std::string type = m.value("type", "");
  if (type == "forked") {
    forked_[m.value("child_id", 0)] = m.value("pid", -1);
  } else if (type == "fork_failed") {
    fork_failures_[m.value("child_id", 0)] = m.value("error", "fork failed");
  } else if (type == "exited") {
    worker_protocol::ExitStatus s;
    if (m.contains("exit_code") && m["exit_code"].is_number_integer()) {
      s.exit_code = m["exit_code"].get<int>();
    }
    if (m.contains("signal") && m["signal"].is_number_integer()) s.signal = m["signal"].get<int>();
    if (exits_.size() >= kMaxRememberedExits) exits_.erase(exits_.begin());
    exits_[m.value("pid", -1)] = s;
  }
  return Status::ok();
}

void PythonWorker::on_readable() {
  RecursiveMutexLock control_lock(control_mu_);
  while (control_.valid()) {
    auto msg = worker_protocol::recv_control(control_.get());
    if (!msg.is_ok()) {
      KF_LOG_WARN("worker device={} control socket error: {}", options_.device,
                  msg.status().message());
      control_.reset();
      return;
    }
    if (msg->kind == worker_protocol::ControlRead::Kind::kWouldBlock) return;
    if (msg->kind == worker_protocol::ControlRead::Kind::kClosed) {
      KF_LOG_WARN("worker device={} zygote exited", options_.device);
      control_.reset();
      return;
    }
    (void)handle_control_message(msg->message);
  }
}

std::optional<worker_protocol::ExitStatus> PythonWorker::exit_of(pid_t pid) {
  RecursiveMutexLock control_lock(control_mu_);
  auto it = exits_.find(pid);
  if (it == exits_.end()) return std::nullopt;
  return it->second;
}

StatusOr<std::unique_ptr<ChildChannel>> PythonWorker::fork_child() {
  RecursiveMutexLock control_lock(control_mu_);
  if (!control_.valid()) KF_RETURN_IF_ERROR(start_zygote());
  KF_ASSIGN_OR_RETURN(ChildPipes pipes, ChildPipes::create());
  const int child_id = next_child_id_++;
  std::array<int, 3> pass = {pipes.proto_theirs.get(), pipes.out_w.get(), pipes.err_w.get()};
  KF_RETURN_IF_ERROR(worker_protocol::send_control(
      control_.get(), Json{{"type", "fork"}, {"child_id", child_id}}, pass));
  // Our copies of the child's ends must close, or we would never see EOF on them.
  pipes.proto_theirs.reset();
  pipes.out_w.reset();
  pipes.err_w.reset();
  auto deadline = Clock::now() + kForkReplyTimeout;
  while (!forked_.contains(child_id)) {
    if (auto f = fork_failures_.find(child_id); f != fork_failures_.end()) {
      std::string why = f->second;
      fork_failures_.erase(f);
      return unavailable("the zygote could not fork a child: " + why);
    }
    if (!control_.valid()) return unavailable("the Python worker zygote exited");
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      return Status(ErrorCode::kDeadlineExceeded, "the zygote did not fork in time");
    }
    pollfd p{control_.get(), POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left.count())) > 0) on_readable();
  }
  auto child = std::make_unique<ChildChannel>();
  child->child_id = child_id;
  child->pid = forked_[child_id];
  forked_.erase(child_id);
  child->started_at = Clock::now();
  KF_RETURN_IF_ERROR(pipes.attach(*child));
  // The child waits for its `sandbox` message before it does anything: it is in its cgroup
  // (and so is every process it will start) before it runs a line of a job's code.
  std::string name = "py-";
  for (char c : options_.device)
    if (std::isalnum(static_cast<unsigned char>(c))) name += c;
  name += "-" + std::to_string(child_id);
  auto prepared = options_.sandbox->prepare_python_child(name, child->pid, options_.gpu_minor);
  if (!prepared.is_ok()) {
    worker_protocol::kill_process_group(child->pid);
    return prepared.status().with_context("preparing the child's sandbox");
  }
  child->sandbox = std::move(prepared).value();
  if (options_.jobs_per_judge > 1 && options_.sandbox->jailing()) {
    // Spare candidates for the jobs after its first, should it be kept (reuse_key()).
    child->sandbox->message["spares"] = options_.jobs_per_judge - 1;
  }
  if (Status s = child->send_sandbox(); !s) {
    child->kill_all();
    return s;
  }
  return child;
}

WarmPool<ChildChannel>::Hooks PythonWorker::pool_hooks() {
  WarmPool<ChildChannel>::Hooks hooks;
  // The pool calls its hooks under the lock that guards it (warm_pool.h).
  hooks.start = [this]() REQUIRES(run_mu_) -> StatusOr<std::unique_ptr<ChildChannel>> {
    RecursiveMutexLock control_lock(control_mu_);  // jobs' loops read the control socket
    if (!control_.valid() && zygote_) {
      pool_.clear();  // its children died with the old zygote
      stop_zygote();
    }
    auto child = fork_child();
    if (child.is_ok() && !options_.gate && options_.timing_gate) {
      (*child)->warming = (*child)->warm_beside(*options_.timing_gate);
    }
    return child;
  };
  hooks.wait_ready = [this](ChildChannel& child) {
    Status ready = wait_child_ready(child, *this, Clock::now() + options_.child_ready_timeout);
    child.warming.reset();
    return ready;
  };
  hooks.channel = [](ChildChannel& child) -> ChildChannel& { return child; };
  return hooks;
}

void PythonWorker::prepare() {
  // Uncontended: no job runs and no warmer is started before prepare() returns.
  MutexLock run_lock(run_mu_);
  if (Status s = start_zygote(); !s) {
    book_.set_state(WorkerState::kFailed, s.message());
    KF_LOG_ERROR("worker device={} failed to start: {}", options_.device, s.message());
    return;
  }
  // Warm the children now, so the first jobs find them ready (and status() can say so).
  pool_.warm_all();
  if (options_.gate && pool_.max_target() > pool_.target() && !warmer_.joinable()) {
    warmer_ = std::thread([this] { warmer_loop(); });
  }
}

// refill() takes run_mu_ itself around each use of the pool (the analysis sees only the call
// on pool_ without it).
void PythonWorker::replenish() NO_THREAD_SAFETY_ANALYSIS {
  // Stopped while another job's timed region holds the device (see the header).
  pool_.refill(
      run_mu_,
      [this](ChildChannel& child) -> std::shared_ptr<void> {
        return child.warm_beside(*options_.gate);
      },
      &adopted_);
}

void PythonWorker::after_job(const WorkerJob& /*job*/) {
  if (options_.gate) replenish();
}

namespace {
// How long the warmer waits for a queue count to stop changing before it acts, and how many
// such waits at most (10 ms each: a burst is gathered within 100 ms, far below a warm-up).
constexpr std::chrono::milliseconds kDemandSettle{10};
constexpr int kDemandSettleRounds = 10;
}  // namespace

void PythonWorker::expect_jobs(int queued) {
  if (!options_.gate) return;
  {
    MutexLock lock(warmer_mu_);
    demand_ = queued;
    demand_changed_ = true;
  }
  warmer_cv_.notify_one();
}

void PythonWorker::warmer_loop() {
  MutexLock lock(warmer_mu_);
  for (;;) {
    const auto changed = [this]() REQUIRES(warmer_mu_) { return warmer_stop_ || demand_changed_; };
    lock.wait(warmer_cv_, changed);
    // A batch's jobs are queued one by one (each stored first): gather the burst, while the
    // count keeps changing within kDemandSettle (at most kDemandSettleRounds times), so its
    // missing children start together instead of one round per job.
    for (int round = 0; round < kDemandSettleRounds && !warmer_stop_; ++round) {
      demand_changed_ = false;
      if (!lock.wait_for(warmer_cv_, kDemandSettle, changed)) break;
    }
    if (warmer_stop_) return;
    demand_changed_ = false;
    const int queued = demand_;
    lock.unlock();
    {
      MutexLock pool_lock(run_mu_);
      pool_.set_demand(queued);
      KF_LOG_DEBUG("device={} {} jobs queued: warm target {} ({} waiting, {} warming)",
                   options_.device, queued, pool_.target(), pool_.size(), pool_.warming());
    }
    replenish();  // every missing child at once; returns once they are adopted
    lock.lock();
  }
}

void PythonWorker::stop_warmer() {
  {
    MutexLock lock(warmer_mu_);
    warmer_stop_ = true;
  }
  warmer_cv_.notify_all();
  if (warmer_.joinable()) warmer_.join();
}

WorkerOutcome PythonWorker::run(const WorkerJob& job, CancelToken& cancel,
                                const ProgressSink& progress) {
  // Pipelined stages: the job is admitted with a shared ticket before a child gets it (its
  // candidate's code runs at import); its judge asks for the exclusive grant to time.
  std::unique_ptr<DeviceGate::Ticket> admitted;
  double admission_wait_ms = 0;
  if (options_.gate) {
    if (progress) progress("starting", "waiting for the device", 0.01);
    const auto asked = Clock::now();
    auto granted = options_.gate->acquire(job.job_id, cancel.wait_fd(), Clock::now() + job.timeout,
                                          DeviceGate::Mode::kShared);
    if (!granted.is_ok()) {
      if (granted.status().code() == ErrorCode::kCancelled) {
        return {WorkerOutcome::Kind::kCancelled, Json(), "cancelled"};
      }
      return {WorkerOutcome::Kind::kWorkerFailure, Json(),
              "the device " + options_.device + " was not free: " + granted.status().message()};
    }
    admitted = std::move(granted).value();
    admission_wait_ms = std::chrono::duration<double, std::milli>(Clock::now() - asked).count();
  }
  MutexLock run_lock(run_mu_);
  book_.set_state(WorkerState::kBusy);
  if (progress) progress("starting", "waiting for a warm worker process", 0.02);
  const auto taking = Clock::now();
  const std::string key = reuse_key(job);
  std::shared_ptr<ChildChannel> active = key.empty() ? nullptr : kept_.take(key);
  if (!active) {
    if (options_.gate) {
      // A child already warming is nearer ready than one this job would start now.
      run_lock.wait_until(adopted_, Clock::now() + job.timeout, [this]() REQUIRES(run_mu_) {
        return pool_.size() > 0 || pool_.warming() == 0;
      });
    }
    auto child = pool_.take();
    if (!child.is_ok()) {
      book_.set_state(alive() ? WorkerState::kReady : WorkerState::kFailed,
                      child.status().message());
      return {WorkerOutcome::Kind::kWorkerFailure, Json(),
              "the Python worker for " + options_.device +
                  " is unavailable: " + child.status().message()};
    }
    active = std::move(child).value();
  }
  const double take_ms = std::chrono::duration<double, std::milli>(Clock::now() - taking).count();
  const int jobs_before = static_cast<int>(message_int(active->ready_message, "jobs_done"));
  sandbox::JobCgroup* cgroup = active->sandbox ? active->sandbox->cgroup.get() : nullptr;
  if (jobs_before == 0 && cgroup != nullptr) {
    // Its processes when first taken (the judge, its candidate and spares, the cpu's echo):
    // each later job of the judge has one candidate fewer.
    active->first_processes = cgroup->members().size();
  }
  active->keep_max_processes =
      active->first_processes -
      std::min<size_t>(active->first_processes, static_cast<size_t>(jobs_before));
  // Keep the judge for another job of this key while it has a spare candidate left and
  // another job of its reference may come (not after a batch's last: its spare would warm up
  // for nothing, beside the jobs that need the device).
  const bool keep = !key.empty() && job.reference_follows &&
                    message_int(active->ready_message, "spares_left") > 0 &&
                    message_int(active->ready_message, "candidate_pid") > 1;

  Json message = job_message_for(job, *active->sandbox,
                                 options_.sandbox->jailing() ? options_.sandbox->judge_cache_dir()
                                                             : options_.data_dir / "cache");
  // A batch's reference file, staged into the judge's own directory (reference_staging.h).
  StagedReference staged_reference = stage_reference(message["job"], active->sandbox->judge_dir);

  if (keep) message["job"]["keep_judge"] = true;
  if (options_.gate) {
    message["job"]["exclusive_timing"] = true;
    run_lock.unlock();  // other jobs take their children while this one runs
  } else {
    // Replace the child just taken while this job runs: the next job then starts at once.
    // The replacement warms up registered with the timing gate, which the judge takes
    // alone around its timed regions (the replacement is stopped meanwhile).
    (void)pool_.top_up();
    if (options_.timing_gate) message["job"]["exclusive_timing"] = true;
  }

  DeviceGate* gate = device_gate();
  if (keep && gate != nullptr) {
    // The judge wakes its next candidate as the job starts; it warms up during the job,
    // stopped while any timed region runs (this job's own too).
    active->spare_warming = ChildChannel::warm_process_beside(
        *gate, static_cast<pid_t>(message_int(active->ready_message, "next_candidate_pid")));
    if (active->spare_warming) kept_.count_gate_registration();
  }
  ChildJobEnd end = run_job_on_child(*active, message, job.timeout, cancel, progress, *this,
                                     options_.limits, gate, std::move(admitted),
                                     keep ? AfterResult::kKeepChild : AfterResult::kDeferTeardown);
  staged_reference.collect();
  end.device_wait_ms += admission_wait_ms;
  Json worker_info = {{"type", "python"},
                      {"pid", active->pid},
                      {"warmup_ms", active->ready_message.value("warmup_ms", 0.0)}};
  worker_info["sandbox"] = active->ready_message.value("sandbox", Json::object());
  // How many jobs this judge served before this one (0: a fresh one).
  worker_info["judge_jobs_before"] = jobs_before;
  Json result = assemble_result(message["job"], end, job.timeout, worker_info);
  const bool zygote_died = !alive() && end.kind == ChildJobEnd::Kind::kCrashed;
  const auto released = Clock::now();
  if (end.kept) {
    // The answer goes out while the job's candidate ends; the device ticket goes back once
    // it is gone, and the judge waits for the next job of its key.
    teardowns_.add({[this, kept = active, key] { kept_.park(kept, key, device_gate()); },
                    teardown_ticket(std::move(end.held), gate, job.job_id)});
  } else if (end.teardown_deferred) {
    // The answer goes out while the job's processes end; its device ticket goes back after.
    std::shared_ptr<ChildChannel> dying(std::move(active));
    teardowns_.add(
        {[dying] { dying->kill_all(); }, teardown_ticket(std::move(end.held), gate, job.job_id)});
  }
  active.reset();  // kills what is left of the job and removes its scratch directory
  result["process"]["take_ms"] = take_ms;
  result["process"]["release_ms"] =
      std::chrono::duration<double, std::milli>(Clock::now() - released).count();
  if (zygote_died) {
    // The zygote (the parent of every child) died while the job ran, taking the child with
    // it: that is the worker's failure, not the kernel's crash.
    book_.set_state(WorkerState::kFailed, "the zygote exited during a job");
    return {WorkerOutcome::Kind::kWorkerFailure, Json(),
            "the Python worker for " + options_.device +
                " stopped while the job ran (not the kernel's fault); submit it again"};
  }
  book_.note_job_end(end.kind, alive() ? WorkerState::kReady : WorkerState::kFailed);
  return outcome_of(end, std::move(result));
}

DeviceGate* PythonWorker::device_gate() const {
  return options_.gate ? options_.gate.get() : options_.timing_gate.get();
}

std::string PythonWorker::reuse_key(const WorkerJob& job) const {
  // Needs the jail (a candidate is pid 1 of its pid namespace: killing it ends all it
  // started) and cgroups (what a job left behind is counted, and killed with the judge).
  if (options_.jobs_per_judge <= 1 || !options_.sandbox->jailing() ||
      !options_.sandbox->has_cgroups()) {
    return "";
  }
  const Json* reference = job.spec.contains("reference") ? &job.spec["reference"] : nullptr;
  // The submitter as it is (the boundary that matters), the reference by its hash.
  return job.submitter + '\n' + options_.device + '\n' +
         sha256_hex(reference != nullptr ? reference->dump() : std::string("null"));
}

Json PythonWorker::status() const {
  Json s = {{"type", "python"}, {"device", options_.device}};
  book_.fill_status(s);
  s["warm_children_target"] = options_.warm_children;
  s["jobs_per_judge"] = options_.jobs_per_judge;
  kept_.fill_status(s);
  s["teardowns"] = teardowns_.status();
  if (options_.gate) {
    s["warm_children_max"] = std::max(options_.warm_children, options_.max_warm_children);
    s["most_children_warming"] = most_children_warming();
  }
  MutexLock lock(mu_);
  if (zygote_pid_ > 0) s["zygote_pid"] = zygote_pid_;
  if (hello_.contains("versions")) s["versions"] = hello_["versions"];
  if (hello_.contains("startup_ms")) s["zygote_startup_ms"] = hello_["startup_ms"];
  return s;
}

void PythonWorker::shutdown() {
  stop_warmer();       // before the pool and the zygote go
  teardowns_.drain();  // parks the last kept judges, which kept_.clear() then ends
  kept_.clear();
  {
    MutexLock run_lock(run_mu_);  // no job runs any more; the pool is emptied under it
    stop_zygote();
  }
  book_.set_state(WorkerState::kStopped);
}

}  // namespace kforge::workers
