// What every Store implementation's count_by_state/job_summary share.
#pragma once

#include <cstdint>
#include <map>

#include "kforge/store/store.h"

namespace kforge::store {

// Every state, with zeros (job_summary's answer before the rows are counted).
inline std::map<model::JobState, Store::StateSummary> empty_summary() {
  std::map<model::JobState, Store::StateSummary> summary;
  for (model::JobState s :
       {model::JobState::kQueued, model::JobState::kRunning, model::JobState::kSucceeded,
        model::JobState::kFailed, model::JobState::kCancelled}) {
    summary[s] = Store::StateSummary{};
  }
  return summary;
}

// The job counts of a summary (count_by_state from job_summary).
inline StatusOr<std::map<model::JobState, int64_t>> counts_of(
    StatusOr<std::map<model::JobState, Store::StateSummary>> summary) {
  KF_RETURN_IF_ERROR(summary.status());
  std::map<model::JobState, int64_t> counts;
  for (const auto& [state, s] : *summary)
    counts[state] = s.count;
  return counts;
}

}  // namespace kforge::store
