#include "kforge/workers/kept_judges.h"

#include <signal.h>

#include <utility>
#include <vector>

#include "kforge/worker_protocol/protocol.h"

namespace kforge::workers {
namespace {

using Clock = std::chrono::steady_clock;

}  // namespace

std::shared_ptr<ChildChannel> KeptJudges::take(const std::string& key) {
  std::vector<std::shared_ptr<ChildChannel>> dropped;  // killed after the lock is let go
  std::shared_ptr<ChildChannel> taken;
  {
    MutexLock lock(mu_);
    const auto now = Clock::now();
    for (auto it = parked_.begin(); it != parked_.end();) {
      ChildMessage state = ChildMessage::kNotYet;
      if (now - it->since > kParkedFor) {
        state = ChildMessage::kGone;
      } else if (!taken && it->key == key) {
        state = it->child->ready ? ChildMessage::kArrived : next_message_of(*it->child, "ready");
      }
      if (state == ChildMessage::kNotYet) {
        ++it;
        continue;
      }
      if (state == ChildMessage::kArrived) {
        taken = std::move(it->child);
        ++jobs_on_kept_judges_;
      } else {
        dropped.push_back(std::move(it->child));
      }
      it = parked_.erase(it);
    }
  }
  if (taken) {  // no longer warm-ups: a job's
    taken->warming.reset();
    taken->spare_warming.reset();
  }
  for (auto& child : dropped)
    child->kill_all();
  return taken;
}

void KeptJudges::park(const std::shared_ptr<ChildChannel>& child, const std::string& key,
                      DeviceGate* gate) {
  // The job's candidate is the pid its judge named; the judge has not reaped it (it waits
  // for `candidate_ended`), so the pid is still that process. It is pid 1 of its own pid
  // namespace: with it dies everything it started.
  const auto candidate = static_cast<pid_t>(message_int(child->ready_message, "candidate_pid"));
  child->ready = false;
  bool parked = candidate > 1 && ::kill(candidate, SIGKILL) == 0;
  parked = parked &&
           worker_protocol::write_all(
               child->proto.get(), worker_protocol::encode_frame(Json{{"type", "candidate_ended"}}),
               Clock::now() + std::chrono::seconds(5));
  // `idle`: the candidate is reaped (its CUDA context gone) and the next spare warms up.
  parked = parked && await_message_of(*child, "idle", Clock::now() + std::chrono::seconds(10));
  if (!parked) {
    child->kill_all();
    return;
  }
  // One registration for the whole child from now on (its judge attaches its clock, its
  // spare finishes warming); the spare's own ends first, so nothing is registered twice.
  child->spare_warming.reset();
  if (gate != nullptr) child->warming = child->warm_beside(*gate);
  std::shared_ptr<ChildChannel> evicted;
  {
    MutexLock lock(mu_);
    if (gate != nullptr) ++kept_gate_registrations_;
    if (parked_.size() >= kMaxParked) {
      evicted = std::move(parked_.front().child);
      parked_.pop_front();
    }
    parked_.push_back({key, child, Clock::now()});
    ++judges_parked_;
  }
  if (evicted) evicted->kill_all();
}

void KeptJudges::count_gate_registration() {
  MutexLock lock(mu_);
  ++kept_gate_registrations_;
}

void KeptJudges::clear() {
  std::deque<Parked> gone;
  {
    MutexLock lock(mu_);
    gone.swap(parked_);
  }
  for (auto& p : gone)
    p.child->kill_all();
}

void KeptJudges::fill_status(Json& status) const {
  MutexLock lock(mu_);
  status["judges_parked_now"] = parked_.size();
  status["judges_parked_total"] = judges_parked_;
  status["jobs_on_kept_judges_total"] = jobs_on_kept_judges_;
  // Warm-ups of kept judges registered with the device's gate (a spare woken by a job, a
  // parked judge), besides one per process started.
  status["kept_judge_gate_registrations_total"] = kept_gate_registrations_;
}

}  // namespace kforge::workers
