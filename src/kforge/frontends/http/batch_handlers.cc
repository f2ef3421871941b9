// POST /batch and GET /batch/{id} (docs/rest-api.md "Batches"): one reference, N candidates,
// each an ordinary compare job (GET /job/{id} works for each). The answer waits for every job
// (default), says where to poll (?wait=false: 202), or streams one SSE event per finished
// candidate (Accept: text/event-stream or ?stream=1).
#include <algorithm>
#include <chrono>
#include <mutex>

#include "kforge/common/error_mapping.h"
#include "kforge/common/json.h"
#include "kforge/frontends/http/rest_context.h"
#include "kforge/jobs/batch.h"
#include "kforge/jobs/job_view.h"
#include "kforge/model/batch.h"

namespace kforge::frontends::http {
namespace {

int64_t unix_ms_now() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

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

// The wait for every job of a batch: each job's when_done fills its slot; the last one
// answers (or, streaming, every one sends its event and the last closes the stream). The first
// of {all done, client gone, server stopping, deadline} ends it.
class BatchWait : public std::enable_shared_from_this<BatchWait> {
 public:
  BatchWait(RestContextPtr ctx, jobs::BatchRecord batch, Responder responder,
            std::optional<EventStream> stream)
      : ctx_(std::move(ctx)),
        batch_(std::move(batch)),
        responder_(std::move(responder)),
        stream_(std::move(stream)),
        results_(batch_.job_ids.size()),
        remaining_(batch_.job_ids.size()) {}

  void start() {
    // The callbacks of the exchange hold no Responder (responder.h): a weak reference. The
    // jobs' when_done callbacks keep this alive until the last job has finished.
    std::weak_ptr<BatchWait> weak = shared_from_this();
    responder_.on_cancel([weak](CancelReason reason, const Responder& r) {
      auto self = weak.lock();
      if (!self || !self->end()) return;
      if (reason == CancelReason::kServerStopping)
        self->answer_current(r, "the server is stopping");
    });
    const double seconds = batch_.timeout_s * static_cast<double>(batch_.job_ids.size());
    const auto bound = std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000.0)) +
                       ctx_->options.queue_wait_allowance;
    responder_.on_deadline(bound, [weak, bound](const Responder& r) {
      auto self = weak.lock();
      if (!self || !self->end()) return;
      self->answer_current(r, "not every candidate finished after " +
                                  std::to_string(bound.count()) + " ms of waiting");
    });
    auto self = shared_from_this();
    if (stream_) {
      stream_->send_event(
          SseEvent::of(dump_json({{"batch_id", batch_.id}, {"jobs", job_ids(batch_)}}), "batch"));
    }
    for (size_t i = 0; i < batch_.job_ids.size(); ++i) {
      auto sub = ctx_->service.when_done(
          batch_.job_ids[i], [self, i](const jobs::JobRecord& done) { self->finished(i, done); });
      if (!sub.is_ok()) {
        // Deleted meanwhile: its slot stays null.
        jobs::JobRecord gone;
        gone.id = batch_.job_ids[i];
        gone.state = jobs::JobState::kFailed;
        gone.error = sub.status().message();
        finished(i, gone);
        continue;
      }
      std::lock_guard lock(mu_);
      if (ended_) {
        ctx_->service.unsubscribe(*sub);
      } else {
        subs_.push_back(*sub);
      }
    }
  }

 private:
  void finished(size_t index, const jobs::JobRecord& done) {
    Json view = jobs::job_result_view(done);
    bool last = false;
    {
      std::lock_guard lock(mu_);
      if (ended_ || !results_[index].is_null()) return;
      results_[index] = view;
      last = --remaining_ == 0;
      if (stream_) {
        // Sent under the lock, so the events are in the order the slots were filled.
        stream_->send_event(
            SseEvent::of(dump_json({{"index", index}, {"job_id", done.id}, {"result", view}}),
                         "result", std::to_string(index)));
      }
    }
    if (!last || !end()) return;
    if (stream_) {
      stream_->send_event(SseEvent::of(
          dump_json({{"batch_id", batch_.id}, {"total", batch_.job_ids.size()}}), "done"));
      stream_->close();
      return;
    }
    Json body = {{"batch_id", batch_.id}, {"jobs", job_ids(batch_)}};
    {
      std::lock_guard lock(mu_);
      body["results"] = results_;
    }
    responder_.send(HttpResponse::json(200, body));
  }

  // Ends the wait once; true for the caller that ended it. Drops the subscriptions.
  bool end() {
    std::vector<uint64_t> subs;
    {
      std::lock_guard lock(mu_);
      if (ended_) return false;
      ended_ = true;
      subs.swap(subs_);
    }
    for (uint64_t sub : subs)
      ctx_->service.unsubscribe(sub);
    return true;
  }

  // The batch as it is now (the jobs are durable: poll GET /batch/{id}).
  void answer_current(const Responder& r, const std::string& why) {
    auto ctx = ctx_;
    auto batch = batch_;
    auto stream = stream_;
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

  const RestContextPtr ctx_;
  const jobs::BatchRecord batch_;
  const Responder responder_;
  const std::optional<EventStream> stream_;
  std::mutex mu_;
  std::vector<Json> results_;   // guarded by mu_
  size_t remaining_;            // guarded by mu_
  std::vector<uint64_t> subs_;  // guarded by mu_
  bool ended_ = false;          // guarded by mu_
};

void submit_batch_blocking(const RestContextPtr& ctx, const std::string& body,
                           const std::string& client, bool wait, bool stream,
                           const Responder& responder) {
  if (responder.cancelled()) {
    responder.send(HttpResponse::error(unavailable("the request was cancelled before submit")));
    return;
  }
  auto json = parse_json(body);
  if (!json.is_ok()) {
    responder.send(HttpResponse::error(json.status()));
    return;
  }
  auto request = model::parse_batch_request(*json, ctx->options.limits);
  if (!request.is_ok()) {
    responder.send(HttpResponse::error(request.status()));
    return;
  }
  auto batch = jobs::submit_batch(ctx->service, ctx->batches.get(), std::move(request).value(),
                                  client, unix_ms_now());
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
  std::make_shared<BatchWait>(ctx, std::move(batch).value(), responder, std::move(events))->start();
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
                 client = std::move(request.client), responder = std::move(responder)] {
    submit_batch_blocking(ctx, body, client, wait, sse, responder);
  });
}

void handle_get_batch(const RestContextPtr& ctx, const HttpRequest& request, Responder responder) {
  const std::string* id = request.path_param("id");
  ctx->blocking([ctx, id = id == nullptr ? std::string() : *id, responder = std::move(responder)] {
    auto batch = ctx->batches->get(id);
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
