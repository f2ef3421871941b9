#include "kforge/model/job.h"

namespace kforge::model {

std::string_view to_string(JobState s) {
  switch (s) {
    case JobState::kQueued:
      return "queued";
    case JobState::kRunning:
      return "running";
    case JobState::kSucceeded:
      return "success";
    case JobState::kFailed:
      return "failed";
    case JobState::kCancelled:
      return "cancelled";
  }
  return "unknown";
}

std::optional<JobState> job_state_from(std::string_view s) {
  for (JobState st : {JobState::kQueued, JobState::kRunning, JobState::kSucceeded,
                      JobState::kFailed, JobState::kCancelled}) {
    if (to_string(st) == s) return st;
  }
  return std::nullopt;
}

bool is_terminal(JobState s) {
  return s == JobState::kSucceeded || s == JobState::kFailed || s == JobState::kCancelled;
}

bool can_transition(JobState from, JobState to) {
  switch (from) {
    case JobState::kQueued:
      return to == JobState::kRunning || to == JobState::kCancelled || to == JobState::kFailed;
    case JobState::kRunning:
      return to == JobState::kSucceeded || to == JobState::kFailed || to == JobState::kCancelled ||
             to == JobState::kQueued;
    case JobState::kSucceeded:
    case JobState::kFailed:
    case JobState::kCancelled:
      return false;
  }
  return false;
}

}  // namespace kforge::model
