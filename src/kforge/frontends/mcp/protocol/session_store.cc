#include "kforge/frontends/mcp/protocol/session_store.h"

#include <vector>

#include "kforge/common/log.h"
#include "kforge/common/random.h"

namespace kforge::frontends::mcp {

SessionStore::SessionStore(Options options) : options_(std::move(options)) {}

SessionStore::~SessionStore() {
  Map sessions;
  {
    MutexLock lock(mu_);
    sessions.swap(sessions_);
    pending_ = 0;
    per_client_.clear();
  }
  for (auto& [id, entry] : sessions)
    entry.session->close();
}

std::chrono::steady_clock::time_point SessionStore::now() const {
  return options_.clock ? options_.clock() : std::chrono::steady_clock::now();
}

bool SessionStore::expired(const Entry& entry, std::chrono::steady_clock::time_point now) const {
  const auto ttl = entry.established ? options_.idle_ttl : options_.pending_ttl;
  return entry.session->idle() && now - entry.session->last_active() > ttl;
}

std::shared_ptr<Session> SessionStore::erase_locked(Map::iterator it) {
  std::shared_ptr<Session> session = std::move(it->second.session);
  if (!it->second.established) --pending_;
  if (auto c = per_client_.find(session->client()); c != per_client_.end() && --c->second == 0) {
    per_client_.erase(c);
  }
  sessions_.erase(it);
  return session;
}

SessionStore::Map::iterator SessionStore::oldest_pending_locked(const std::string* client) {
  auto oldest = sessions_.end();
  for (auto it = sessions_.begin(); it != sessions_.end(); ++it) {
    const Entry& e = it->second;
    if (e.established || !e.session->idle()) continue;
    if (client != nullptr && e.session->client() != *client) continue;
    if (oldest == sessions_.end() || e.created < oldest->second.created) oldest = it;
  }
  return oldest;
}

Status SessionStore::make_room_locked(const std::string& client,
                                      std::chrono::steady_clock::time_point t,
                                      std::vector<std::shared_ptr<Session>>& ended) {
  for (auto it = sessions_.begin(); it != sessions_.end();) {
    if (expired(it->second, t)) {
      auto next = std::next(it);
      ended.push_back(erase_locked(it));
      it = next;
    } else {
      ++it;
    }
  }
  if (sessions_.size() - pending_ >= options_.max_sessions) {
    return unavailable("too many MCP sessions are open (" +
                       std::to_string(sessions_.size() - pending_) +
                       ", --mcp-max-sessions); retry later, or end unused sessions with DELETE");
  }
  auto mine = per_client_.find(client);
  if (mine != per_client_.end() && mine->second >= options_.max_sessions_per_client) {
    auto victim = oldest_pending_locked(&client);
    if (victim == sessions_.end()) {
      return Status(ErrorCode::kResourceExhausted,
                    "client '" + client + "' has " + std::to_string(mine->second) +
                        " MCP sessions open (--mcp-max-sessions-per-client " +
                        std::to_string(options_.max_sessions_per_client) +
                        "); end unused ones with DELETE");
    }
    ended.push_back(erase_locked(victim));
  }
  if (pending_ >= options_.max_pending_sessions) {
    auto victim = oldest_pending_locked(nullptr);
    if (victim == sessions_.end()) {
      return unavailable(
          "too many MCP sessions are being initialized (--mcp-max-pending-sessions " +
          std::to_string(options_.max_pending_sessions) + "); retry later");
    }
    KF_LOG_DEBUG("mcp: {} sessions initialized but never used; dropping the oldest, {}", pending_,
                 victim->first);
    ended.push_back(erase_locked(victim));
  }
  return Status::ok();
}

StatusOr<std::shared_ptr<Session>> SessionStore::create(const std::string& client,
                                                        const SessionOwner& owner) {
  const auto t = now();
  std::vector<std::shared_ptr<Session>> ended;
  std::shared_ptr<Session> session;
  Status room;
  {
    MutexLock lock(mu_);
    room = make_room_locked(client, t, ended);
    if (room.is_ok()) {
      std::string id = random_hex(16);
      while (sessions_.count(id) != 0)
        id = random_hex(16);
      session = std::make_shared<Session>(id, client, owner);
      session->touch(t);
      sessions_.emplace(std::move(id), Entry{session, false, ++created_});
      ++pending_;
      ++per_client_[client];
    }
  }
  for (auto& s : ended)
    s->close();
  if (!room.is_ok()) return room;
  return session;
}

StatusOr<std::shared_ptr<Session>> SessionStore::find(const std::string& id,
                                                      const SessionOwner* as) {
  const auto t = now();
  std::shared_ptr<Session> session;
  {
    MutexLock lock(mu_);
    auto it = sessions_.find(id);
    if (it != sessions_.end() && as != nullptr && it->second.session->owner() != *as) {
      it = sessions_.end();
    }
    if (it != sessions_.end()) {
      if (expired(it->second, t)) {
        session = erase_locked(it);
      } else {
        if (!it->second.established) {
          it->second.established = true;
          --pending_;
        }
        it->second.session->touch(t);
        return it->second.session;
      }
    }
  }
  if (session) session->close();
  return not_found("MCP session '" + id + "' is unknown or has ended; send initialize again");
}

bool SessionStore::remove(const std::string& id, const SessionOwner* as) {
  std::shared_ptr<Session> session;
  {
    MutexLock lock(mu_);
    auto it = sessions_.find(id);
    if (it == sessions_.end()) return false;
    if (as != nullptr && it->second.session->owner() != *as) return false;
    session = erase_locked(it);
  }
  session->close();
  return true;
}

size_t SessionStore::size() const {
  MutexLock lock(mu_);
  return sessions_.size();
}

size_t SessionStore::pending() const {
  MutexLock lock(mu_);
  return pending_;
}

}  // namespace kforge::frontends::mcp
