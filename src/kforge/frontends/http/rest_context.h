// Internal to the REST handlers: what every handler closure shares, and the handler
// functions of each resource (rest_handlers.cc, submit_handlers.cc).
#pragma once

#include <memory>

#include "kforge/frontends/http/rest_handlers.h"

namespace kforge::frontends::http {

// Shared by every handler closure and every task they post, so it lives as long as the
// last of them.
struct RestContext {
  jobs::JobService& service;
  BlockingExecutor blocking;
  RestOptions options;
};
using RestContextPtr = std::shared_ptr<const RestContext>;

enum class SubmitKind { kEvaluate, kCompare };

// POST /evaluate, /compare, / (submit_handlers.cc).
void handle_submit(const RestContextPtr& ctx, SubmitKind kind, HttpRequest request,
                   Responder responder);

// The 202 answer that tells a client to poll: job_status_view(job) (or {job_id, status} when
// `job` is null), a message and `Location: /job/<id>`.
HttpResponse poll_response(const std::string& job_id, const jobs::JobRecord* job,
                           const std::string& message);

}  // namespace kforge::frontends::http
