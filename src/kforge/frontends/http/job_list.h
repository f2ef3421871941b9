// GET /jobs: a listing of jobs, newest first, filtered and cursor-paginated (docs/rest-api.md
// "GET /jobs"), as JSON or JSON Lines.
//
//   status=success,failed   any of these states        kernel_type=triton
//   device=cpu              submitter=alice            since=<t>  until=<t>  (created_at)
//   limit=1..500 (50)       cursor=<next_cursor>       format=json|jsonl
// Times are Unix epoch seconds (a number, as the job views' created_at) or ISO 8601 UTC with
// milliseconds ("2026-11-25T21:38:43.123Z"); since is inclusive, until exclusive. A user
// principal lists only its own jobs (jobs/job_access.h); asking for another submitter's lists
// nothing. Every other parameter, and every malformed value, is a 400 naming "query.<name>".
//
// Example:
//   GET /jobs?status=success&limit=2
//   -> {"jobs": [job_list_view, job_list_view], "next_cursor": "c1...", "limit": 2}
#pragma once

#include <string>

#include "kforge/common/status.h"
#include "kforge/frontends/http/http_message.h"
#include "kforge/model/job_query.h"

namespace kforge::frontends::http {

struct JobListRequest {
  model::JobQuery query;   // limit is the page size (not yet one more)
  bool jsonl = false;      // format=jsonl
  bool sees_none = false;  // the principal may not see the submitter asked for
};

// The listing `request` asks for, narrowed to what its principal may see.
StatusOr<JobListRequest> parse_job_list_request(const HttpRequest& request);

// A listing's `limit` query parameter (GET /jobs, /workbench/sessions, /bench/reports): an
// integer from 1 to `max_limit`; kInvalidArgument naming "query.limit" otherwise.
StatusOr<int> parse_limit_param(const std::string& text, int max_limit);

}  // namespace kforge::frontends::http
