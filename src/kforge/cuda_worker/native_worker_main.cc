#include "kforge/cuda_worker/native_worker_main.h"

#include <poll.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <iostream>

#include "kforge/common/files.h"
#include "kforge/cuda_worker/cuda_job.h"
#include "kforge/sandbox/jail.h"
#include "kforge/worker_protocol/protocol.h"

namespace kforge::cuda_worker {
namespace {

using Clock = std::chrono::steady_clock;

// Blocking framed JSON over the protocol socket.
class Channel {
 public:
  explicit Channel(int fd) : fd_(fd) {}

  Status send(const Json& message) {
    return worker_protocol::write_all(fd_, worker_protocol::encode_frame(message),
                                      Clock::now() + std::chrono::hours(1));
  }

  // The next message; nullopt at EOF.
  StatusOr<std::optional<Json>> recv() {
    while (true) {
      if (auto msg = decoder_.next()) {
        if (!msg->is_ok()) return msg->status();
        return std::optional<Json>(std::move(*msg).value());
      }
      char buf[65536];
      ssize_t n = ::read(fd_, buf, sizeof(buf));
      if (n == 0) return std::optional<Json>();
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN) {
          pollfd p{fd_, POLLIN, 0};
          ::poll(&p, 1, 1000);
          continue;
        }
        return errno_error("read protocol socket", errno);
      }
      decoder_.append(std::string_view(buf, static_cast<size_t>(n)));
    }
  }

 private:
  int fd_;
  worker_protocol::FrameDecoder decoder_;
};

Json sandbox_report(const Json& jail) {
  int pdeath = 0;
  prctl(PR_GET_PDEATHSIG, &pdeath);
  Json limits = Json::object();
  for (auto [name, resource] : {std::pair{"core", RLIMIT_CORE}, std::pair{"nofile", RLIMIT_NOFILE},
                                std::pair{"fsize", RLIMIT_FSIZE}, std::pair{"as", RLIMIT_AS}}) {
    rlimit rl{};
    if (getrlimit(resource, &rl) == 0) {
      limits[name] = rl.rlim_cur == RLIM_INFINITY ? Json(nullptr) : Json(rl.rlim_cur);
    }
  }
  // Kernels run on the GPU only: no user code runs on the host in this process.
  return {{"setsid", getsid(0) == getpid()},
          {"parent_death_signal", pdeath != 0},
          {"user_host_code", false},
          {"limits", limits},
          {"jail", jail}};
}

}  // namespace

int run_worker_process(const WorkerRuntimeOptions& options, int protocol_fd) {
  const auto start = Clock::now();
  std::signal(SIGPIPE, SIG_IGN);
  Channel channel(protocol_fd);
  // Protocol 2: the supervisor's `sandbox` message comes first; the jail is entered before
  // NVRTC or CUDA is touched, so compiling and running a job's kernel happen inside it.
  Json jail_report = {{"jailed", false}};
  while (true) {
    auto msg = channel.recv();
    if (!msg.is_ok() || !msg->has_value()) return msg.is_ok() ? 0 : 1;
    const Json& m = **msg;
    if (m.value("type", "") == "shutdown") return 0;
    if (m.value("type", "") != "sandbox") continue;
    if (m.value("enabled", false) && m.contains("jail")) {
      auto spec = sandbox::JailSpec::from_json(m["jail"]);
      auto entered = spec.is_ok() ? sandbox::enter_jail(*spec) : StatusOr<Json>(spec.status());
      if (!entered.is_ok()) {
        (void)channel.send({{"type", "sandbox_failed"}, {"error", entered.status().to_string()}});
        return 3;
      }
      jail_report = *entered;
      jail_report["jailed"] = true;
    } else {
      jail_report["why_not"] = m.value("why_not", "");
    }
    break;
  }
  auto runtime = WorkerRuntime::start(options);
  Json ready = {
      {"type", "ready"},
      {"protocol",
       {{"major", worker_protocol::kProtocolMajor}, {"minor", worker_protocol::kProtocolMinor}}},
      {"pid", getpid()},
      {"device", runtime->describe_device()},
      {"warmup_ms", std::chrono::duration<double, std::milli>(Clock::now() - start).count()},
      {"warmup_steps_ms", runtime->warmup_steps_ms()},
      {"warmup_errors", runtime->warmup_errors()},
      {"sandbox", sandbox_report(jail_report)}};
  if (Status s = channel.send(ready); !s) {
    std::cerr << "kforge worker cuda: cannot send ready: " << s.message() << '\n';
    return 1;
  }
  Json job;
  while (true) {
    auto msg = channel.recv();
    if (!msg.is_ok()) {
      std::cerr << "kforge worker cuda: protocol failure: " << msg.status().message() << '\n';
      return 1;
    }
    if (!msg->has_value()) return 0;  // the supervisor hung up before a job
    const Json& m = **msg;
    const std::string type = m.value("type", "");
    if (type == "shutdown") return 0;
    if (type == "job") {
      job = m.value("job", Json::object());
      break;
    }
  }
  if (job.contains("scratch_dir") && job["scratch_dir"].is_string()) {
    const std::string dir = job["scratch_dir"].get<std::string>();
    // The supervisor's SandboxPolicy made it (its one owner); a missing one is its bug.
    if (!dir.empty() && ::chdir(dir.c_str()) != 0) {
      std::cerr << "kforge worker cuda: cannot enter " << dir << '\n';
    }
  }
  auto progress = [&](const std::string& phase, const std::string& message, const Json& partial) {
    Json p = {{"type", "progress"}, {"phase", phase}, {"message", message}, {"partial", partial}};
    (void)channel.send(p);
  };
  // Pipelined stages: the supervisor asks (`device_grant` in the spec) that the job wait
  // for the device once it has compiled (docs/worker-protocol.md "Device grant").
  AcquireDeviceFn acquire;
  if (job.value("device_grant", false)) {
    acquire = [&channel]() -> Status {
      KF_RETURN_IF_ERROR(channel.send({{"type", "device_request"}}));
      while (true) {
        auto msg = channel.recv();
        if (!msg.is_ok()) return msg.status();
        if (!msg->has_value()) return unavailable("the supervisor hung up before the grant");
        const std::string type = (**msg).value("type", "");
        if (type == "device_grant") return Status::ok();
        if (type == "shutdown") return unavailable("shut down before the grant");
      }
    };
  }
  JobResult result = run_cuda_job(job, *runtime, progress, acquire);
  std::fflush(stdout);
  std::fflush(stderr);
  Json message = {
      {"type", "result"}, {"job_id", job.value("job_id", "")}, {"result", result.to_json()}};
  if (Status s = channel.send(message); !s) {
    std::cerr << "kforge worker cuda: cannot send the result: " << s.message() << '\n';
    return 1;
  }
  // The supervisor kills the process group once it has the result; a context that saw a
  // kernel fault may be slow to tear down, so leave without destructors.
  std::_Exit(0);
}

StatusOr<Json> run_job_file(const WorkerRuntimeOptions& options,
                            const std::filesystem::path& spec_path) {
  KF_ASSIGN_OR_RETURN(std::string text, read_file(spec_path));
  KF_ASSIGN_OR_RETURN(Json spec, parse_json(text));
  auto runtime = WorkerRuntime::start(options);
  auto progress = [](const std::string& phase, const std::string& message, const Json&) {
    std::cerr << "[" << phase << "] " << message << '\n';
  };
  JobResult result = run_cuda_job(spec, *runtime, progress);
  Json out = result.to_json();
  out["warmup_steps_ms"] = runtime->warmup_steps_ms();
  out["warmup_errors"] = runtime->warmup_errors();
  return out;
}

Status run_replay_file(const WorkerRuntimeOptions& options, const std::filesystem::path& spec_path,
                       const std::string& role, int repeat) {
  KF_ASSIGN_OR_RETURN(std::string text, read_file(spec_path));
  KF_ASSIGN_OR_RETURN(Json spec, parse_json(text));
  WorkerRuntimeOptions replay = options;
  replay.profile_target = true;
  auto runtime = WorkerRuntime::start(replay);
  return replay_cuda_job(spec, *runtime, role, repeat);
}

}  // namespace kforge::cuda_worker
