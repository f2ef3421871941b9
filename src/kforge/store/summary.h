// What every Store implementation's count_by_state/job_summary share.
#pragma once

#include <cstdint>
#include <map>

#include "kforge/store/store.h"

namespace kforge::store {

// Every state, with zeros (job_summary's answer before the rows are counted).
inline std::map<jobs::JobState, Store::StateSummary> empty_summary() {
  std::map<jobs::JobState, Store::StateSummary> summary;
  for (jobs::JobState s :
       {jobs::JobState::kQueued, jobs::JobState::kRunning, jobs::JobState::kSucceeded,
        jobs::JobState::kFailed, jobs::JobState::kCancelled}) {
    summary[s] = Store::StateSummary{};
  }
  return summary;
}

// The job counts of a summary (count_by_state from job_summary).
inline StatusOr<std::map<jobs::JobState, int64_t>> counts_of(
    StatusOr<std::map<jobs::JobState, Store::StateSummary>> summary) {
  KF_RETURN_IF_ERROR(summary.status());
  std::map<jobs::JobState, int64_t> counts;
  for (const auto& [state, s] : *summary)
    counts[state] = s.count;
  return counts;
}

}  // namespace kforge::store
