// The device grant of pipelined stages (issue 13; docs/worker-protocol.md "Device grant"):
// several jobs of one device may run their CPU phases (compile, import, input generation)
// at once, but only the job holding the device's grant runs GPU work. A job process asks
// for the grant over its protocol channel (`device_request`) once its CPU phase is done;
// the supervisor takes a Ticket here and answers `device_grant` when the ticket's
// descriptor becomes readable. Grants go out one at a time, in request order.
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
#include <memory>
#include <mutex>
#include <string>

#include "kforge/common/json.h"
#include "kforge/common/status.h"
#include "kforge/worker_protocol/unique_fd.h"

namespace kforge::workers {

class DeviceGate {
 private:
  struct State;

 public:
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

   private:
    friend class DeviceGate;
    Ticket(std::shared_ptr<State> state, uint64_t seq, std::string holder,
           worker_protocol::UniqueFd event);

    std::shared_ptr<State> state_;
    uint64_t seq_;
    std::string holder_;
    worker_protocol::UniqueFd event_;
  };

  explicit DeviceGate(std::string device);

  // A place in the device's queue for `holder` (a job id, for status and logs). Never
  // null; the eventfd is created here, so an exhausted descriptor table is an error.
  StatusOr<std::unique_ptr<Ticket>> request(const std::string& holder);

  // request() and a wait for the grant in the calling thread: the granted ticket, or
  // kCancelled once `cancel_fd` (an eventfd, -1 for none) is readable, or kDeadlineExceeded
  // at `deadline` (the ticket then leaves the queue).
  StatusOr<std::unique_ptr<Ticket>> acquire(const std::string& holder, int cancel_fd,
                                            std::chrono::steady_clock::time_point deadline);

  // {"device","holder" (or null),"waiting","grants"}.
  Json status() const;

 private:
  std::shared_ptr<State> state_;
};

}  // namespace kforge::workers
