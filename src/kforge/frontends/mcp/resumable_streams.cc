#include "kforge/frontends/mcp/resumable_streams.h"

#include <charconv>

#include "kforge/common/error_mapping.h"

namespace kforge::frontends::mcp {
namespace {

std::optional<uint64_t> parse_u64(std::string_view text) {
  uint64_t value = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || text.empty()) return std::nullopt;
  return value;
}

}  // namespace

http::SseEvent StreamLog::event_locked(uint64_t seq, const std::string& data) const {
  return http::SseEvent::of(data, data.empty() ? std::string() : std::string("message"),
                            std::to_string(number_) + "-" + std::to_string(seq));
}

void StreamLog::start(http::EventStream stream) {
  MutexLock lock(mu_);
  sink_ = std::move(stream);
  ++attachment_;
  // The priming event: an id to resume from before any message, and the retry hint.
  const uint64_t seq = next_seq_++;
  events_.emplace_back(seq, std::string());
  http::SseEvent priming = event_locked(seq, std::string());
  priming.retry_ms = kRetryMs;
  sink_->send_event(priming);
}

void StreamLog::send(const Json& message) {
  MutexLock lock(mu_);
  if (finished_) return;
  const uint64_t seq = next_seq_++;
  std::string data = http::dump_json(message);
  // A stream that refuses the event is gone (its client left): detach it, keep the events.
  if (sink_ && !sink_->send_event(event_locked(seq, data))) sink_.reset();
  events_.emplace_back(seq, std::move(data));
  while (events_.size() > kMaxEvents)
    events_.pop_front();
}

void StreamLog::finish(const Json& response) {
  send(response);
  MutexLock lock(mu_);
  finished_ = true;
  if (sink_) {
    // Delivered on a live stream: nothing is left to resume, so the events are not kept.
    sink_->close();
    events_.clear();
  }
  sink_.reset();
}

bool StreamLog::detach() {
  MutexLock lock(mu_);
  if (!sink_ || finished_) return false;
  // The retry hint before a server-side close says when to come back.
  sink_->send_raw("retry: " + std::to_string(kRetryMs) + "\n\n");
  sink_->close();
  sink_.reset();
  return true;
}

void StreamLog::abandon() {
  MutexLock lock(mu_);
  finished_ = true;
  if (sink_) sink_->close();
  sink_.reset();
}

bool StreamLog::keeps(uint64_t after_seq) const {
  MutexLock lock(mu_);
  return events_.empty() || after_seq + 1 >= events_.front().first;
}

StatusOr<uint64_t> StreamLog::resume(http::EventStream stream, uint64_t after_seq) {
  MutexLock lock(mu_);
  if (!events_.empty() && after_seq + 1 < events_.front().first) {
    return not_found("events after " + std::to_string(number_) + "-" + std::to_string(after_seq) +
                     " are no longer kept");
  }
  if (sink_) sink_->close();  // a second resume replaces the first
  for (const auto& [seq, data] : events_) {
    if (seq > after_seq && !data.empty()) stream.send_event(event_locked(seq, data));
  }
  ++attachment_;
  if (finished_) {
    stream.close();
    return attachment_;
  }
  sink_ = std::move(stream);
  return attachment_;
}

void StreamLog::forget(uint64_t attachment) {
  MutexLock lock(mu_);
  if (attachment == attachment_) sink_.reset();
}

bool StreamLog::finished() const {
  MutexLock lock(mu_);
  return finished_;
}

std::shared_ptr<StreamLog> ResumableStreams::open(const std::string& session_id) {
  MutexLock lock(mu_);
  const uint64_t number = next_number_++;
  auto log = std::make_shared<StreamLog>(session_id, number);
  if (streams_.size() >= kMaxStreams) {
    auto victim = streams_.begin();
    for (auto it = streams_.begin(); it != streams_.end(); ++it) {
      if (it->second->finished()) {
        victim = it;
        break;
      }
    }
    streams_.erase(victim);
  }
  streams_.emplace(number, log);
  return log;
}

StatusOr<std::pair<std::shared_ptr<StreamLog>, uint64_t>> ResumableStreams::find(
    const std::string& session_id, const std::string& event_id) {
  const size_t dash = event_id.find('-');
  auto number = parse_u64(std::string_view(event_id).substr(0, dash));
  auto seq = dash == std::string::npos ? std::nullopt
                                       : parse_u64(std::string_view(event_id).substr(dash + 1));
  if (!number || !seq) {
    return invalid_argument("'" + event_id + "' is not an event id of this server",
                            "Last-Event-ID");
  }
  MutexLock lock(mu_);
  auto it = streams_.find(*number);
  if (it == streams_.end() || it->second->session_id() != session_id) {
    return not_found("no stream of this session has event '" + event_id + "'");
  }
  return std::make_pair(it->second, *seq);
}

}  // namespace kforge::frontends::mcp
