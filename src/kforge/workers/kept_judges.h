// The judges a Python worker keeps between jobs (--jobs-per-judge > 1): after a job whose
// judge may serve another, its candidate is killed and the judge is parked under the job's
// reuse key (its submitter, device and reference) while its next, spare candidate warms
// up; a later job of the same key takes it once that candidate is ready. At most kMaxParked
// judges wait, each at most kParkedFor; the oldest goes first (docs/security.md, "A judge
// serves several jobs").
//
// Thread-safety: every method may be called from any thread (runner threads take judges,
// the teardown thread parks them, status() reads the counters).
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <string>

#include "kforge/common/json.h"
#include "kforge/common/thread_annotations.h"
#include "kforge/workers/child_channel.h"
#include "kforge/workers/device_gate.h"

namespace kforge::workers {

class KeptJudges {
 public:
  static constexpr size_t kMaxParked = 4;
  static constexpr std::chrono::seconds kParkedFor{60};

  // A parked judge of `key` whose next candidate is warm (its `ready` arrived), or null.
  // Kills parked judges that are gone or waited too long.
  std::shared_ptr<ChildChannel> take(const std::string& key);
  // After a kept job (ChildJobEnd::kept): kills the job's candidate (the pid its judge named,
  // pid 1 of its own pid namespace), waits for the judge's `idle`, then parks it under
  // `key`, registered with `gate` (if any) while its next candidate warms up. Kills the
  // child where any step fails, and the oldest parked judge when kMaxParked wait.
  void park(const std::shared_ptr<ChildChannel>& child, const std::string& key, DeviceGate* gate);
  // A spare candidate a job woke, registered with the device's gate (counted in status).
  void count_gate_registration();
  // Kills every parked judge (the worker's shutdown).
  void clear();
  // judges_parked_now/_total, jobs_on_kept_judges_total, kept_judge_gate_registrations_total.
  void fill_status(Json& status) const;

 private:
  struct Parked {
    std::string key;
    std::shared_ptr<ChildChannel> child;
    std::chrono::steady_clock::time_point since;
  };

  mutable Mutex mu_;
  std::deque<Parked> parked_ GUARDED_BY(mu_);  // oldest first
  int64_t judges_parked_ GUARDED_BY(mu_) = 0;
  int64_t jobs_on_kept_judges_ GUARDED_BY(mu_) = 0;
  int64_t kept_gate_registrations_ GUARDED_BY(mu_) = 0;
};

}  // namespace kforge::workers
