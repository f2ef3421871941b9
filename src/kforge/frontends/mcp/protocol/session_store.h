// SessionStore: the live Streamable HTTP sessions by Mcp-Session-Id.
//
// Ids are 128 random bits from the kernel's CSPRNG as 32 lowercase hex characters (visible
// ASCII, unguessable). Sessions expire after `idle_ttl` without a request while idle (no
// request in flight, no open GET stream); the default is long (24 h) because most clients do
// not re-initialize after a 404 (Claude Code, the Python SDK, mcp-remote): an evicted session
// means tools stop working until the user reconnects.
//
// Two kinds of session, so that unauthenticated `initialize` floods cannot push out real ones:
// - pending: created by `initialize`, not used since. At most `max_pending_sessions`; a new
//   one past that replaces the oldest pending session. They expire after `pending_ttl`.
// - established: used at least once after `initialize` (find() succeeded: the client sent
//   notifications/initialized, a request or a GET). Never evicted to make room; they end by
//   DELETE or expiry. At `max_sessions` established sessions, initialize is refused
//   (kUnavailable, HTTP 503) until some end.
// Per client (Session::client(), e.g. "peer 10.0.0.7"), at most `max_sessions_per_client`
// sessions of both kinds: past that the client's oldest pending session makes room, or, when
// it has none, initialize is refused (kResourceExhausted, HTTP 429).
//
// A deleted (DELETE /mcp) or expired id is unknown afterwards: find() says kNotFound (404).
//
// Thread-safety: every method is thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kforge/common/status.h"
#include "kforge/common/thread_annotations.h"
#include "kforge/frontends/mcp/protocol/session.h"

namespace kforge::frontends::mcp {

class SessionStore {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;

  struct Options {
    std::chrono::seconds idle_ttl{std::chrono::hours(24)};
    std::chrono::seconds pending_ttl{std::chrono::minutes(10)};
    size_t max_sessions = 10000;            // established
    size_t max_pending_sessions = 1000;     // initialized but never used
    size_t max_sessions_per_client = 5000;  // both kinds
    Clock clock;                            // empty: std::chrono::steady_clock::now
  };

  explicit SessionStore(Options options);
  ~SessionStore();  // closes every session

  // A new (pending) session for `client` acting for `owner`, with a fresh id; expired
  // sessions are swept first. kUnavailable / kResourceExhausted when full (see above), naming
  // the limit.
  StatusOr<std::shared_ptr<Session>> create(const std::string& client = {},
                                            const SessionOwner& owner = {});
  // The live session with `id`, marked active (and established) now. kNotFound when unknown,
  // deleted or expired, and (when `as` is given) when it belongs to another owner: that
  // answer is the same as for an unknown id, and the session is left untouched.
  StatusOr<std::shared_ptr<Session>> find(const std::string& id, const SessionOwner* as = nullptr);
  // Ends the session (DELETE); false when unknown (or, when `as` is given, another owner's).
  bool remove(const std::string& id, const SessionOwner* as = nullptr);
  size_t size() const;
  size_t pending() const;

 private:
  struct Entry {
    std::shared_ptr<Session> session;
    bool established = false;
    uint64_t created = 0;  // creation order: the oldest pending session goes first
  };
  using Map = std::map<std::string, Entry>;

  std::chrono::steady_clock::time_point now() const;
  bool expired(const Entry& entry, std::chrono::steady_clock::time_point now) const;
  // Removes the entry, keeping the counts; returns its session for closing outside the lock.
  std::shared_ptr<Session> erase_locked(Map::iterator it) REQUIRES(mu_);
  // The oldest pending session (of `client` when given), or end().
  Map::iterator oldest_pending_locked(const std::string* client) REQUIRES(mu_);
  // Makes room for a session of `client`: sweeps expired sessions and evicts pending ones
  // as the limits say. Sessions to close are appended to `ended`.
  Status make_room_locked(const std::string& client, std::chrono::steady_clock::time_point now,
                          std::vector<std::shared_ptr<Session>>& ended) REQUIRES(mu_);

  const Options options_;
  mutable Mutex mu_;
  Map sessions_ GUARDED_BY(mu_);
  size_t pending_ GUARDED_BY(mu_) = 0;
  uint64_t created_ GUARDED_BY(mu_) = 0;                      // sessions ever created
  std::map<std::string, size_t> per_client_ GUARDED_BY(mu_);  // sessions of each client
};

}  // namespace kforge::frontends::mcp
