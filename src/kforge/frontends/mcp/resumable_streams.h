// Internal to the Streamable HTTP transport: resumable event streams of 2025-11-25 sessions
// (the 2025-11-25 transport's "Resumability and Redelivery"; removed at 2026-07-28).
//
// Every event of a session's POST stream gets an id "<stream>-<seq>" (<stream> unique in the
// endpoint, <seq> counting from 1), and the stream opens with a priming event (an id, empty
// data and a `retry` hint). The events are kept, so when the connection drops, or the server
// closes the stream on purpose (ReplyChannel::close_for_polling), the client reconnects with
// GET + `Last-Event-ID` and receives what it missed of that stream, then the rest of it live,
// ending with the response. Only the session that owns a stream may resume it.
//
// Bounds: each stream keeps its last kMaxEvents events (a resume from before them is refused
// rather than silently incomplete), a stream whose response went out on a live connection
// keeps none, and the endpoint keeps the last kMaxStreams streams, dropping finished ones
// first.
//
// Thread-safety: all methods are thread-safe.
#pragma once

#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>

#include "kforge/common/json.h"
#include "kforge/common/status.h"
#include "kforge/common/thread_annotations.h"
#include "kforge/frontends/http/responder.h"

namespace kforge::frontends::mcp {

class StreamLog {
 public:
  static constexpr size_t kMaxEvents = 1024;
  static constexpr int kRetryMs = 1000;

  StreamLog(std::string session_id, uint64_t number)
      : session_id_(std::move(session_id)), number_(number) {}

  const std::string& session_id() const { return session_id_; }

  // Attaches the POST's stream and sends the priming event.
  void start(http::EventStream stream);
  // Records `message` and sends it when a stream is attached.
  void send(const Json& message);
  // Records and sends the response, then closes the stream: nothing follows.
  void finish(const Json& response);
  // Closes the attached stream (the client resumes); false when none is attached.
  bool detach();
  // Closes the attached stream without a response (the request was cancelled).
  void abandon();
  // Whether the events after `after_seq` are all still kept.
  bool keeps(uint64_t after_seq) const;
  // Replays the events after `after_seq` on `stream` and attaches it (closing it at once when
  // the stream already finished); returns the attachment's number for forget(). kNotFound
  // when those events are no longer kept.
  StatusOr<uint64_t> resume(http::EventStream stream, uint64_t after_seq);
  // Detaches the stream attached by resume() as `attachment`, if it still is (its client went
  // away).
  void forget(uint64_t attachment);
  bool finished() const;

 private:
  http::SseEvent event_locked(uint64_t seq, const std::string& data) const REQUIRES(mu_);

  const std::string session_id_;
  const uint64_t number_;
  mutable Mutex mu_;
  std::deque<std::pair<uint64_t, std::string>> events_ GUARDED_BY(mu_);
  uint64_t next_seq_ GUARDED_BY(mu_) = 1;
  std::optional<http::EventStream> sink_ GUARDED_BY(mu_);
  uint64_t attachment_ GUARDED_BY(mu_) = 0;  // counts attaches
  bool finished_ GUARDED_BY(mu_) = false;
};

class ResumableStreams {
 public:
  static constexpr size_t kMaxStreams = 1024;

  // A new stream of `session_id`.
  std::shared_ptr<StreamLog> open(const std::string& session_id);
  // The stream an event id of `session_id` belongs to, and the event's sequence number;
  // kNotFound for an id of no kept stream (or of another session), kInvalidArgument for a
  // malformed one.
  StatusOr<std::pair<std::shared_ptr<StreamLog>, uint64_t>> find(const std::string& session_id,
                                                                 const std::string& event_id);

 private:
  Mutex mu_;
  uint64_t next_number_ GUARDED_BY(mu_) = 1;
  std::map<uint64_t, std::shared_ptr<StreamLog>> streams_ GUARDED_BY(mu_);
};

}  // namespace kforge::frontends::mcp
