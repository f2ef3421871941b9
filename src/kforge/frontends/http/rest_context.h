// Internal to the REST handlers: what every handler closure shares, and the handler
// functions of each resource (rest_handlers.cc, submit_handlers.cc).
#pragma once

#include <memory>
#include <optional>

#include "kforge/frontends/http/rest_handlers.h"
#include "kforge/jobs/batch.h"

namespace kforge::frontends::http {

// Shared by every handler closure and every task they post, so it lives as long as the
// last of them.
struct RestContext {
  jobs::JobService& service;
  BlockingExecutor blocking;
  RestOptions options;
  // The batches of POST /batch, for GET /batch/{id} (batch_handlers.cc).
  std::shared_ptr<jobs::BatchBook> batches = std::make_shared<jobs::BatchBook>();
};
using RestContextPtr = std::shared_ptr<const RestContext>;

enum class SubmitKind { kEvaluate, kCompare };

// POST /evaluate, /compare, / (submit_handlers.cc).
void handle_submit(const RestContextPtr& ctx, SubmitKind kind, HttpRequest request,
                   Responder responder);

// POST /batch and GET /batch/{id} (batch_handlers.cc).
void handle_submit_batch(const RestContextPtr& ctx, HttpRequest request, Responder responder);
void handle_get_batch(const RestContextPtr& ctx, const HttpRequest& request, Responder responder);
// POST /kernelbench (batch_handlers.cc).
void handle_submit_kernelbench(const RestContextPtr& ctx, HttpRequest request, Responder responder);

// GET /jobs (job_list.cc).
void handle_list_jobs(const RestContextPtr& ctx, const HttpRequest& request, Responder responder);

// GET /job/{id}/events and GET /jobs/events: server-sent events (job_events.cc).
void handle_job_events(const RestContextPtr& ctx, const HttpRequest& request, Responder responder);
void handle_jobs_events(const RestContextPtr& ctx, const HttpRequest& request,
                        const Responder& responder);

// A boolean query parameter (?wait=false, ?stream=1): `absent` when it is not given;
// kInvalidArgument (field "query.<name>") for a value that is not a boolean.
StatusOr<bool> parse_bool_query(const HttpRequest& request, std::string_view name, bool absent);

// A submit's body as JSON, read on the blocking pool; nullopt once the client has been
// answered instead (it left or the server is stopping before anything was accepted: 503; the
// body is not JSON: 400).
std::optional<Json> submit_body_json(const std::string& body, const Responder& responder);

// The answer to a refused submit; a full queue (503) or a used-up quota (429) says when to
// come back (Retry-After).
HttpResponse submit_error_response(const Status& status);

// The 202 answer that tells a client to poll: job_status_view(job) (or {job_id, status} when
// `job` is null), a message and `Location: /job/<id>`.
HttpResponse poll_response(const std::string& job_id, const model::JobRecord* job,
                           const std::string& message);

}  // namespace kforge::frontends::http
