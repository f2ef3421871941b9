// POST /evaluate, POST /compare and legacy POST /: parse and validate on the blocking pool,
// submit (durable), then either answer 202 at once (?wait=false) or wait for the job through
// a JobService callback, bounded by the job's timeout plus the queueing allowance.
#include <cmath>
#include <optional>

#include "kforge/common/json.h"
#include "kforge/common/thread_annotations.h"
#include "kforge/frontends/http/rest_context.h"
#include "kforge/jobs/job_view.h"
#include "kforge/model/parse.h"

namespace kforge::frontends::http {
namespace {

// Retry-After of a 429/503 from a full queue: jobs take seconds, so a few seconds is right.
constexpr int kRetryAfterSeconds = 5;

// Who unsubscribes: the first of {job done, client gone, server stopping, deadline} ends
// the wait; the subscription id may arrive after any of them.
class WaitState {
 public:
  // Records the subscription; returns true if the wait already ended (the caller must then
  // unsubscribe it).
  bool set_subscription(uint64_t id) {
    MutexLock lock(mu_);
    if (ended_) return true;
    subscription_ = id;
    return false;
  }
  // Ends the wait; returns the subscription to drop, if any (only the first call does).
  std::optional<uint64_t> end() {
    MutexLock lock(mu_);
    if (ended_) return std::nullopt;
    ended_ = true;
    return std::exchange(subscription_, std::nullopt);
  }

 private:
  Mutex mu_;
  bool ended_ GUARDED_BY(mu_) = false;
  std::optional<uint64_t> subscription_ GUARDED_BY(mu_);
};

// The no-cache headers the old server sent with every evaluation answer.
void add_no_cache_headers(HttpResponse& response) {
  response.headers.emplace_back("Cache-Control", "no-cache, no-store, must-revalidate");
  response.headers.emplace_back("Pragma", "no-cache");
  response.headers.emplace_back("Expires", "0");
}

// 200 with a finished job, as the old server answered a submit (plus gpu_type when known).
HttpResponse finished_answer(const RestContext& ctx, const model::JobRecord& job) {
  Json body = jobs::job_result_view(job);
  if (!ctx.options.gpu_type.empty()) body["gpu_type"] = ctx.options.gpu_type;
  HttpResponse response = HttpResponse::json(200, body);
  add_no_cache_headers(response);
  if (!ctx.options.gpu_type.empty())
    response.headers.emplace_back("X-GPU-Type", ctx.options.gpu_type);
  return response;
}

std::chrono::milliseconds wait_bound(const RestOptions& options, double job_timeout_s) {
  double ms = std::ceil(job_timeout_s * 1000.0);
  return std::chrono::milliseconds(static_cast<int64_t>(ms)) + options.queue_wait_allowance;
}

// Answers from the job's current state, read on the pool: 200 with the result if it has
// finished meanwhile, else 202 telling the client to poll.
void respond_with_current_state(const RestContextPtr& ctx, const std::string& id,
                                const Responder& responder, std::string message) {
  ctx->blocking([ctx, id, responder, message = std::move(message)] {
    auto current = ctx->service.get(id);
    if (current.is_ok() && model::is_terminal(current->state)) {
      responder.send(finished_answer(*ctx, *current));
      return;
    }
    responder.send(poll_response(id, current.is_ok() ? &*current : nullptr, message));
  });
}

// Called on a pool thread right after a successful submit.
void wait_for_job(const RestContextPtr& ctx, const model::JobRecord& job, double job_timeout_s,
                  const Responder& responder) {
  auto state = std::make_shared<WaitState>();
  const std::string id = job.id;
  // Cancellation and deadline first, so they cover the subscription made below. Neither
  // callback holds the Responder (they receive one).
  responder.on_cancel([ctx, state, id](CancelReason reason, const Responder& r) {
    if (auto sub = state->end()) ctx->service.unsubscribe(*sub);
    if (reason == CancelReason::kServerStopping) {
      respond_with_current_state(
          ctx, id, r, "the server is shutting down; the job is durable: poll GET /job/" + id);
    }
  });
  const auto bound = wait_bound(ctx->options, job_timeout_s);
  responder.on_deadline(bound, [ctx, state, id, bound](const Responder& r) {
    if (auto sub = state->end()) ctx->service.unsubscribe(*sub);
    respond_with_current_state(
        ctx, id, r,
        "no result after " + std::to_string(bound.count()) + " ms of waiting; poll GET /job/" + id);
  });
  auto sub = ctx->service.when_done(id, [ctx, state, responder](const model::JobRecord& done) {
    state->end();
    responder.send(finished_answer(*ctx, done));
  });
  if (!sub.is_ok()) {
    state->end();
    responder.send(HttpResponse::error(sub.status().with_context("waiting for job " + id)));
    return;
  }
  if (state->set_subscription(*sub)) ctx->service.unsubscribe(*sub);
}

}  // namespace

std::optional<Json> submit_body_json(const std::string& body, const Responder& responder) {
  if (responder.cancelled()) {
    responder.send(HttpResponse::error(unavailable("the request was cancelled before submit")));
    return std::nullopt;
  }
  auto json = parse_json(body);
  if (!json.is_ok()) {
    responder.send(HttpResponse::error(json.status()));
    return std::nullopt;
  }
  return std::move(*json);
}

namespace {

// The part of a submit that runs on the blocking pool.
void submit_blocking(const RestContextPtr& ctx, SubmitKind kind, const std::string& body,
                     const jobs::Caller& caller, bool wait, const Responder& responder) {
  auto json = submit_body_json(body, responder);
  if (!json) return;
  auto request = kind == SubmitKind::kEvaluate
                     ? model::parse_evaluate_request(*json, ctx->options.limits)
                     : model::parse_compare_request(*json, ctx->options.limits);
  if (!request.is_ok()) {
    responder.send(HttpResponse::error(request.status()));
    return;
  }
  const double timeout_s = request->timeout_s;
  auto job = ctx->service.submit(std::move(request).value(), caller);
  if (!job.is_ok()) {
    responder.send(submit_error_response(job.status()));
    return;
  }
  if (!wait) {
    responder.send(poll_response(job->id, &*job, "accepted; poll GET /job/" + job->id));
    return;
  }
  wait_for_job(ctx, *job, timeout_s, responder);
}

}  // namespace

StatusOr<bool> parse_bool_query(const HttpRequest& request, std::string_view name, bool absent) {
  const std::string* value = request.query_param(name);
  if (value == nullptr) return absent;
  for (const char* yes : {"", "true", "1", "yes", "on"}) {
    if (iequals(*value, yes)) return true;
  }
  for (const char* no : {"false", "0", "no", "off"}) {
    if (iequals(*value, no)) return false;
  }
  return invalid_argument("must be true or false, got '" + *value + "'",
                          "query." + std::string(name));
}

HttpResponse submit_error_response(const Status& status) {
  HttpResponse response = HttpResponse::error(status);
  if (status.code() == ErrorCode::kResourceExhausted || status.code() == ErrorCode::kUnavailable) {
    response.headers.emplace_back("Retry-After", std::to_string(kRetryAfterSeconds));
  }
  return response;
}

HttpResponse poll_response(const std::string& job_id, const model::JobRecord* job,
                           const std::string& message) {
  Json body = job != nullptr
                  ? jobs::job_status_view(*job)
                  : Json{{"job_id", job_id}, {"status", "submitted"}, {"state", "queued"}};
  body["message"] = message;
  HttpResponse response = HttpResponse::json(202, body);
  response.headers.emplace_back("Location", "/job/" + job_id);
  add_no_cache_headers(response);
  return response;
}

void handle_submit(const RestContextPtr& ctx, SubmitKind kind, HttpRequest request,
                   Responder responder) {
  auto wait = parse_bool_query(request, "wait", true);
  if (!wait.is_ok()) {
    responder.send(HttpResponse::error(wait.status()));
    return;
  }
  ctx->blocking([ctx, kind, wait = *wait, body = std::move(request.body),
                 caller = jobs::Caller(std::move(request.client), std::move(request.principal)),
                 responder = std::move(responder)] {
    submit_blocking(ctx, kind, body, caller, wait, responder);
  });
}

}  // namespace kforge::frontends::http
