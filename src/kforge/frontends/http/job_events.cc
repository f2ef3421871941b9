// GET /job/{id}/events and GET /jobs/events: a job's progress, and every visible job's
// changes, as server-sent events (docs/rest-api.md "GET /jobs/events"). The web UI reads them
// with fetch() so that the token travels in the Authorization header, as for every other
// request (EventSource cannot send one).
#include <atomic>
#include <memory>

#include "kforge/common/error_mapping.h"
#include "kforge/common/thread_annotations.h"
#include "kforge/frontends/http/rest_context.h"
#include "kforge/jobs/job_access.h"
#include "kforge/jobs/job_view.h"

namespace kforge::frontends::http {
namespace {

// The subscriptions one stream holds, dropped once (client gone, server stopping, job done).
class Subscriptions {
 public:
  explicit Subscriptions(jobs::JobService& service) : service_(service) {}
  // False when the stream has already ended (the subscription is dropped at once).
  bool add(uint64_t id) {
    MutexLock lock(mu_);
    if (ended_) {
      service_.unsubscribe(id);
      return false;
    }
    ids_.push_back(id);
    return true;
  }
  void end() {
    std::vector<uint64_t> ids;
    {
      MutexLock lock(mu_);
      ended_ = true;
      ids.swap(ids_);
    }
    for (uint64_t id : ids)
      service_.unsubscribe(id);
  }

 private:
  jobs::JobService& service_;
  Mutex mu_;
  std::vector<uint64_t> ids_ GUARDED_BY(mu_);
  bool ended_ GUARDED_BY(mu_) = false;
};

Json progress_json(const jobs::JobProgress& p) {
  return Json{
      {"job_id", p.job_id}, {"phase", p.phase}, {"message", p.message}, {"fraction", p.fraction}};
}

}  // namespace

void handle_job_events(const RestContextPtr& ctx, const HttpRequest& request, Responder responder) {
  const std::string* id = request.path_param("id");
  ctx->blocking([ctx, id = id == nullptr ? std::string() : *id, principal = request.principal,
                 responder = std::move(responder)] {
    auto job = jobs::get_visible(ctx->service, id, principal);
    if (!job.is_ok()) {
      responder.send(HttpResponse::error(job.status()));
      return;
    }
    EventStream stream = responder.start_stream(StreamHead{});
    stream.send_event(SseEvent::of(dump_json(jobs::job_status_view(*job)), "state"));
    if (model::is_terminal(job->state)) {
      stream.send_event(SseEvent::of(dump_json(jobs::job_status_view(*job)), "done"));
      stream.close();
      return;
    }
    auto subs = std::make_shared<Subscriptions>(ctx->service);
    // A stopping server closes the stream at once (it would otherwise hold the drain).
    responder.on_cancel([subs, stream](CancelReason, const Responder&) {
      subs->end();
      stream.close();
    });
    // A job that ends between get() and here has no progress left: when_done answers at once.
    auto progress = ctx->service.on_progress(id, [stream](const jobs::JobProgress& p) {
      stream.send_event(SseEvent::of(dump_json(progress_json(p)), "progress"));
    });
    if (progress.is_ok()) subs->add(*progress);
    auto done = ctx->service.when_done(id, [stream, subs](const model::JobRecord& finished) {
      stream.send_event(SseEvent::of(dump_json(jobs::job_status_view(finished)), "done"));
      stream.close();
      subs->end();
    });
    if (!done.is_ok()) {
      stream.send_event(SseEvent::of(dump_json(error_body(done.status())), "error"));
      stream.close();
      subs->end();
      return;
    }
    subs->add(*done);
  });
}

void handle_jobs_events(const RestContextPtr& ctx, const HttpRequest& request,
                        const Responder& responder) {
  if (!request.query.empty()) {
    responder.send(HttpResponse::error(invalid_argument("GET /jobs/events takes no parameters",
                                                        "query." + request.query.begin()->first)));
    return;
  }
  EventStream stream = responder.start_stream(StreamHead{});
  auto subs = std::make_shared<Subscriptions>(ctx->service);
  // A stopping server closes the stream at once (it would otherwise hold the drain).
  responder.on_cancel([subs, stream](CancelReason, const Responder&) {
    subs->end();
    stream.close();
  });
  auto changes = ctx->service.on_job_changes(
      [stream, principal = request.principal](const jobs::JobChange& change) {
        if (!principal.may_access(change.submitter)) return;  // not theirs: not even its id
        Json event = {{"job_id", change.job_id}, {"state", model::to_string(change.state)}};
        if (!change.phase.empty()) event["phase"] = change.phase;
        stream.send_event(SseEvent::of(dump_json(event), "job"));
      });
  if (!changes.is_ok()) {
    stream.send_event(SseEvent::of(dump_json(error_body(changes.status())), "error"));
    stream.close();
    return;
  }
  if (subs->add(*changes)) stream.send_event(SseEvent::of("{}", "ready"));
}

}  // namespace kforge::frontends::http
