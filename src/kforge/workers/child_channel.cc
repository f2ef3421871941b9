#include "kforge/workers/child_channel.h"

#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <csignal>
#include <vector>

#include "kforge/common/log.h"

namespace kforge::workers {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

constexpr milliseconds kMemoryCheckPeriod{200};
constexpr milliseconds kDrainGrace{300};
constexpr milliseconds kExitStatusWait{2000};

enum class ReadResult { kData, kWouldBlock, kEof };

// Reads what is available from a non-blocking descriptor into `sink`, until `enough()` says
// the sink must be emptied first (its caller polls again for the rest).
template <typename Sink, typename Enough>
ReadResult read_available(int fd, Sink&& sink, Enough&& enough) {
  char buf[65536];
  bool any = false;
  while (!enough()) {
    ssize_t n = ::read(fd, buf, sizeof(buf));
    if (n > 0) {
      sink(std::string_view(buf, static_cast<size_t>(n)));
      any = true;
      continue;
    }
    if (n == 0) return ReadResult::kEof;
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK)
      return any ? ReadResult::kData : ReadResult::kWouldBlock;
    return ReadResult::kEof;  // treat read errors as a closed stream
  }
  return ReadResult::kData;
}

template <typename Sink>
ReadResult read_available(int fd, Sink&& sink) {
  return read_available(fd, std::forward<Sink>(sink), [] { return false; });
}

// Reads a child's protocol frames: never more than its decoder may hold (FrameDecoder).
ReadResult read_frames(int fd, worker_protocol::FrameDecoder& decoder) {
  return read_available(
      fd, [&decoder](std::string_view s) { decoder.append(s); },
      [&decoder] { return decoder.saturated(); });
}

// A child's `ready` (the first, or a kept judge's next): its protocol version checked, then
// the child marked ready with it.
Status accept_ready(ChildChannel& child, const Json& ready) {
  KF_RETURN_IF_ERROR(worker_protocol::check_protocol_version(ready));
  child.ready = true;
  child.ready_message = ready;
  return Status::ok();
}

int poll_timeout_ms(Clock::time_point until) {
  auto left = std::chrono::duration_cast<milliseconds>(until - Clock::now()).count();
  if (left < 0) return 0;
  return static_cast<int>(std::min<int64_t>(left, 1000));
}

double default_fraction(const std::string& phase) {
  if (phase == "loading") return 0.1;
  if (phase == "correctness") return 0.3;
  if (phase == "timing_reference") return 0.6;
  if (phase == "timing_candidate") return 0.8;
  if (phase == "kernel_activity") return 0.9;
  return 0.05;
}

// Waits (bounded) for the exit status of `pid` from the exit source.
std::optional<worker_protocol::ExitStatus> await_exit(ExitSource& exits, pid_t pid,
                                                      milliseconds limit) {
  auto deadline = Clock::now() + limit;
  while (true) {
    if (auto s = exits.exit_of(pid)) return s;
    if (!exits.alive() || Clock::now() >= deadline) return std::nullopt;
    int fd = exits.poll_fd();
    if (fd < 0) {
      ::usleep(5000);
      continue;
    }
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, poll_timeout_ms(deadline)) > 0) exits.on_readable();
  }
}

}  // namespace

ChildChannel::~ChildChannel() = default;

Status ChildChannel::send_sandbox() {
  if (!sandbox) return internal_error("send_sandbox without a prepared sandbox");
  return worker_protocol::write_all(proto.get(), worker_protocol::encode_frame(sandbox->message),
                                    Clock::now() + std::chrono::seconds(10));
}

void ChildChannel::kill_all() {
  if (sandbox && sandbox->cgroup) {
    if (!sandbox->cgroup->kill_all(std::chrono::milliseconds(2000))) {
      KF_LOG_WARN("cgroup {} did not empty after SIGKILL", sandbox->cgroup->name());
    }
  }
  worker_protocol::kill_process_group(pid);
}

void ChildChannel::start_kill() {
  if (sandbox && sandbox->cgroup) (void)sandbox->cgroup->kill_all(std::chrono::milliseconds(0));
  worker_protocol::kill_process_group(pid);
}

void ChildChannel::signal_all(int sig) {
  if (sandbox && sandbox->cgroup) sandbox->cgroup->signal_all(sig);
  if (pid > 0) ::kill(-pid, sig);
}

std::unique_ptr<DeviceGate::Warming> ChildChannel::warm_beside(DeviceGate& gate) {
  return gate.warming([this](bool pause) { signal_all(pause ? SIGSTOP : SIGCONT); });
}

std::unique_ptr<DeviceGate::Warming> ChildChannel::warm_process_beside(DeviceGate& gate,
                                                                       pid_t pid) {
  if (pid <= 1) return nullptr;
  auto fd = std::make_shared<worker_protocol::UniqueFd>(
      static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
  if (!fd->valid()) return nullptr;
  return gate.warming([fd](bool pause) {
    (void)::syscall(SYS_pidfd_send_signal, fd->get(), pause ? SIGSTOP : SIGCONT, nullptr, 0);
  });
}

StatusOr<ChildPipes> ChildPipes::create() {
  ChildPipes p;
  std::array<int, 2> proto{};
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, proto.data()) != 0) {
    return errno_error("socketpair", errno);
  }
  p.proto_ours = worker_protocol::UniqueFd(proto[0]);
  p.proto_theirs = worker_protocol::UniqueFd(proto[1]);
  std::array<int, 2> out{};
  if (::pipe2(out.data(), O_CLOEXEC) != 0) return errno_error("pipe2", errno);
  p.out_r = worker_protocol::UniqueFd(out[0]);
  p.out_w = worker_protocol::UniqueFd(out[1]);
  std::array<int, 2> err{};
  if (::pipe2(err.data(), O_CLOEXEC) != 0) return errno_error("pipe2", errno);
  p.err_r = worker_protocol::UniqueFd(err[0]);
  p.err_w = worker_protocol::UniqueFd(err[1]);
  return p;
}

Status ChildPipes::attach(ChildChannel& channel) {
  proto_theirs.reset();
  out_w.reset();
  err_w.reset();
  for (const worker_protocol::UniqueFd* fd : {&proto_ours, &out_r, &err_r}) {
    int flags = ::fcntl(fd->get(), F_GETFL);
    if (flags < 0 || ::fcntl(fd->get(), F_SETFL, flags | O_NONBLOCK) < 0) {
      return errno_error("fcntl(O_NONBLOCK)", errno);
    }
  }
  channel.proto = std::move(proto_ours);
  channel.out = std::move(out_r);
  channel.err = std::move(err_r);
  return Status::ok();
}

Status wait_child_ready(ChildChannel& child, ExitSource& exits, Clock::time_point deadline) {
  worker_protocol::OutputCapture noise(size_t{16} * 1024);
  bool out_open = true;
  bool err_open = true;
  while (!child.ready) {
    std::vector<pollfd> fds = {{child.proto.get(), POLLIN, 0}};
    if (out_open) fds.push_back({child.out.get(), POLLIN, 0});
    if (err_open) fds.push_back({child.err.get(), POLLIN, 0});
    if (exits.poll_fd() >= 0) fds.push_back({exits.poll_fd(), POLLIN, 0});
    if (Clock::now() >= deadline) {
      return {ErrorCode::kDeadlineExceeded,
              "worker child did not become ready in time; stderr: " + noise.text()};
    }
    int n = ::poll(fds.data(), fds.size(), poll_timeout_ms(deadline));
    if (n < 0 && errno != EINTR) return errno_error("poll", errno);
    for (const auto& p : fds) {
      if (p.revents == 0) continue;
      if (p.fd == exits.poll_fd()) {
        exits.on_readable();
      } else if (p.fd == child.out.get() || p.fd == child.err.get()) {
        auto r = read_available(p.fd, [&](std::string_view s) { noise.append(s); });
        if (r == ReadResult::kEof) (p.fd == child.out.get() ? out_open : err_open) = false;
      } else if (p.fd == child.proto.get()) {
        auto r = read_frames(p.fd, child.decoder);
        while (auto msg = child.decoder.next()) {
          if (!msg->is_ok()) return msg->status();
          const Json& m = msg->value();
          if (m.value("type", "") == "ready") {
            KF_RETURN_IF_ERROR(accept_ready(child, m));
          } else if (m.value("type", "") == "sandbox_failed") {
            return unavailable("the worker process could not enter its sandbox: " +
                               m.value("error", std::string("(no reason given)")));
          }
        }
        if (r == ReadResult::kEof && !child.ready) {
          // Collect what it said on its way out.
          read_available(child.err.get(), [&](std::string_view s) { noise.append(s); });
          auto exit = await_exit(exits, child.pid, milliseconds(500));
          return unavailable("worker child " + describe_exit(exit) +
                             " before it was ready; its output: " + noise.text());
        }
      }
    }
  }
  return Status::ok();
}

ChildMessage next_message_of(ChildChannel& child, std::string_view type) {
  // Output between jobs belongs to no job (run_job_on_child drops it too); read so the
  // pipes never fill.
  for (int fd : {child.out.get(), child.err.get()})
    read_available(fd, [](std::string_view) {});
  bool eof = false;
  for (int round = 0; round < 2; ++round) {
    while (auto msg = child.decoder.next()) {
      if (!msg->is_ok()) return ChildMessage::kGone;
      const Json& m = msg->value();
      const std::string kind = m.value("type", "");
      if (kind == "sandbox_failed") return ChildMessage::kGone;
      if (kind != type) continue;  // a progress message or the like: nothing is waiting for it
      if (kind == "ready" && !accept_ready(child, m)) return ChildMessage::kGone;
      return ChildMessage::kArrived;
    }
    if (round == 0) eof = read_frames(child.proto.get(), child.decoder) == ReadResult::kEof;
  }
  return eof ? ChildMessage::kGone : ChildMessage::kNotYet;
}

bool await_message_of(ChildChannel& child, std::string_view type, Clock::time_point deadline) {
  for (;;) {
    switch (next_message_of(child, type)) {
      case ChildMessage::kArrived:
        return true;
      case ChildMessage::kGone:
        return false;
      case ChildMessage::kNotYet:
        break;
    }
    if (Clock::now() >= deadline) return false;
    std::array<pollfd, 3> fds = {pollfd{child.proto.get(), POLLIN, 0},
                                 pollfd{child.out.get(), POLLIN, 0},
                                 pollfd{child.err.get(), POLLIN, 0}};
    if (::poll(fds.data(), fds.size(), poll_timeout_ms(deadline)) < 0 && errno != EINTR) {
      return false;
    }
  }
}

ChildJobEnd run_job_on_child(ChildChannel& child, const Json& job_message, milliseconds timeout,
                             CancelToken& cancel, const ProgressSink& progress, ExitSource& exits,
                             const ChildLimits& limits, DeviceGate* gate,
                             std::unique_ptr<DeviceGate::Ticket> admitted,
                             AfterResult after_result) {
  ChildJobEnd end;
  end.stdout_capture = worker_protocol::OutputCapture(limits.output_cap_bytes);
  end.stderr_capture = worker_protocol::OutputCapture(limits.output_cap_bytes);
  const auto start = Clock::now();
  const auto deadline = start + timeout;

  // Anything printed while the child waited belongs to its warm-up, not to this job.
  read_available(child.out.get(), [](std::string_view) {});
  read_available(child.err.get(), [](std::string_view) {});

  bool got_result = false;
  bool proto_open = true;
  bool out_open = true;
  bool err_open = true;
  std::optional<ChildJobEnd::Kind> stop_reason;

  Status sent =
      worker_protocol::write_all(child.proto.get(), worker_protocol::encode_frame(job_message),
                                 std::min(deadline, start + std::chrono::seconds(60)));
  if (!sent) proto_open = false;  // the child is gone; the exit status tells why

  // The device grant (docs/worker-protocol.md "Device grant"): asked for with
  // `device_request`, answered with `device_grant` once this job's ticket is first in line.
  // Without a gate the job already has the device to itself (one job per device at a time).
  // The tickets are given back after the child is killed below, so a job that crashes, times
  // out or is cancelled never keeps the device, and its GPU work has stopped first.
  // A job admitted with a shared ticket has run its own code already: while it waits for
  // its exclusive grant it is stopped, so it launches nothing beside another timed region.
  const bool stop_while_waiting = admitted != nullptr;
  std::unique_ptr<DeviceGate::Ticket> ticket;
  bool grant_sent = false;
  bool stopped = false;
  std::optional<Clock::time_point> requested_at;
  auto wall_ms = [] {
    return std::chrono::duration<double, std::milli>(
               std::chrono::system_clock::now().time_since_epoch())
        .count();
  };
  auto send_grant = [&] {
    grant_sent = true;
    if (stopped) {
      child.signal_all(SIGCONT);
      stopped = false;
    }
    end.device_wait_ms +=
        std::chrono::duration<double, std::milli>(Clock::now() - *requested_at).count();
    if (gate != nullptr) end.device_grants.push_back(Json{{"granted_at_ms", wall_ms()}});
    if (Status g = worker_protocol::write_all(
            child.proto.get(), worker_protocol::encode_frame(Json{{"type", "device_grant"}}),
            deadline);
        !g) {
      proto_open = false;
    }
  };
  auto note_release = [&] {
    if (gate != nullptr && grant_sent && !end.device_grants.empty()) {
      end.device_grants.back()["released_at_ms"] = wall_ms();
    }
  };

  auto next_memory_check = start + kMemoryCheckPeriod;
  sandbox::JobCgroup* cgroup = child.sandbox ? child.sandbox->cgroup.get() : nullptr;
  const int64_t oom_before = cgroup != nullptr ? cgroup->stats().oom_kills : 0;
  while (proto_open && !got_result && !stop_reason) {
    std::vector<pollfd> fds = {{child.proto.get(), POLLIN, 0}, {cancel.wait_fd(), POLLIN, 0}};
    if (out_open) fds.push_back({child.out.get(), POLLIN, 0});
    if (err_open) fds.push_back({child.err.get(), POLLIN, 0});
    if (exits.poll_fd() >= 0) fds.push_back({exits.poll_fd(), POLLIN, 0});
    if (ticket && !grant_sent) fds.push_back({ticket->fd(), POLLIN, 0});
    auto wake = std::min(deadline, next_memory_check);
    int n = ::poll(fds.data(), fds.size(), poll_timeout_ms(wake));
    if (n < 0 && errno != EINTR) {
      end.detail = "poll failed";
      stop_reason = ChildJobEnd::Kind::kProtocolError;
      break;
    }
    for (const auto& p : fds) {
      if (p.revents == 0) continue;
      if (p.fd == child.out.get()) {
        if (read_available(p.fd, [&](std::string_view s) { end.stdout_capture.append(s); }) ==
            ReadResult::kEof) {
          out_open = false;
        }
      } else if (p.fd == child.err.get()) {
        if (read_available(p.fd, [&](std::string_view s) { end.stderr_capture.append(s); }) ==
            ReadResult::kEof) {
          err_open = false;
        }
      } else if (p.fd == exits.poll_fd()) {
        exits.on_readable();
      } else if (p.fd == cancel.wait_fd()) {
        stop_reason = ChildJobEnd::Kind::kCancelled;
      } else if (ticket && p.fd == ticket->fd()) {
        if (!grant_sent) send_grant();
      } else if (p.fd == child.proto.get()) {
        auto r = read_frames(p.fd, child.decoder);
        while (auto msg = child.decoder.next()) {
          if (!msg->is_ok()) {
            end.detail = msg->status().message();
            stop_reason = ChildJobEnd::Kind::kProtocolError;
            break;
          }
          const Json& m = msg->value();
          const std::string type = m.value("type", "");
          if (type == "progress") {
            end.phase = m.value("phase", end.phase);
            if (m.contains("partial") && m["partial"].is_object()) end.partial = m["partial"];
            if (progress) {
              double fraction = m.contains("fraction") && m["fraction"].is_number()
                                    ? m["fraction"].get<double>()
                                    : default_fraction(end.phase);
              progress(end.phase, m.value("message", ""), fraction);
            }
          } else if (type == "device_request") {
            if (m.contains("mode") && m["mode"] != "exclusive") {
              end.detail =
                  "device_request.mode: must be \"exclusive\" (or absent), got " + m["mode"].dump();
              stop_reason = ChildJobEnd::Kind::kProtocolError;
              break;
            }
            if (requested_at) continue;  // asked already (and not released): changes nothing
            requested_at = Clock::now();
            if (gate == nullptr) {
              send_grant();
              continue;
            }
            // The job's shared admission goes back first: an exclusive request waits for
            // every shared holder, this job's own included.
            admitted.reset();
            const Json* spec = job_message.contains("job") ? &job_message["job"] : nullptr;
            auto t = gate->request(spec != nullptr && spec->is_object()
                                       ? spec->value("job_id", std::string())
                                       : std::string(),
                                   DeviceGate::Mode::kExclusive);
            if (!t.is_ok()) {
              end.detail = "device grant: " + t.status().message();
              stop_reason = ChildJobEnd::Kind::kProtocolError;
              break;
            }
            ticket = std::move(t).value();
            if (ticket->granted()) {
              send_grant();
            } else if (stop_while_waiting) {
              child.signal_all(SIGSTOP);
              stopped = true;
            }
          } else if (type == "device_release") {
            if (grant_sent) {
              note_release();
              ticket.reset();
              grant_sent = false;
              requested_at.reset();  // it may ask again for a later timed region
            }
          } else if (type == "result") {
            if (m.contains("result") && m["result"].is_object()) {
              end.result = m["result"];
              got_result = true;
            } else {
              end.detail = "worker sent a result message without a result object";
              stop_reason = ChildJobEnd::Kind::kProtocolError;
            }
            break;
          }
        }
        if (r == ReadResult::kEof && !got_result) proto_open = false;
      }
    }
    auto now = Clock::now();
    if (!got_result && !stop_reason && now >= deadline) stop_reason = ChildJobEnd::Kind::kTimeout;
    if (now >= next_memory_check) {
      if (cgroup != nullptr) {
        auto stats = cgroup->stats();
        end.peak_rss_bytes = std::max(end.peak_rss_bytes, stats.memory_peak_bytes);
        if (stats.oom_kills > oom_before && !got_result) {
          stop_reason = ChildJobEnd::Kind::kMemoryLimit;
        }
      } else {
        int64_t pss = worker_protocol::process_group_pss_bytes(child.pid);
        end.peak_rss_bytes = std::max(end.peak_rss_bytes, pss);
        if (limits.memory_limit_bytes > 0 && pss > limits.memory_limit_bytes && !got_result) {
          stop_reason = ChildJobEnd::Kind::kMemoryLimit;
        }
      }
      next_memory_check = now + kMemoryCheckPeriod;
    }
  }

  // One last sample, so short jobs (under one sampling period) report their memory too.
  if (cgroup != nullptr) {
    auto stats = cgroup->stats();
    end.peak_rss_bytes = std::max(end.peak_rss_bytes, stats.memory_peak_bytes);
    end.cgroup_oom_kills = stats.oom_kills - oom_before;
    end.pids_limit_hits = stats.pids_max_hits;
    if (end.cgroup_oom_kills > 0 && !got_result && !stop_reason) {
      stop_reason = ChildJobEnd::Kind::kMemoryLimit;
    }
  } else {
    end.peak_rss_bytes =
        std::max(end.peak_rss_bytes, worker_protocol::process_group_pss_bytes(child.pid));
  }
  // The child is done with (or failed) its one job: nothing it started may outlive it, even
  // a process that left the child's session (the cgroup holds every descendant).
  const auto teardown_start = Clock::now();
  // A job that sent its result may end after its answer (kDeferTeardown): its processes are
  // only sent SIGKILL here. A kept one (kKeepChild) is not killed at all: the caller ends its
  // candidate and parks the judge. Either way the caller holds what the job held until then.
  const bool kept = after_result == AfterResult::kKeepChild && got_result && cgroup != nullptr &&
                    cgroup->members().size() <= child.keep_max_processes;
  const bool deferred = after_result == AfterResult::kDeferTeardown && got_result;
  const bool handed_over = deferred || kept;
  if (deferred) {
    child.start_kill();
  } else if (!kept) {
    child.kill_all();
  }
  if (stopped) child.signal_all(SIGCONT);  // nothing is left to continue; never leave it stopped
  note_release();
  if (handed_over) {
    end.held = ticket && ticket->granted() ? std::move(ticket) : std::move(admitted);
  }
  ticket.reset();  // the device goes to the next job only once this one's processes are gone
  admitted.reset();
  if (handed_over) {
    // What the processes wrote before their result is in the pipes already.
    for (int fd : {child.out.get(), child.err.get()}) {
      auto& capture = fd == child.out.get() ? end.stdout_capture : end.stderr_capture;
      read_available(fd, [&](std::string_view s) { capture.append(s); });
    }
  } else {
    auto drain_until = Clock::now() + kDrainGrace;
    while ((out_open || err_open) && Clock::now() < drain_until) {
      std::vector<pollfd> fds;
      if (out_open) fds.push_back({child.out.get(), POLLIN, 0});
      if (err_open) fds.push_back({child.err.get(), POLLIN, 0});
      if (::poll(fds.data(), fds.size(), poll_timeout_ms(drain_until)) <= 0) break;
      for (const auto& p : fds) {
        if (p.revents == 0) continue;
        auto& capture = p.fd == child.out.get() ? end.stdout_capture : end.stderr_capture;
        if (read_available(p.fd, [&](std::string_view s) { capture.append(s); }) ==
            ReadResult::kEof) {
          (p.fd == child.out.get() ? out_open : err_open) = false;
        }
      }
    }
    end.teardown_ms =
        std::chrono::duration<double, std::milli>(Clock::now() - teardown_start).count();
  }
  end.teardown_deferred = deferred;
  end.kept = kept;

  if (got_result) {
    end.kind = ChildJobEnd::Kind::kResult;
    end.exit = exits.exit_of(child.pid);
  } else if (stop_reason) {
    end.kind = *stop_reason;
    end.exit = await_exit(exits, child.pid, milliseconds(500));
  } else {
    end.kind = ChildJobEnd::Kind::kCrashed;
    end.exit = await_exit(exits, child.pid, kExitStatusWait);
  }
  end.wall_ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  return end;
}

}  // namespace kforge::workers
