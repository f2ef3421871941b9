// Per-phase wall times of a native job (`phases_ms` in the result, docs/worker-protocol.md),
// with the rules of the Python worker's core/phases.py: phases are exclusive (entering one inside
// another pauses the outer one), so their sum never exceeds the job's wall time, and a
// phase that never ran is absent, not zero.
//
// Not thread-safe: one job's pipeline runs on one thread.
//
// Example:
//   PhaseClock clock;
//   {
//     PhaseClock::Scope timing(clock, "timing");
//     { PhaseClock::Scope inputs(clock, "inputs"); make_inputs(); }  // not charged to timing
//   }
//   clock.to_json();  // {"inputs": 1.2, "timing": 40.1}
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "kforge/common/json.h"

namespace kforge::cuda_worker {

class PhaseClock {
 public:
  using Clock = std::chrono::steady_clock;
  using NowFn = std::function<Clock::time_point()>;

  // `now`: a monotonic clock (tests pass their own).
  explicit PhaseClock(NowFn now = Clock::now) : now_(std::move(now)) {}

  // The phases, in the order results list them.
  static constexpr const char* kPhases[] = {"import",    "compile", "inputs", "reference",
                                            "candidate", "compare", "timing"};

  // Charges the time between its construction and destruction to `phase` (one of kPhases;
  // anything else aborts), minus the time of scopes opened inside it.
  class Scope {
   public:
    Scope(PhaseClock& clock, const std::string& phase);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    PhaseClock& clock_;
  };

  // {phase: ms} of the phases that ran, in kPhases order, rounded to microseconds; an open
  // phase counts up to now.
  Json to_json() const;

 private:
  struct Open {
    std::string phase;
    Clock::time_point since;
  };
  void enter(const std::string& phase);
  void leave();
  void charge(Open& open, Clock::time_point now);

  NowFn now_;
  std::map<std::string, double> ms_;
  std::vector<Open> open_;  // innermost last
};

}  // namespace kforge::cuda_worker
