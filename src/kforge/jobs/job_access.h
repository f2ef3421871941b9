// Which jobs a principal may see (model/principal.h, docs/security.md "Who sees which jobs").
// Frontends answer clients through these functions; JobService::get and cancel see every job
// (the engine's own callers: batches, the bench, the workbench, act on jobs they submitted).
//
// A job the principal may not see is answered exactly as a job that does not exist: the same
// code, the same message, so ids cannot be probed.
//
// Thread-safety: stateless; the JobService's rules apply. Functions marked "blocks" read the
// store: call them on a thread pool.
#pragma once

#include <string>
#include <string_view>

#include "kforge/common/json.h"
#include "kforge/common/status.h"
#include "kforge/jobs/job_service.h"
#include "kforge/model/principal.h"

namespace kforge::jobs {

// The kNotFound of a job id that is unknown (or hidden): "no job with id '<id>'".
Status unknown_job(const std::string& id);

// The job when `principal` may see it, else unknown_job(id). Blocks.
StatusOr<model::JobRecord> get_visible(JobService& service, const std::string& id,
                                       const model::Principal& principal);

// Cancels the job when `principal` may see it (JobService::cancel), else unknown_job(id).
// Blocks.
Status cancel_visible(JobService& service, const std::string& id, const std::string& reason,
                      const model::Principal& principal);

// kPermissionDenied naming `what` (e.g. "POST /admin/cleanup-jobs") unless `principal` may
// administer the server (an admin token, or a server without tokens).
Status require_admin(const model::Principal& principal, std::string_view what);

// Placeholder for a job id that `/stats` and `/health` do not show.
inline constexpr std::string_view kHiddenJob = "(hidden)";

// JobService::stats() or health() as `principal` may see them: unless it sees job ids, each
// device's `current_job` is dropped and the names of its `device_gate` holders (job ids) are
// replaced by kHiddenJob, so the answer keeps its shape and its counts.
void hide_job_ids(Json& stats, const model::Principal& principal);

}  // namespace kforge::jobs
