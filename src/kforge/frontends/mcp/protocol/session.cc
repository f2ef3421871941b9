#include "kforge/frontends/mcp/protocol/session.h"

#include "kforge/frontends/mcp/protocol/jsonrpc.h"

namespace kforge::frontends::mcp {

Session::Session(std::string id, std::string client, SessionOwner owner)
    : id_(std::move(id)),
      client_(std::move(client)),
      owner_(std::move(owner)),
      last_active_(std::chrono::steady_clock::now()) {}

Session::~Session() = default;

void Session::set_initialized(std::string version, Json client_capabilities, Json client_info) {
  MutexLock lock(mu_);
  version_ = std::move(version);
  client_capabilities_ =
      client_capabilities.is_object() ? std::move(client_capabilities) : Json::object();
  client_info_ = std::move(client_info);
}

std::shared_ptr<Session> Session::stateless(std::string client, SessionOwner owner,
                                            std::string version, Json client_capabilities,
                                            Json client_info, std::optional<LogLevel> log_level) {
  auto session = std::make_shared<Session>(std::string(), std::move(client), std::move(owner));
  session->stateless_ = true;
  session->set_initialized(std::move(version), std::move(client_capabilities),
                           std::move(client_info));
  MutexLock lock(session->mu_);
  session->log_level_ = log_level;
  return session;
}

std::optional<std::string> Session::protocol_version() const {
  MutexLock lock(mu_);
  return version_;
}

std::string Session::effective_version() const {
  MutexLock lock(mu_);
  return version_.value_or(std::string(kLatestProtocolVersion));
}

bool Session::client_has_capability(std::string_view name) const {
  MutexLock lock(mu_);
  auto it = client_capabilities_.find(name);
  return it != client_capabilities_.end() && it->is_object();
}

std::string Session::client_name() const {
  MutexLock lock(mu_);
  if (!client_info_.is_object()) return "";
  auto text = [&](const char* key) REQUIRES(mu_) {
    auto it = client_info_.find(key);
    return it != client_info_.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  const std::string name = text("name");
  const std::string version = text("version");
  return version.empty() || name.empty() ? name : name + " " + version;
}

void Session::mark_initialized_notification() {
  MutexLock lock(mu_);
  initialized_notification_ = true;
}

void Session::set_log_level(LogLevel level) {
  MutexLock lock(mu_);
  log_level_ = level;
}

bool Session::log_enabled(LogLevel level) const {
  MutexLock lock(mu_);
  // A stateless request without _meta logLevel gets no log messages at all.
  if (stateless_ && !log_level_) return false;
  return level >= log_level_.value_or(LogLevel::kWarning);
}

Status Session::begin_request(const Json& id, std::shared_ptr<InFlightRequest> context) {
  MutexLock lock(mu_);
  if (closed_) return unavailable("the MCP session has ended");
  auto [it, inserted] = in_flight_.emplace(jsonrpc::id_key(id), std::move(context));
  if (!inserted) {
    return Status(ErrorCode::kAlreadyExists,
                  "request id " + id.dump() + " is already in use by a request in flight");
  }
  return Status::ok();
}

void Session::end_request(const Json& id) {
  std::shared_ptr<InFlightRequest> ended;  // released outside the lock
  MutexLock lock(mu_);
  auto it = in_flight_.find(jsonrpc::id_key(id));
  if (it == in_flight_.end()) return;
  ended = std::move(it->second);
  in_flight_.erase(it);
}

std::shared_ptr<InFlightRequest> Session::find_request(const Json& id) const {
  MutexLock lock(mu_);
  auto it = in_flight_.find(jsonrpc::id_key(id));
  return it == in_flight_.end() ? nullptr : it->second;
}

size_t Session::requests_in_flight() const {
  MutexLock lock(mu_);
  return in_flight_.size();
}

Json Session::expect_client_response(ClientResponseCallback done) {
  Json id;
  {
    MutexLock lock(mu_);
    id = "kforge-" + std::to_string(next_client_request_id_++);
    if (!closed_) {
      awaiting_client_.emplace(jsonrpc::id_key(id), std::move(done));
      return id;
    }
  }
  done(unavailable("the MCP session has ended"));
  return id;
}

bool Session::deliver_client_response(const Json& id, StatusOr<Json> result) {
  ClientResponseCallback done;
  {
    MutexLock lock(mu_);
    auto it = awaiting_client_.find(jsonrpc::id_key(id));
    if (it == awaiting_client_.end()) return false;
    done = std::move(it->second);
    awaiting_client_.erase(it);
  }
  done(std::move(result));
  return true;
}

void Session::abandon_client_request(const Json& id, const Status& why) {
  deliver_client_response(id, why);
}

std::shared_ptr<MessageSink> Session::set_standalone_sink(std::shared_ptr<MessageSink> sink) {
  MutexLock lock(mu_);
  if (closed_) return sink;  // the caller closes it: a closed session takes no stream
  return std::exchange(standalone_, std::move(sink));
}

void Session::clear_standalone_sink(const MessageSink* sink) {
  std::shared_ptr<MessageSink> old;
  MutexLock lock(mu_);
  if (standalone_.get() == sink) old = std::move(standalone_);
}

bool Session::has_standalone_sink() const {
  MutexLock lock(mu_);
  return standalone_ != nullptr;
}

bool Session::send_standalone(const Json& message) {
  std::shared_ptr<MessageSink> sink;
  {
    MutexLock lock(mu_);
    sink = standalone_;
  }
  return sink != nullptr && sink->send(message);
}

void Session::touch(std::chrono::steady_clock::time_point now) {
  MutexLock lock(mu_);
  if (now > last_active_) last_active_ = now;
}

std::chrono::steady_clock::time_point Session::last_active() const {
  MutexLock lock(mu_);
  return last_active_;
}

bool Session::idle() const {
  MutexLock lock(mu_);
  return in_flight_.empty() && awaiting_client_.empty() && standalone_ == nullptr;
}

void Session::close() {
  // A request in flight holds its session (RequestContext::session_): kept here after the end,
  // the two would hold each other forever. Released outside the lock, last.
  std::map<std::string, std::shared_ptr<InFlightRequest>> in_flight;
  std::shared_ptr<MessageSink> sink;
  std::map<std::string, ClientResponseCallback> awaiting;
  {
    MutexLock lock(mu_);
    if (closed_) return;
    closed_ = true;
    sink = std::move(standalone_);
    awaiting.swap(awaiting_client_);
    in_flight.swap(in_flight_);
  }
  if (sink) sink->close();
  for (auto& [key, done] : awaiting) {
    done(unavailable("the MCP session has ended"));
  }
}

bool Session::closed() const {
  MutexLock lock(mu_);
  return closed_;
}

}  // namespace kforge::frontends::mcp
