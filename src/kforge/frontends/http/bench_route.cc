#include "kforge/frontends/http/bench_route.h"

#include <charconv>
#include <memory>

#include "kforge/bench/bench_run.h"
#include "kforge/common/error_mapping.h"
#include "kforge/common/log.h"
#include "kforge/frontends/http/job_list.h"

namespace kforge::frontends::http {
namespace {

struct BenchContext {
  jobs::JobService& service;
  BlockingExecutor blocking;
  bench::BenchPolicy policy;
  std::shared_ptr<bench::BenchReportBook> reports;  // null: reports are not kept
};
using BenchContextPtr = std::shared_ptr<const BenchContext>;

bool wants_stream(const HttpRequest& request) {
  const std::string* accept = request.header("accept");
  return accept != nullptr && accept->find("text/event-stream") != std::string::npos;
}

// Where the answer goes: one JSON response, or the events of a stream.
class BenchReply {
 public:
  BenchReply(Responder responder, bool stream) : responder_(std::move(responder)) {
    if (stream) stream_ = responder_.start_stream(StreamHead{});
  }
  bool streaming() const { return stream_.has_value(); }

  void progress(const bench::BenchProgress& p) const {
    if (!stream_) return;
    const Json event = {{"done", p.done}, {"total", p.total}, {"message", p.message}};
    stream_->send_event(SseEvent::of(dump_json(event), "progress"));
  }
  void answer(const StatusOr<Json>& answer) const {
    if (!stream_) {
      responder_.send(answer.is_ok() ? HttpResponse::json(200, *answer)
                                     : HttpResponse::error(answer.status()));
      return;
    }
    stream_->send_event(answer.is_ok()
                            ? SseEvent::of(dump_json(*answer), "result")
                            : SseEvent::of(dump_json(error_body(answer.status())), "error"));
    stream_->close();
  }

 private:
  Responder responder_;
  std::optional<EventStream> stream_;
};

void run_bench(const BenchContextPtr& ctx, const std::string& body, const jobs::Caller& caller,
               bool stream, const Responder& responder) {
  auto json = parse_json(body);
  if (!json.is_ok()) {
    responder.send(HttpResponse::error(json.status()));
    return;
  }
  auto request = bench::parse_bench_request(*json, ctx->policy);
  if (!request.is_ok()) {
    responder.send(HttpResponse::error(request.status()));
    return;
  }
  auto plan = bench::plan_bench(request->options, ctx->service.health());
  if (!plan.is_ok()) {
    responder.send(HttpResponse::error(plan.status()));
    return;
  }
  // Errors before this point are plain 4xx answers; from here on the stream (if asked for)
  // is open and carries the outcome.
  auto reply = std::make_shared<BenchReply>(responder, stream);
  auto run = bench::BenchRun::start(
      ctx->service, ctx->blocking, std::move(plan).value(), caller,
      [reply](const bench::BenchProgress& p) { reply->progress(p); },
      [ctx, reply, submitter = caller.principal.name,
       request = std::move(request).value()](StatusOr<Json> report) {
        StatusOr<Json> answer = report.is_ok() ? bench::bench_answer(*report, request)
                                               : StatusOr<Json>(report.status());
        if (!answer.is_ok() || ctx->reports == nullptr) {
          reply->answer(answer);
          return;
        }
        // Kept (a file write) on the pool; the answer names it for GET /bench/reports/{id}.
        ctx->blocking([ctx, reply, submitter, answer = std::move(answer).value()]() mutable {
          auto id = ctx->reports->keep(answer, submitter);
          if (id.is_ok()) {
            answer["report_id"] = *id;
          } else {
            KF_LOG_WARN("POST /bench: the report is not kept: {}", id.status().to_string());
          }
          reply->answer(answer);
        });
      });
  responder.on_cancel([run](CancelReason reason, const Responder&) {
    run->cancel(std::string("POST /bench: ") + (reason == CancelReason::kClientGone
                                                    ? "the client went away"
                                                    : "the server is stopping"));
  });
}

StatusOr<bench::ReportListQuery> parse_report_list_request(const HttpRequest& request) {
  for (const auto& [name, value] : request.query) {
    if (name != "limit" && name != "cursor") {
      return invalid_argument("is not a parameter of GET /bench/reports (limit, cursor)",
                              "query." + name);
    }
  }
  bench::ReportListQuery query;
  if (const std::string* v = request.query_param("limit")) {
    KF_ASSIGN_OR_RETURN(query.limit, parse_limit_param(*v, bench::kMaxReportListLimit));
  }
  if (const std::string* v = request.query_param("cursor")) query.cursor = *v;
  return query;
}

Status add_report_routes(Router& router, const BenchContextPtr& ctx) {
  KF_RETURN_IF_ERROR(router.add(
      "GET", "/bench/reports", [ctx](const HttpRequest& request, const Responder& responder) {
        auto query = parse_report_list_request(request);
        auto page = query.is_ok() ? ctx->reports->list(request.principal, *query)
                                  : StatusOr<Json>(query.status());
        responder.send(page.is_ok() ? HttpResponse::json(200, *page)
                                    : HttpResponse::error(page.status()));
      }));
  return router.add(
      "GET", "/bench/reports/{id}", [ctx](const HttpRequest& request, Responder responder) {
        const std::string* id = request.path_param("id");
        ctx->blocking([ctx, id = id == nullptr ? std::string() : *id, principal = request.principal,
                       responder = std::move(responder)] {
          auto report = ctx->reports->get(id, principal);
          responder.send(report.is_ok() ? HttpResponse::json(200, *report)
                                        : HttpResponse::error(report.status()));
        });
      });
}

}  // namespace

Status add_bench_route(Router& router, jobs::JobService& service, BlockingExecutor blocking,
                       bench::BenchPolicy policy, std::shared_ptr<bench::BenchReportBook> reports) {
  auto ctx = std::make_shared<const BenchContext>(
      BenchContext{service, std::move(blocking), std::move(policy), std::move(reports)});
  if (ctx->reports != nullptr) KF_RETURN_IF_ERROR(add_report_routes(router, ctx));
  return router.add("POST", "/bench", [ctx](HttpRequest request, Responder responder) {
    const bool stream = wants_stream(request);
    ctx->blocking(
        [ctx, stream, body = std::move(request.body),
         caller = jobs::Caller(std::move(request.client), std::move(request.principal)),
         responder = std::move(responder)] { run_bench(ctx, body, caller, stream, responder); });
  });
}

}  // namespace kforge::frontends::http
