// POST /batch and GET /batch/{id} (docs/rest-api.md "POST /batch"): one reference, N candidates,
// each an ordinary compare job (GET /job/{id} works for each). The answer waits for every job
// (default), says where to poll (?wait=false: 202), or streams one SSE event per finished
// candidate (Accept: text/event-stream or ?stream=1).
// POST /kernelbench: a batch of KernelBench problems, one /batch per problem
// (bench/kernelbench_request.h); the answer waits for every sample.
#include <algorithm>
#include <chrono>
#include <optional>

#include "kforge/bench/kernelbench_request.h"
#include "kforge/common/error_mapping.h"
#include "kforge/common/json.h"
#include "kforge/frontends/http/rest_context.h"
#include "kforge/jobs/batch.h"
#include "kforge/jobs/job_view.h"
#include "kforge/model/batch.h"

namespace kforge::frontends::http {
namespace {

Json job_ids(const jobs::BatchRecord& batch) {
  Json ids = Json::array();
  for (const auto& id : batch.job_ids)
    ids.push_back(id);
  return ids;
}

HttpResponse batch_poll_response(const Json& view, const std::string& message) {
  Json body = view;
  body["message"] = message;
  HttpResponse response = HttpResponse::json(202, body);
  response.headers.emplace_back("Location", "/batch/" + view.value("batch_id", std::string()));
  return response;
}

// The batch as it is now, answered on `r` (or as the stream's last event): the jobs are
// durable, the client polls GET /batch/{id}.
void answer_current(const RestContextPtr& ctx, const jobs::BatchRecord& batch,
                    const std::optional<EventStream>& stream, const Responder& r,
                    const std::string& why) {
  ctx->blocking([ctx, batch, stream, r, why] {
    Json view = jobs::batch_view(ctx->service, batch);
    const std::string message = why + "; poll GET /batch/" + batch.id;
    if (stream) {
      view["message"] = message;
      stream->send_event(SseEvent::of(dump_json(view), "pending"));
      stream->close();
      return;
    }
    r.send(batch_poll_response(view, message));
  });
}

// Waits for every job of the batch: each finished candidate is an event of the stream (when
// streaming); after the last, the answer. The first of {all done, client gone, server
// stopping, deadline} ends the wait.
void wait_for_batch(const RestContextPtr& ctx, const jobs::BatchRecord& batch,
                    const Responder& responder, std::optional<EventStream> stream) {
  if (stream) {
    stream->send_event(
        SseEvent::of(dump_json({{"batch_id", batch.id}, {"jobs", job_ids(batch)}}), "batch"));
  }
  auto on_job = [stream](size_t index, const model::JobRecord& job, const Json& view, size_t) {
    if (!stream) return;
    stream->send_event(
        SseEvent::of(dump_json({{"index", index}, {"job_id", job.id}, {"result", view}}), "result",
                     std::to_string(index)));
  };
  auto on_all = [batch, stream, responder](Json views) {
    if (stream) {
      stream->send_event(SseEvent::of(
          dump_json({{"batch_id", batch.id}, {"total", batch.job_ids.size()}}), "done"));
      stream->close();
      return;
    }
    responder.send(HttpResponse::json(
        200, {{"batch_id", batch.id}, {"jobs", job_ids(batch)}, {"results", std::move(views)}}));
  };
  // The exchange's callbacks hold no Responder (responder.h) and the watch only weakly: the
  // JobService's callbacks keep it until the last job has finished.
  std::weak_ptr<jobs::BatchWatch> watch =
      jobs::BatchWatch::start(ctx->service, batch, std::move(on_job), std::move(on_all));
  responder.on_cancel([ctx, batch, stream, watch](CancelReason reason, const Responder& r) {
    auto w = watch.lock();
    if (!w || !w->end()) return;
    if (reason == CancelReason::kServerStopping) {
      answer_current(ctx, batch, stream, r, "the server is stopping");
    }
  });
  const double seconds = batch.timeout_s * static_cast<double>(batch.job_ids.size());
  const auto bound = std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000.0)) +
                     ctx->options.queue_wait_allowance;
  responder.on_deadline(bound, [ctx, batch, stream, watch, bound](const Responder& r) {
    auto w = watch.lock();
    if (!w || !w->end()) return;
    answer_current(
        ctx, batch, stream, r,
        "not every candidate finished after " + std::to_string(bound.count()) + " ms of waiting");
  });
}

void submit_batch_blocking(const RestContextPtr& ctx, const std::string& body,
                           const jobs::Caller& caller, bool wait, bool stream,
                           const Responder& responder) {
  auto json = submit_body_json(body, responder);
  if (!json) return;
  auto request = model::parse_batch_request(*json, ctx->options.limits);
  if (!request.is_ok()) {
    responder.send(HttpResponse::error(request.status()));
    return;
  }
  auto batch =
      jobs::submit_batch(ctx->service, ctx->batches.get(), std::move(request).value(), caller);
  if (!batch.is_ok()) {
    responder.send(submit_error_response(batch.status()));
    return;
  }
  if (!wait && !stream) {
    responder.send(batch_poll_response(
        {{"batch_id", batch->id}, {"jobs", job_ids(*batch)}, {"state", "running"}},
        "accepted; poll GET /batch/" + batch->id));
    return;
  }
  std::optional<EventStream> events;
  if (stream) events = responder.start_stream(StreamHead{});
  wait_for_batch(ctx, *batch, responder, std::move(events));
}

}  // namespace

void handle_submit_batch(const RestContextPtr& ctx, HttpRequest request, Responder responder) {
  auto wait = parse_bool_query(request, "wait", true);
  if (!wait.is_ok()) {
    responder.send(HttpResponse::error(wait.status()));
    return;
  }
  auto stream = parse_bool_query(request, "stream", false);
  if (!stream.is_ok()) {
    responder.send(HttpResponse::error(stream.status()));
    return;
  }
  const std::string* accept = request.header("accept");
  const bool sse =
      *stream || (accept != nullptr && accept->find("text/event-stream") != std::string::npos);
  ctx->blocking([ctx, wait = *wait, sse, body = std::move(request.body),
                 caller = jobs::Caller(std::move(request.client), std::move(request.principal)),
                 responder = std::move(responder)] {
    submit_batch_blocking(ctx, body, caller, wait, sse, responder);
  });
}

void handle_submit_kernelbench(const RestContextPtr& ctx, HttpRequest request,
                               Responder responder) {
  ctx->blocking([ctx, body = std::move(request.body),
                 caller = jobs::Caller(std::move(request.client), std::move(request.principal)),
                 responder = std::move(responder)] {
    auto json = submit_body_json(body, responder);
    if (!json) return;
    auto parsed = bench::kernelbench::parse_kernelbench_request(*json, ctx->options.limits);
    if (!parsed.is_ok()) {
      responder.send(HttpResponse::error(parsed.status()));
      return;
    }
    double timeout_s = 0;
    size_t jobs = 0;
    for (const auto& p : parsed->problems) {
      for (const auto& job : p.batch.jobs)
        timeout_s = std::max(timeout_s, job.timeout_s);
      jobs += p.batch.jobs.size();
    }
    auto run = bench::kernelbench::KernelbenchRun::start(
        ctx->service, ctx->batches.get(), std::move(parsed).value(), caller, nullptr,
        [responder](const Json& answer) { responder.send(HttpResponse::json(200, answer)); });
    if (!run.is_ok()) {
      responder.send(submit_error_response(run.status()));
      return;
    }
    // Held weakly: the jobs' callbacks keep the run until its last sample. Cancelling jobs
    // reads the store: on the blocking pool, never on the io thread.
    std::weak_ptr<bench::kernelbench::KernelbenchRun> weak = *run;
    responder.on_cancel([ctx, weak](CancelReason, const Responder&) {
      ctx->blocking([weak] {
        if (auto live = weak.lock()) live->end("the client went away or the server is stopping");
      });
    });
    const auto bound = std::chrono::milliseconds(
                           static_cast<int64_t>(timeout_s * static_cast<double>(jobs) * 1000.0)) +
                       ctx->options.queue_wait_allowance;
    responder.on_deadline(bound, [ctx, weak, bound](const Responder& r) {
      ctx->blocking([weak, bound, r] {
        auto live = weak.lock();
        if (!live || !live->end("not finished in time")) return;
        r.send(HttpResponse::error(unavailable("not every sample finished after " +
                                               std::to_string(bound.count()) +
                                               " ms of waiting; their jobs are cancelled")));
      });
    });
  });
}

void handle_get_batch(const RestContextPtr& ctx, const HttpRequest& request, Responder responder) {
  const std::string* id = request.path_param("id");
  ctx->blocking([ctx, id = id == nullptr ? std::string() : *id, principal = request.principal,
                 responder = std::move(responder)] {
    auto batch = ctx->batches->get(id);
    // Another principal's batch is answered as an unknown one.
    if (batch && !principal.may_access(batch->submitter)) batch.reset();
    if (!batch) {
      responder.send(HttpResponse::error(
          not_found("batch '" + id + "' is unknown (batches are kept in memory: the " +
                    "server may have restarted since; its jobs are still at GET /job/{id})")));
      return;
    }
    responder.send(HttpResponse::json(200, jobs::batch_view(ctx->service, *batch)));
  });
}

}  // namespace kforge::frontends::http
