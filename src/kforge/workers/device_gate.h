// The device grant of pipelined stages (issue 13; docs/worker-protocol.md "Device grant"):
// several jobs of one device may run their CPU phases (compile, import, input generation)
// at once, but only the job holding the device's grant runs GPU work. A job process asks
// for the grant over its protocol channel (`device_request`) once its CPU phase is done;
// the supervisor takes a Ticket here and answers `device_grant` when the ticket's
// descriptor becomes readable.
//
// A reader/writer grant: a ticket is `shared` (any number of holders together, up to
// `max_shared`: jobs whose correctness phases may overlap) or `exclusive` (no other holder:
// a timed region). Requests are served first come, first served: the oldest request is
// granted as soon as it fits (an exclusive one when nobody holds the device, a shared one
// when no exclusive holder is in and fewer than `max_shared` shared ones are), and nothing
// behind it overtakes it. So an exclusive request waits for the shared holders before it to
// give the device back, and shared requests after it queue behind it (timing is never
// starved by a stream of correctness phases); consecutive shared requests at the front are
// granted together.
//
// A ticket gives the grant back (or leaves the queue) when it is destroyed, so a job that
// crashes, times out or is cancelled never keeps the device: run_job_on_child owns the
// ticket for the length of the job.
//
// Thread-safe. A ticket may outlive its gate.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "kforge/common/json.h"
#include "kforge/common/status.h"
#include "kforge/worker_protocol/unique_fd.h"

namespace kforge::workers {

class DeviceGate {
 private:
  struct State;

 public:
  enum class Mode { kShared, kExclusive };
  class Ticket {
   public:
    ~Ticket();
    Ticket(const Ticket&) = delete;
    Ticket& operator=(const Ticket&) = delete;

    // Readable (an eventfd) once the grant is this ticket's.
    int fd() const { return event_.get(); }
    bool granted() const;
    // Blocks until granted or `deadline`; true when granted.
    bool wait_until(std::chrono::steady_clock::time_point deadline) const;
    const std::string& holder() const { return holder_; }
    Mode mode() const { return mode_; }

   private:
    friend class DeviceGate;
    Ticket(std::shared_ptr<State> state, uint64_t seq, std::string holder, Mode mode,
           worker_protocol::UniqueFd event);

    std::shared_ptr<State> state_;
    uint64_t seq_;
    std::string holder_;
    Mode mode_;
    worker_protocol::UniqueFd event_;
  };

  // `max_shared`: shared holders at once (the device's pipeline depth); at least 1.
  explicit DeviceGate(std::string device, int max_shared = 1);

  // A place in the device's queue for `holder` (a job id, for status and logs). Never
  // null; the eventfd is created here, so an exhausted descriptor table is an error.
  StatusOr<std::unique_ptr<Ticket>> request(const std::string& holder,
                                            Mode mode = Mode::kExclusive);

  // request() and a wait for the grant in the calling thread: the granted ticket, or
  // kCancelled once `cancel_fd` (an eventfd, -1 for none) is readable, or kDeadlineExceeded
  // at `deadline` (the ticket then leaves the queue).
  StatusOr<std::unique_ptr<Ticket>> acquire(const std::string& holder, int cancel_fd,
                                            std::chrono::steady_clock::time_point deadline,
                                            Mode mode = Mode::kExclusive);

  // A process warming up beside the jobs, holding no ticket (so it holds nobody up): the
  // gate calls `pause(true)` when an exclusive grant is given and `pause(false)` when the
  // device has no exclusive holder again, so its warm-up (a CUDA context, first launches)
  // never runs beside a timed region. `pause` runs under the gate's lock: it must only
  // signal (SIGSTOP/SIGCONT), never block or call the gate. Registered while an exclusive
  // holder is in, it is paused at once; the handle's destruction unregisters it and
  // continues it if it was paused, so it must not outlive what `pause` touches.
  class Warming {
   public:
    ~Warming();
    Warming(const Warming&) = delete;
    Warming& operator=(const Warming&) = delete;

   private:
    friend class DeviceGate;
    Warming(std::shared_ptr<State> state, uint64_t id) : state_(std::move(state)), id_(id) {}
    std::shared_ptr<State> state_;
    uint64_t id_;
  };
  std::unique_ptr<Warming> warming(std::function<void(bool pause)> pause);

  // {"device","max_shared","holder" (the exclusive holder, or null),"shared_holders" (in
  // grant order),"waiting","waiting_exclusive","grants","exclusive_grants","warming" (now),
  // "warmed" (registered so far),"warming_pauses"}.
  Json status() const;

 private:
  std::shared_ptr<State> state_;
};

// "shared" / "exclusive".
std::string_view to_string(DeviceGate::Mode mode);

}  // namespace kforge::workers
