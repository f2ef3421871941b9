#include "kforge/workers/device_gate.h"

#include <poll.h>
#include <sys/eventfd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>

#include "kforge/common/log.h"
#include "kforge/common/status.h"

namespace kforge::workers {

struct DeviceGate::State {
  struct Waiter {
    uint64_t seq;
    std::string holder;
    int fd;  // the ticket's eventfd (the ticket leaves the queue before it closes it)
  };

  explicit State(std::string d) : device(std::move(d)) {}

  // Hands the grant to the oldest waiter when nobody holds it. Requires mu.
  void grant_next_locked() {
    if (holder_seq != 0 || waiting.empty()) return;
    Waiter next = std::move(waiting.front());
    waiting.pop_front();
    holder_seq = next.seq;
    holder = std::move(next.holder);
    ++grants;
    uint64_t one = 1;
    if (::write(next.fd, &one, sizeof(one)) < 0) {
      KF_LOG_WARN("device={} could not signal the grant to {}: errno {}", device, holder, errno);
    }
    cv.notify_all();
  }

  const std::string device;
  mutable std::mutex mu;
  mutable std::condition_variable cv;
  std::deque<Waiter> waiting;  // guarded by mu, oldest first
  uint64_t holder_seq = 0;     // guarded by mu; 0 = free
  std::string holder;          // guarded by mu
  uint64_t next_seq = 1;       // guarded by mu
  int64_t grants = 0;          // guarded by mu
};

DeviceGate::DeviceGate(std::string device) : state_(std::make_shared<State>(std::move(device))) {}

StatusOr<std::unique_ptr<DeviceGate::Ticket>> DeviceGate::request(const std::string& holder) {
  worker_protocol::UniqueFd event(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!event.valid()) return errno_error("eventfd", errno);
  std::lock_guard lock(state_->mu);
  const uint64_t seq = state_->next_seq++;
  state_->waiting.push_back({seq, holder, event.get()});
  std::unique_ptr<Ticket> ticket(new Ticket(state_, seq, holder, std::move(event)));
  state_->grant_next_locked();
  return ticket;
}

StatusOr<std::unique_ptr<DeviceGate::Ticket>> DeviceGate::acquire(
    const std::string& holder, int cancel_fd, std::chrono::steady_clock::time_point deadline) {
  KF_ASSIGN_OR_RETURN(std::unique_ptr<Ticket> ticket, request(holder));
  while (!ticket->granted()) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) {
      return Status(ErrorCode::kDeadlineExceeded,
                    "the device " + state_->device + " was not granted in time");
    }
    pollfd fds[2] = {{ticket->fd(), POLLIN, 0}, {cancel_fd, POLLIN, 0}};
    int n = ::poll(fds, cancel_fd >= 0 ? 2 : 1,
                   static_cast<int>(std::min<int64_t>(left.count(), 1000)));
    if (n > 0 && cancel_fd >= 0 && (fds[1].revents & POLLIN) != 0 && !ticket->granted()) {
      return Status(ErrorCode::kCancelled, "cancelled while waiting for the device");
    }
  }
  return ticket;
}

Json DeviceGate::status() const {
  std::lock_guard lock(state_->mu);
  return Json{{"device", state_->device},
              {"holder", state_->holder_seq != 0 ? Json(state_->holder) : Json(nullptr)},
              {"waiting", state_->waiting.size()},
              {"grants", state_->grants}};
}

DeviceGate::Ticket::Ticket(std::shared_ptr<State> state, uint64_t seq, std::string holder,
                           worker_protocol::UniqueFd event)
    : state_(std::move(state)), seq_(seq), holder_(std::move(holder)), event_(std::move(event)) {}

DeviceGate::Ticket::~Ticket() {
  std::lock_guard lock(state_->mu);
  if (state_->holder_seq == seq_) {
    state_->holder_seq = 0;
    state_->holder.clear();
    state_->grant_next_locked();
    return;
  }
  auto& w = state_->waiting;
  w.erase(std::remove_if(w.begin(), w.end(), [&](const State::Waiter& x) { return x.seq == seq_; }),
          w.end());
}

bool DeviceGate::Ticket::granted() const {
  std::lock_guard lock(state_->mu);
  return state_->holder_seq == seq_;
}

bool DeviceGate::Ticket::wait_until(std::chrono::steady_clock::time_point deadline) const {
  std::unique_lock lock(state_->mu);
  return state_->cv.wait_until(lock, deadline, [&] { return state_->holder_seq == seq_; });
}

}  // namespace kforge::workers
