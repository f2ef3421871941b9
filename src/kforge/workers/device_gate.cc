#include "kforge/workers/device_gate.h"

#include <poll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <map>

#include "kforge/common/log.h"
#include "kforge/common/status.h"
#include "kforge/common/thread_annotations.h"

namespace kforge::workers {

std::string_view to_string(DeviceGate::Mode mode) {
  return mode == DeviceGate::Mode::kShared ? "shared" : "exclusive";
}

struct DeviceGate::State {
  struct Waiter {
    uint64_t seq;
    std::string holder;
    Mode mode;
    int fd;  // the ticket's eventfd (the ticket leaves the queue before it closes it)
  };

  State(std::string d, int max) : device(std::move(d)), max_shared(std::max(1, max)) {}

  // Grants the oldest waiters while they fit (see the header): an exclusive one when nobody
  // holds the device, shared ones while no exclusive holder is in and there is room. The
  // first that does not fit stops it, so nothing overtakes it.
  void grant_next_locked() REQUIRES(mu) {
    while (!waiting.empty() && exclusive_seq == 0) {
      Waiter& next = waiting.front();
      if (next.mode == Mode::kExclusive) {
        if (!shared.empty()) break;
        exclusive_seq = next.seq;
        exclusive_holder = next.holder;
        ++exclusive_grants;
        pause_warming_locked(true);  // before the holder hears of its grant
      } else {
        if (static_cast<int>(shared.size()) >= max_shared) break;
        shared.emplace(next.seq, next.holder);
      }
      ++grants;
      uint64_t one = 1;
      if (::write(next.fd, &one, sizeof(one)) < 0) {
        KF_LOG_WARN("device={} could not signal the grant to {}: errno {}", device, next.holder,
                    errno);
      }
      waiting.pop_front();
      cv.notify_all();
    }
    pause_warming_locked(exclusive_seq != 0);
  }

  // Pauses (or continues) every warming process when the device gets (or loses) its
  // exclusive holder.
  void pause_warming_locked(bool pause) REQUIRES(mu) {
    if (pause == warming_paused) return;
    warming_paused = pause;
    if (pause) ++warming_pauses;
    for (auto& [id, fn] : warming)
      fn(pause);
  }

  bool holds_locked(uint64_t seq) const REQUIRES(mu) {
    return exclusive_seq == seq || shared.contains(seq);
  }

  const std::string device;
  const int max_shared;
  mutable Mutex mu;
  mutable std::condition_variable cv;
  std::deque<Waiter> waiting GUARDED_BY(mu);  // oldest first
  uint64_t exclusive_seq GUARDED_BY(mu) = 0;  // 0 = no exclusive holder
  std::string exclusive_holder GUARDED_BY(mu);
  std::map<uint64_t, std::string> shared GUARDED_BY(mu);  // seq -> holder, grant order
  uint64_t next_seq GUARDED_BY(mu) = 1;
  int64_t grants GUARDED_BY(mu) = 0;
  int64_t exclusive_grants GUARDED_BY(mu) = 0;
  // Processes warming up beside the jobs (DeviceGate::warming), by registration id.
  std::map<uint64_t, std::function<void(bool)>> warming GUARDED_BY(mu);
  bool warming_paused GUARDED_BY(mu) = false;
  uint64_t next_warming GUARDED_BY(mu) = 1;
  int64_t warming_pauses GUARDED_BY(mu) = 0;
};

DeviceGate::DeviceGate(std::string device, int max_shared)
    : state_(std::make_shared<State>(std::move(device), max_shared)) {}

StatusOr<std::unique_ptr<DeviceGate::Ticket>> DeviceGate::request(const std::string& holder,
                                                                  Mode mode) {
  worker_protocol::UniqueFd event(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
  if (!event.valid()) return errno_error("eventfd", errno);
  MutexLock lock(state_->mu);
  const uint64_t seq = state_->next_seq++;
  state_->waiting.push_back({seq, holder, mode, event.get()});
  std::unique_ptr<Ticket> ticket(new Ticket(state_, seq, holder, mode, std::move(event)));
  state_->grant_next_locked();
  return ticket;
}

StatusOr<std::unique_ptr<DeviceGate::Ticket>> DeviceGate::acquire(
    const std::string& holder, int cancel_fd, std::chrono::steady_clock::time_point deadline,
    Mode mode) {
  KF_ASSIGN_OR_RETURN(std::unique_ptr<Ticket> ticket, request(holder, mode));
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

std::unique_ptr<DeviceGate::Warming> DeviceGate::warming(std::function<void(bool pause)> pause) {
  MutexLock lock(state_->mu);
  const uint64_t id = state_->next_warming++;
  if (state_->warming_paused) pause(true);
  state_->warming.emplace(id, std::move(pause));
  return std::unique_ptr<Warming>(new Warming(state_, id));
}

DeviceGate::Warming::~Warming() {
  MutexLock lock(state_->mu);
  auto it = state_->warming.find(id_);
  if (it == state_->warming.end()) return;
  if (state_->warming_paused) it->second(false);
  state_->warming.erase(it);
}

Json DeviceGate::status() const {
  MutexLock lock(state_->mu);
  Json shared = Json::array();
  for (const auto& [seq, holder] : state_->shared)
    shared.push_back(holder);
  size_t waiting_exclusive = 0;
  for (const auto& w : state_->waiting)
    if (w.mode == Mode::kExclusive) ++waiting_exclusive;
  return Json{
      {"device", state_->device},
      {"max_shared", state_->max_shared},
      {"holder", state_->exclusive_seq != 0 ? Json(state_->exclusive_holder) : Json(nullptr)},
      {"shared_holders", std::move(shared)},
      {"waiting", state_->waiting.size()},
      {"waiting_exclusive", waiting_exclusive},
      {"grants", state_->grants},
      {"exclusive_grants", state_->exclusive_grants},
      {"warming", state_->warming.size()},
      {"warmed", state_->next_warming - 1},
      {"warming_pauses", state_->warming_pauses}};
}

DeviceGate::Ticket::Ticket(std::shared_ptr<State> state, uint64_t seq, std::string holder,
                           Mode mode, worker_protocol::UniqueFd event)
    : state_(std::move(state)),
      seq_(seq),
      holder_(std::move(holder)),
      mode_(mode),
      event_(std::move(event)) {}

DeviceGate::Ticket::~Ticket() {
  MutexLock lock(state_->mu);
  if (state_->exclusive_seq == seq_) {
    state_->exclusive_seq = 0;
    state_->exclusive_holder.clear();
  } else if (state_->shared.erase(seq_) == 0) {
    auto& w = state_->waiting;
    w.erase(
        std::remove_if(w.begin(), w.end(), [&](const State::Waiter& x) { return x.seq == seq_; }),
        w.end());
  }
  // A waiter leaving the front may let the ones behind it in, as a holder leaving does;
  // warming processes continue once no exclusive holder is left.
  state_->grant_next_locked();
}

bool DeviceGate::Ticket::granted() const {
  MutexLock lock(state_->mu);
  return state_->holds_locked(seq_);
}

bool DeviceGate::Ticket::wait_until(std::chrono::steady_clock::time_point deadline) const {
  MutexLock lock(state_->mu);
  return lock.wait_until(state_->cv, deadline,
                         [&]() REQUIRES(state_->mu) { return state_->holds_locked(seq_); });
}

}  // namespace kforge::workers
