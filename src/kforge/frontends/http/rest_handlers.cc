// The REST routes table and the small resources: jobs, health, stats, admin cleanup.
// The submit endpoints live in submit_handlers.cc.
#include "kforge/frontends/http/rest_handlers.h"

#include <cmath>
#include <memory>

#include "kforge/common/json.h"
#include "kforge/frontends/http/rest_context.h"
#include "kforge/jobs/job_access.h"
#include "kforge/jobs/job_view.h"
#include "kforge/jobs/prometheus_text.h"

namespace kforge::frontends::http {
namespace {

// GET /job/{id}: another principal's job is answered as an unknown one (jobs/job_access.h).
// ?include=request adds the canonical request (the kernels' sources) as `request`.
void handle_get_job(const RestContextPtr& ctx, const HttpRequest& request, Responder responder) {
  const std::string* id = request.path_param("id");
  const std::string* include = request.query_param("include");
  if (include != nullptr && *include != "request") {
    responder.send(HttpResponse::error(
        invalid_argument("must be 'request', got '" + *include + "'", "query.include")));
    return;
  }
  ctx->blocking([ctx, id = id == nullptr ? std::string() : *id, principal = request.principal,
                 with_request = include != nullptr, responder = std::move(responder)] {
    auto job = jobs::get_visible(ctx->service, id, principal);
    if (!job.is_ok()) {
      responder.send(HttpResponse::error(job.status()));
      return;
    }
    Json view = jobs::job_status_view(*job);
    if (with_request) view["request"] = job->request;
    responder.send(HttpResponse::json(200, view));
  });
}

// POST /job/{id}/cancel, body optional {"reason": "..."}: cancels a queued or running job
// (its process group is killed) and answers the job once it has ended; a job that had
// already finished is left as it was (its state says so).
void handle_cancel_job(const RestContextPtr& ctx, HttpRequest request, Responder responder) {
  const std::string* id = request.path_param("id");
  ctx->blocking([ctx, id = id == nullptr ? std::string() : *id, request = std::move(request),
                 responder = std::move(responder)] {
    std::string reason = "cancelled through the REST API";
    if (request.body.find_first_not_of(" \t\r\n") != std::string::npos) {
      auto body = parse_json(request.body);
      if (!body.is_ok()) {
        responder.send(HttpResponse::error(body.status()));
        return;
      }
      if (!body->is_object()) {
        responder.send(HttpResponse::error(invalid_argument(
            "must be an object, got " + std::string(json_type_name(*body)), "<root>")));
        return;
      }
      if (auto it = body->find("reason"); it != body->end()) {
        if (!it->is_string() || it->get<std::string>().size() > 1024) {
          responder.send(HttpResponse::error(
              invalid_argument("must be a string of at most 1024 characters", "reason")));
          return;
        }
        reason = it->get<std::string>();
      }
    }
    if (Status s = jobs::cancel_visible(ctx->service, id, reason, request.principal); !s.is_ok()) {
      responder.send(HttpResponse::error(s));
      return;
    }
    // A running job ends once its process group is gone: answer then, with the final state.
    auto subscribed = ctx->service.when_done(id, [responder](const model::JobRecord& job) {
      responder.send(HttpResponse::json(200, jobs::job_status_view(job)));
    });
    if (!subscribed.is_ok()) responder.send(HttpResponse::error(subscribed.status()));
  });
}

// GET /health: liveness and devices (JobService::health, no store access) plus the old
// server's job_stats, a per-state count from the store, read on the pool. Job ids only for
// admins (jobs::hide_job_ids).
void handle_health(const RestContextPtr& ctx, const HttpRequest& request, Responder responder) {
  ctx->blocking([ctx, principal = request.principal, responder = std::move(responder)] {
    Json health = ctx->service.health();
    Json stats = ctx->service.stats();
    if (auto it = stats.find("job_stats"); it != stats.end()) health["job_stats"] = *it;
    jobs::hide_job_ids(health, principal);
    responder.send(HttpResponse::json(200, health));
  });
}

// GET /readyz (no token: AccessPolicy::is_probe): 200 {"status":"ready"} while every worker is
// up (jobs are taken; they queue while processes warm), 503 {"status":"not ready"} once one
// has failed. Nothing else: a probe sees no devices, jobs or versions.
void handle_readyz(const RestContextPtr& ctx, Responder responder) {
  ctx->blocking([ctx, responder = std::move(responder)] {
    const bool ready = ctx->service.health().value("status", "") == "healthy";
    responder.send(
        HttpResponse::json(ready ? 200 : 503, Json{{"status", ready ? "ready" : "not ready"}}));
  });
}

// GET /stats: counters for everyone; which jobs run (their ids) only for admins.
void handle_stats(const RestContextPtr& ctx, const HttpRequest& request, Responder responder) {
  ctx->blocking([ctx, principal = request.principal, responder = std::move(responder)] {
    Json stats = ctx->service.stats();
    jobs::hide_job_ids(stats, principal);
    responder.send(HttpResponse::json(200, stats));
  });
}

// GET /metrics: the Prometheus text format (docs/rest-api.md "GET /metrics").
void handle_metrics(const RestContextPtr& ctx, const HttpRequest&, Responder responder) {
  ctx->blocking([ctx, responder = std::move(responder)] {
    auto text = ctx->service.prometheus_metrics();
    if (!text.is_ok()) {
      responder.send(HttpResponse::error(text.status()));
      return;
    }
    HttpResponse response;
    response.content_type = jobs::kPrometheusContentType;
    response.body = std::move(text).value();
    responder.send(std::move(response));
  });
}

// One age given as hours (number) or seconds (integer), from the body or the query.
StatusOr<std::optional<double>> read_age(const Json* value, const std::string& field,
                                         bool integral) {
  if (value == nullptr || value->is_null()) return std::optional<double>();
  if (!value->is_number() || (integral && !value->is_number_integer())) {
    return invalid_argument(std::string("must be ") + (integral ? "an integer" : "a number") +
                                ", got " + std::string(json_type_name(*value)),
                            field);
  }
  double v = value->get<double>();
  constexpr double kMaxSeconds = 100.0 * 365 * 24 * 3600;
  double seconds = integral ? v : v * 3600.0;
  if (!std::isfinite(v) || v < 0 || seconds > kMaxSeconds) {
    return invalid_argument("must be between 0 and 100 years, got " + value->dump(), field);
  }
  // An age of 0 deletes every finished job: only older_than_seconds, an exact count, may ask
  // for that. A fraction of an hour rounds up to whole seconds (0.0001 h is 1 s, never 0).
  if (!integral && v == 0) {
    return invalid_argument(
        "0 would delete every finished job; give older_than_seconds 0 to mean that", field);
  }
  return std::optional<double>(std::ceil(seconds));
}

// A query parameter as a JSON number (so it goes through the same checks as the body).
StatusOr<std::optional<Json>> query_number(const HttpRequest& request, const char* name) {
  const std::string* text = request.query_param(name);
  if (text == nullptr) return std::optional<Json>();
  auto value = parse_json(*text);
  if (!value.is_ok() || !value->is_number()) {
    return invalid_argument("must be a number, got '" + *text + "'", std::string("query.") + name);
  }
  return std::optional<Json>(std::move(value).value());
}

// The cleanup age: body {"max_age_hours": h} or {"older_than_seconds": s}, or the same
// names as query parameters; exactly one may be given; default RestOptions.
StatusOr<std::chrono::seconds> cleanup_age(const RestContext& ctx, const HttpRequest& request) {
  Json body = Json::object();
  if (request.body.find_first_not_of(" \t\r\n") != std::string::npos) {
    KF_ASSIGN_OR_RETURN(body, parse_json(request.body));
    if (!body.is_object()) {
      return invalid_argument("must be an object, got " + std::string(json_type_name(body)),
                              "<root>");
    }
  }
  KF_ASSIGN_OR_RETURN(auto q_hours, query_number(request, "max_age_hours"));
  KF_ASSIGN_OR_RETURN(auto q_seconds, query_number(request, "older_than_seconds"));
  auto member = [&body](const char* key) -> const Json* {
    auto it = body.find(key);
    return it == body.end() ? nullptr : &*it;
  };
  std::optional<double> seconds;
  int given = 0;
  struct Source {
    const Json* value;
    std::string field;
    bool integral;
  };
  for (const Source& s :
       {Source{member("max_age_hours"), "max_age_hours", false},
        Source{member("older_than_seconds"), "older_than_seconds", true},
        Source{q_hours ? &*q_hours : nullptr, "query.max_age_hours", false},
        Source{q_seconds ? &*q_seconds : nullptr, "query.older_than_seconds", true}}) {
    KF_ASSIGN_OR_RETURN(auto age, read_age(s.value, s.field, s.integral));
    if (!age) continue;
    if (++given > 1) {
      return invalid_argument("give only one of max_age_hours and older_than_seconds", s.field);
    }
    seconds = age;
  }
  if (!seconds) return ctx.options.default_cleanup_age;
  return std::chrono::seconds(static_cast<int64_t>(*seconds));
}

// POST /admin/cleanup-jobs: deletes every principal's old jobs, so only admins may (and
// everyone on a server without tokens).
void handle_cleanup(const RestContextPtr& ctx, HttpRequest request, Responder responder) {
  if (Status s = jobs::require_admin(request.principal, "POST /admin/cleanup-jobs"); !s) {
    responder.send(HttpResponse::error(s));
    return;
  }
  ctx->blocking([ctx, request = std::move(request), responder = std::move(responder)] {
    auto age = cleanup_age(*ctx, request);
    if (!age.is_ok()) {
      responder.send(HttpResponse::error(age.status()));
      return;
    }
    auto deleted = ctx->service.cleanup(*age);
    if (!deleted.is_ok()) {
      responder.send(HttpResponse::error(deleted.status()));
      return;
    }
    responder.send(HttpResponse::json(200, Json{{"status", "cleanup_completed"},
                                                {"deleted", *deleted},
                                                {"older_than_seconds", age->count()}}));
  });
}

}  // namespace

Status add_rest_routes(Router& router, jobs::JobService& service, BlockingExecutor blocking,
                       RestOptions options) {
  auto ctx = std::make_shared<const RestContext>(
      RestContext{service, std::move(blocking), std::move(options)});
  auto submit = [ctx](SubmitKind kind) {
    return [ctx, kind](HttpRequest request, Responder responder) {
      handle_submit(ctx, kind, std::move(request), std::move(responder));
    };
  };
  KF_RETURN_IF_ERROR(router.add("POST", "/evaluate", submit(SubmitKind::kEvaluate)));
  KF_RETURN_IF_ERROR(router.add("POST", "/compare", submit(SubmitKind::kCompare)));
  KF_RETURN_IF_ERROR(router.add("POST", "/", submit(SubmitKind::kCompare)));
  KF_RETURN_IF_ERROR(router.add("POST", "/batch", [ctx](HttpRequest r, Responder s) {
    handle_submit_batch(ctx, std::move(r), std::move(s));
  }));
  KF_RETURN_IF_ERROR(router.add("POST", "/kernelbench", [ctx](HttpRequest r, Responder s) {
    handle_submit_kernelbench(ctx, std::move(r), std::move(s));
  }));
  KF_RETURN_IF_ERROR(router.add("GET", "/batch/{id}", [ctx](const HttpRequest& r, Responder s) {
    handle_get_batch(ctx, r, std::move(s));
  }));
  KF_RETURN_IF_ERROR(router.add("GET", "/jobs", [ctx](const HttpRequest& r, Responder s) {
    handle_list_jobs(ctx, r, std::move(s));
  }));
  KF_RETURN_IF_ERROR(router.add("GET", "/job/{id}", [ctx](const HttpRequest& r, Responder s) {
    handle_get_job(ctx, r, std::move(s));
  }));
  KF_RETURN_IF_ERROR(router.add(
      "GET", "/jobs/events",
      [ctx](const HttpRequest& r, const Responder& s) { handle_jobs_events(ctx, r, s); }));
  KF_RETURN_IF_ERROR(router.add(
      "GET", "/job/{id}/events",
      [ctx](const HttpRequest& r, Responder s) { handle_job_events(ctx, r, std::move(s)); }));
  KF_RETURN_IF_ERROR(router.add("POST", "/job/{id}/cancel", [ctx](HttpRequest r, Responder s) {
    handle_cancel_job(ctx, std::move(r), std::move(s));
  }));
  KF_RETURN_IF_ERROR(router.add("GET", "/health", [ctx](const HttpRequest& r, Responder s) {
    handle_health(ctx, r, std::move(s));
  }));
  // The probes (no token): /livez answers while the server's HTTP loop does; /readyz above.
  KF_RETURN_IF_ERROR(router.add("GET", "/livez", [](const HttpRequest&, const Responder& s) {
    s.send(HttpResponse::json(200, Json{{"status", "alive"}}));
  }));
  KF_RETURN_IF_ERROR(router.add("GET", "/readyz", [ctx](const HttpRequest&, Responder s) {
    handle_readyz(ctx, std::move(s));
  }));
  KF_RETURN_IF_ERROR(router.add("GET", "/stats", [ctx](const HttpRequest& r, Responder s) {
    handle_stats(ctx, r, std::move(s));
  }));
  KF_RETURN_IF_ERROR(router.add("GET", "/metrics", [ctx](const HttpRequest& r, Responder s) {
    handle_metrics(ctx, r, std::move(s));
  }));
  KF_RETURN_IF_ERROR(router.add("POST", "/admin/cleanup-jobs", [ctx](HttpRequest r, Responder s) {
    handle_cleanup(ctx, std::move(r), std::move(s));
  }));
  return Status::ok();
}

}  // namespace kforge::frontends::http
