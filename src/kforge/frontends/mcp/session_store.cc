#include "kforge/frontends/mcp/session_store.h"

#include <vector>

#include "kforge/common/log.h"
#include "kforge/common/random.h"

namespace kforge::frontends::mcp {

SessionStore::SessionStore(Options options) : options_(std::move(options)) {}

SessionStore::~SessionStore() {
  std::map<std::string, std::shared_ptr<Session>> sessions;
  {
    std::lock_guard lock(mu_);
    sessions.swap(sessions_);
  }
  for (auto& [id, session] : sessions)
    session->close();
}

std::chrono::steady_clock::time_point SessionStore::now() const {
  return options_.clock ? options_.clock() : std::chrono::steady_clock::now();
}

bool SessionStore::expired(const Session& session,
                           std::chrono::steady_clock::time_point now) const {
  return session.idle() && now - session.last_active() > options_.idle_ttl;
}

std::vector<std::shared_ptr<Session>> SessionStore::sweep_locked(
    std::chrono::steady_clock::time_point now) {
  std::vector<std::shared_ptr<Session>> ended;
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    if (expired(*it->second, now)) {
      ended.push_back(std::move(it->second));
      it = sessions_.erase(it);
    } else {
      ++it;
    }
  }
  if (sessions_.size() < options_.max_sessions) return ended;
  auto lru = sessions_.end();
  for (auto it = sessions_.begin(); it != sessions_.end(); ++it) {
    if (!it->second->idle()) continue;
    if (lru == sessions_.end() || it->second->last_active() < lru->second->last_active()) lru = it;
  }
  if (lru != sessions_.end()) {
    KF_LOG_INFO("mcp: {} sessions open; evicting the least recently used idle one, {}",
                sessions_.size(), lru->first);
    ended.push_back(std::move(lru->second));
    sessions_.erase(lru);
  }
  return ended;
}

StatusOr<std::shared_ptr<Session>> SessionStore::create() {
  const auto t = now();
  std::vector<std::shared_ptr<Session>> ended;
  std::shared_ptr<Session> session;
  {
    std::lock_guard lock(mu_);
    ended = sweep_locked(t);
    if (sessions_.size() < options_.max_sessions) {
      std::string id = random_hex(16);
      while (sessions_.count(id) != 0)
        id = random_hex(16);
      session = std::make_shared<Session>(id);
      session->touch(t);
      sessions_.emplace(std::move(id), session);
    }
  }
  for (auto& s : ended)
    s->close();
  if (!session) {
    return Status(ErrorCode::kResourceExhausted, "too many MCP sessions are busy (" +
                                                     std::to_string(options_.max_sessions) +
                                                     "); retry later");
  }
  return session;
}

StatusOr<std::shared_ptr<Session>> SessionStore::find(const std::string& id) {
  const auto t = now();
  std::shared_ptr<Session> session;
  {
    std::lock_guard lock(mu_);
    auto it = sessions_.find(id);
    if (it != sessions_.end()) {
      if (expired(*it->second, t)) {
        session = std::move(it->second);
        sessions_.erase(it);
      } else {
        it->second->touch(t);
        return it->second;
      }
    }
  }
  if (session) session->close();
  return not_found("MCP session '" + id + "' is unknown or has ended; send initialize again");
}

bool SessionStore::remove(const std::string& id) {
  std::shared_ptr<Session> session;
  {
    std::lock_guard lock(mu_);
    auto it = sessions_.find(id);
    if (it == sessions_.end()) return false;
    session = std::move(it->second);
    sessions_.erase(it);
  }
  session->close();
  return true;
}

size_t SessionStore::size() const {
  std::lock_guard lock(mu_);
  return sessions_.size();
}

}  // namespace kforge::frontends::mcp
