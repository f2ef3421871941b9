#include "kforge/frontends/http/exchange.h"

#include <utility>

namespace kforge::frontends::http {

// ---------------------------------------------------------------------------------------
// Responder, EventStream, HandlerRef: thin handles over the Exchange.

std::string_view to_string(CancelReason reason) {
  switch (reason) {
    case CancelReason::kClientGone:
      return "client_gone";
    case CancelReason::kServerStopping:
      return "server_stopping";
  }
  return "unknown";
}

std::string format_sse_event(const SseEvent& event) {
  std::string out;
  out.reserve(event.data.size() + event.event.size() + event.id.size() + 32);
  // Field values must not contain line breaks; an id or event name with one is cut there.
  auto single_line = [](const std::string& s) { return s.substr(0, s.find_first_of("\r\n")); };
  if (!event.event.empty()) out += "event: " + single_line(event.event) + "\n";
  if (!event.id.empty()) out += "id: " + single_line(event.id) + "\n";
  if (event.retry_ms) out += "retry: " + std::to_string(*event.retry_ms) + "\n";
  size_t start = 0;
  while (true) {
    size_t end = event.data.find('\n', start);
    std::string_view line =
        std::string_view(event.data)
            .substr(start, end == std::string::npos ? std::string::npos : end - start);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    out += "data: ";
    out += line;
    out += '\n';
    if (end == std::string::npos) break;
    start = end + 1;
  }
  out += '\n';
  return out;
}

HandlerRef::~HandlerRef() {
  exchange_->abandon();
}

bool EventStream::send_event(const SseEvent& event) const {
  return ref_ != nullptr && ref_->exchange().push_stream_bytes(format_sse_event(event));
}

bool EventStream::send_raw(std::string_view bytes) const {
  return ref_ != nullptr && ref_->exchange().push_stream_bytes(bytes);
}

void EventStream::close() const {
  if (ref_ != nullptr) ref_->exchange().close_stream();
}

bool EventStream::is_open() const {
  return ref_ != nullptr && ref_->exchange().stream_open();
}

void Responder::send(HttpResponse response) const {
  if (ref_ != nullptr) ref_->exchange().respond(std::move(response));
}

EventStream Responder::start_stream(StreamHead head) const {
  if (ref_ == nullptr || !ref_->exchange().start_stream(std::move(head))) return EventStream();
  return EventStream(ref_);
}

void Responder::on_cancel(CancelCallback callback) const {
  if (ref_ != nullptr) ref_->exchange().add_cancel_callback(std::move(callback));
}

void Responder::on_deadline(std::chrono::milliseconds after, DeadlineCallback fire) const {
  if (ref_ != nullptr) {
    ref_->exchange().set_deadline(Exchange::Clock::now() + after, std::move(fire));
  }
}

bool Responder::cancelled() const {
  return ref_ == nullptr || ref_->exchange().cancelled();
}

const std::string& Responder::request_id() const {
  static const std::string kNone;
  return ref_ == nullptr ? kNone : ref_->exchange().request_id();
}

// ---------------------------------------------------------------------------------------
// Exchange

Exchange::Exchange(std::string request_id, std::function<void()> wake, size_t max_queued_bytes)
    : request_id_(std::move(request_id)),
      wake_(std::move(wake)),
      max_queued_bytes_(max_queued_bytes) {}

Exchange::~Exchange() = default;

Responder Exchange::make_responder(const std::shared_ptr<Exchange>& exchange) {
  auto ref = std::make_shared<HandlerRef>(exchange);
  exchange->handler_ref_ = ref;
  return Responder(std::move(ref));
}

Responder Exchange::responder_for_callback() const {
  return Responder(handler_ref_.lock());
}

void Exchange::respond(HttpResponse response) {
  {
    MutexLock lock(mu_);
    if (phase_ != Phase::kPending || cancelled_ == CancelReason::kClientGone) return;
    answer_ = Answer{std::move(response), std::nullopt};
    phase_ = Phase::kAnswered;
  }
  wake_();
}

bool Exchange::start_stream(StreamHead head) {
  {
    MutexLock lock(mu_);
    if (phase_ != Phase::kPending || cancelled_) return false;
    answer_ = Answer{std::nullopt, std::move(head)};
    phase_ = Phase::kStreaming;
  }
  wake_();
  return true;
}

bool Exchange::push_stream_bytes(std::string_view bytes) {
  bool accepted = false;
  {
    MutexLock lock(mu_);
    if (phase_ != Phase::kStreaming || stream_closed_ || cancelled_ || overflowed_) return false;
    if (queued_bytes_.size() + bytes.size() > max_queued_bytes_) {
      overflowed_ = true;  // the session closes the connection: the client is too slow
    } else {
      queued_bytes_ += bytes;
      accepted = true;
    }
  }
  wake_();
  return accepted;
}

void Exchange::close_stream() {
  {
    MutexLock lock(mu_);
    if (phase_ != Phase::kStreaming || stream_closed_) return;
    stream_closed_ = true;
  }
  wake_();
}

bool Exchange::stream_open() const {
  MutexLock lock(mu_);
  return phase_ == Phase::kStreaming && !stream_closed_ && !cancelled_ && !overflowed_;
}

void Exchange::add_cancel_callback(Responder::CancelCallback callback) {
  std::optional<CancelReason> reason;
  {
    MutexLock lock(mu_);
    if (phase_ == Phase::kFinished) return;  // dropped (outside the lock) on return
    reason = cancelled_;
    if (!reason) {
      cancel_callbacks_.push_back(std::move(callback));
      return;
    }
  }
  callback(*reason, responder_for_callback());
}

void Exchange::set_deadline(Clock::time_point when, Responder::DeadlineCallback fire) {
  Responder::DeadlineCallback previous;
  {
    MutexLock lock(mu_);
    if (phase_ != Phase::kPending) return;
    deadline_ = when;
    previous = std::exchange(deadline_callback_, std::move(fire));
  }
  wake_();
}

bool Exchange::cancelled() const {
  MutexLock lock(mu_);
  return cancelled_.has_value();
}

void Exchange::abandon() {
  {
    MutexLock lock(mu_);
    if (phase_ == Phase::kPending) {
      answer_ = Answer{HttpResponse::error(internal_error("the request handler did not answer")),
                       std::nullopt};
      phase_ = Phase::kAnswered;
    } else if (phase_ == Phase::kStreaming) {
      stream_closed_ = true;
    } else {
      return;
    }
  }
  wake_();
}

std::optional<Exchange::Answer> Exchange::take_answer() {
  MutexLock lock(mu_);
  if (!answer_) return std::nullopt;
  std::optional<Answer> out = std::move(answer_);
  answer_.reset();
  return out;
}

Exchange::StreamUpdate Exchange::take_stream_update() {
  MutexLock lock(mu_);
  StreamUpdate update;
  update.bytes.swap(queued_bytes_);
  update.closed = stream_closed_;
  update.overflowed = overflowed_;
  return update;
}

std::optional<Exchange::Clock::time_point> Exchange::deadline() const {
  MutexLock lock(mu_);
  if (phase_ != Phase::kPending) return std::nullopt;
  return deadline_;
}

void Exchange::fire_deadline_if_due(Clock::time_point now) {
  Responder::DeadlineCallback fire;
  {
    MutexLock lock(mu_);
    if (phase_ != Phase::kPending || !deadline_ || now < *deadline_) return;
    deadline_.reset();
    fire = std::move(deadline_callback_);
    deadline_callback_ = nullptr;
  }
  if (fire) fire(responder_for_callback());
}

void Exchange::cancel(CancelReason reason) {
  std::vector<Responder::CancelCallback> callbacks;
  {
    MutexLock lock(mu_);
    if (cancelled_ || phase_ == Phase::kFinished) return;
    cancelled_ = reason;
    callbacks.swap(cancel_callbacks_);
  }
  Responder responder = responder_for_callback();
  for (auto& callback : callbacks)
    callback(reason, responder);
}

void Exchange::finish() {
  std::vector<Responder::CancelCallback> callbacks;
  Responder::DeadlineCallback fire;
  {
    MutexLock lock(mu_);
    phase_ = Phase::kFinished;
    callbacks.swap(cancel_callbacks_);
    fire = std::move(deadline_callback_);
    deadline_callback_ = nullptr;
    deadline_.reset();
    answer_.reset();
    queued_bytes_.clear();
  }
  // `callbacks` and `fire` are destroyed here, without the lock.
}

}  // namespace kforge::frontends::http
