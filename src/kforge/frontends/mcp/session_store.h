// SessionStore: the live Streamable HTTP sessions by Mcp-Session-Id.
//
// Ids are 128 random bits from the kernel's CSPRNG as 32 lowercase hex characters (visible
// ASCII, unguessable). Sessions expire after `idle_ttl` without a request while idle (no
// request in flight, no open GET stream); the default is long (24 h) because most clients do
// not re-initialize after a 404 (Claude Code, the Python SDK, mcp-remote): an evicted session
// means tools stop working until the user reconnects. Past `max_sessions`, the least recently
// used idle session is evicted to make room; if none is idle, creation fails (kResourceExhausted).
//
// A deleted (DELETE /mcp) or expired id is unknown afterwards: find() says kNotFound (404).
//
// Thread-safety: every method is thread-safe.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "kforge/common/status.h"
#include "kforge/frontends/mcp/session.h"

namespace kforge::frontends::mcp {

class SessionStore {
 public:
  using Clock = std::function<std::chrono::steady_clock::time_point()>;

  struct Options {
    std::chrono::seconds idle_ttl{std::chrono::hours(24)};
    size_t max_sessions = 10000;
    Clock clock;  // empty: std::chrono::steady_clock::now
  };

  explicit SessionStore(Options options);
  ~SessionStore();  // closes every session

  // A new session with a fresh id (expired sessions are swept first).
  StatusOr<std::shared_ptr<Session>> create();
  // The live session with `id`, marked active now. kNotFound when unknown, deleted or expired.
  StatusOr<std::shared_ptr<Session>> find(const std::string& id);
  // Ends the session (DELETE); false when unknown.
  bool remove(const std::string& id);
  size_t size() const;

 private:
  std::chrono::steady_clock::time_point now() const;
  bool expired(const Session& session, std::chrono::steady_clock::time_point now) const;
  // Removes expired sessions (and, when full, the least recently used idle one) and returns
  // them for closing outside the lock.
  std::vector<std::shared_ptr<Session>> sweep_locked(std::chrono::steady_clock::time_point now);

  const Options options_;
  mutable std::mutex mu_;
  std::map<std::string, std::shared_ptr<Session>> sessions_;  // guarded by mu_
};

}  // namespace kforge::frontends::mcp
