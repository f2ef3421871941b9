// A job: one accepted evaluation request and, once finished, its result.
//
// Lifecycle (explicit state machine; see `can_transition`):
//   queued -> running -> success | failed | cancelled
//   queued -> cancelled
//   running -> queued   (only when a server restart interrupted it; `attempts` counts starts)
// `success` means the evaluation ran to a verdict, whatever the verdict (a kernel that does
// not compile is a successful job with compiled=false). `failed` means the server could not
// evaluate it (no worker could start, interrupted too often). `cancelled`: by a client, or,
// for a process-bound job, at a restart because the process waiting for it had ended.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "kforge/common/json.h"
#include "kforge/model/request.h"

namespace kforge::model {

enum class JobState { kQueued, kRunning, kSucceeded, kFailed, kCancelled };

// Wire names: "queued", "running", "success", "failed", "cancelled".
std::string_view to_string(JobState s);
std::optional<JobState> job_state_from(std::string_view s);
bool is_terminal(JobState s);
bool can_transition(JobState from, JobState to);

struct JobRecord {
  std::string id;
  model::JobKind kind = model::JobKind::kEvaluate;
  JobState state = JobState::kQueued;
  Json request;             // canonical request (model::to_request_json), seed included
  Json result;              // kernel_exec_result (+ ref fields); null until finished
  std::string device;       // requested device until it runs, then the device it ran on
  std::string error;        // why a job failed or was cancelled; empty otherwise
  int attempts = 0;         // how many times it was started
  int64_t created_ms = 0;   // Unix ms
  int64_t started_ms = 0;   // 0 until started
  int64_t finished_ms = 0;  // 0 until finished
  std::string phase;        // a running job's progress phase ("loading", ...); not stored
  // Who submitted it: the name of the submitting principal (model/principal.h); "" when the
  // server had no tokens. Never a token.
  std::string submitter;
  // Only the process that submitted it can receive its result (jobs::Caller::process_bound):
  // a restart ends it as cancelled instead of running it again.
  bool process_bound = false;
};

}  // namespace kforge::model
