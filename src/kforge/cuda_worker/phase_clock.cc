#include "kforge/cuda_worker/phase_clock.h"

#include <algorithm>
#include <cmath>
#include <iterator>

#include "kforge/common/status.h"

namespace kforge::cuda_worker {

PhaseClock::Scope::Scope(PhaseClock& clock, const std::string& phase) : clock_(clock) {
  clock_.enter(phase);
}

PhaseClock::Scope::~Scope() {
  clock_.leave();
}

void PhaseClock::enter(const std::string& phase) {
  KF_CHECK(std::find(std::begin(kPhases), std::end(kPhases), phase) != std::end(kPhases),
           "unknown phase " + phase);
  const auto now = now_();
  if (!open_.empty()) charge(open_.back(), now);
  open_.push_back({phase, now});
}

void PhaseClock::leave() {
  KF_CHECK(!open_.empty(), "a phase left that was never entered");
  const auto now = now_();
  charge(open_.back(), now);
  open_.pop_back();
  if (!open_.empty()) open_.back().since = now;
}

void PhaseClock::charge(Open& open, Clock::time_point now) {
  ms_[open.phase] += std::chrono::duration<double, std::milli>(now - open.since).count();
  open.since = now;
}

Json PhaseClock::to_json() const {
  std::map<std::string, double> ms = ms_;
  if (!open_.empty()) {
    ms[open_.back().phase] +=
        std::chrono::duration<double, std::milli>(now_() - open_.back().since).count();
  }
  Json out = Json::object();
  for (const char* phase : kPhases) {
    if (auto it = ms.find(phase); it != ms.end()) out[phase] = std::round(it->second * 1e3) / 1e3;
  }
  return out;
}

}  // namespace kforge::cuda_worker
