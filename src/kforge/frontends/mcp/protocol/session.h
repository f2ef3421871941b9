// Session: the protocol state of one MCP client connection, whatever the transport (a
// Streamable HTTP session identified by Mcp-Session-Id, or the single stdio session).
//
// It holds what `initialize` negotiated (protocol version, client capabilities), the logging
// level, the requests in flight (so `notifications/cancelled` can find them), the requests the
// server sent to the client and awaits answers for (sampling, elicitation), and the channel
// for messages that belong to no request (the HTTP GET stream, or stdout).
//
// Thread-safety: every method is thread-safe. Callbacks run without the lock held.
#pragma once

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kforge/common/json.h"
#include "kforge/common/status.h"
#include "kforge/common/thread_annotations.h"
#include "kforge/frontends/mcp/protocol/protocol.h"

namespace kforge::frontends::mcp {

// The client key of the stdio transport's sessions (`kforge mcp`): the process's parent.
inline constexpr std::string_view kStdioClient = "stdio";

// A request in flight as the session sees it: what a client's notifications/cancelled names
// and stops. RequestContext (request_context.h, which depends on Session) implements it, so
// the session knows its requests without depending on that header.
class InFlightRequest {
 public:
  virtual ~InFlightRequest() = default;
  virtual const std::string& method() const = 0;
  // Stops the request: no response is sent. No-op once it has finished.
  virtual void cancel() = 0;
};

// Where messages go that belong to no request. send() returns false if the channel is gone.
class MessageSink {
 public:
  virtual ~MessageSink() = default;
  virtual bool send(const Json& message) = 0;
  // Ends the channel (e.g. closes the GET stream). Idempotent.
  virtual void close() = 0;
};

// On whose behalf a session's requests are made, as its transport authenticated them: labels
// the protocol only compares (what an owner may see is the server's business, not the
// protocol's). The default, empty owner is the anonymous one. Value type.
struct SessionOwner {
  std::string name;
  std::string role;
  bool operator==(const SessionOwner&) const = default;
};

class Session {
 public:
  using ClientResponseCallback = std::function<void(StatusOr<Json>)>;

  // `id` is the Mcp-Session-Id (empty for stdio); `client` who opened it (the key of
  // per-client limits: "peer <address>" over HTTP, "stdio"); `owner` on whose behalf: its
  // token's principal over HTTP, anonymous on stdio and without tokens. Only requests of that
  // owner may use the session, and its tools see that owner's jobs.
  explicit Session(std::string id, std::string client = {}, SessionOwner owner = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  const std::string& id() const { return id_; }
  const std::string& client() const { return client_; }
  const SessionOwner& owner() const { return owner_; }
  // True on stdio: the client talks through this process's stdin and stdout, so the
  // connection, and every answer the client waits for, ends with the process.
  bool ends_with_process() const { return client_ == kStdioClient; }

  // ---- lifecycle ----
  // Records the outcome of `initialize`.
  void set_initialized(std::string version, Json client_capabilities, Json client_info);
  // The negotiated version; nullopt until `initialize` was answered.
  std::optional<std::string> protocol_version() const;
  // The negotiated version, or the latest before initialize (for formatting replies).
  std::string effective_version() const;
  // True when the client declared capability `name` (e.g. "sampling", "elicitation").
  bool client_has_capability(std::string_view name) const;
  // The client's clientInfo as "name version" ("name" without a version; "" before
  // initialize or when it sent none), for logs.
  std::string client_name() const;
  void mark_initialized_notification();

  // ---- stateless (2026-07-28) requests ----
  // A request of the 2026-07-28 revision carries its context in params._meta: the transport
  // gives it a Session of its own, marked stateless. Such a session sends no server->client
  // requests (request_client fails at once), and logs only when the request set a logLevel.
  static std::shared_ptr<Session> stateless(std::string client, SessionOwner owner,
                                            std::string version, Json client_capabilities,
                                            Json client_info, std::optional<LogLevel> log_level);
  bool is_stateless() const { return stateless_; }

  // ---- logging/setLevel ----
  void set_log_level(LogLevel level);
  // Whether a notifications/message of `level` may be sent (at or above the set level;
  // before any setLevel, warning and above).
  bool log_enabled(LogLevel level) const;

  // ---- requests in flight ----
  // kAlreadyExists when a request with the same id is still in flight; kUnavailable once the
  // session has ended.
  Status begin_request(const Json& id, std::shared_ptr<InFlightRequest> context);
  void end_request(const Json& id);
  std::shared_ptr<InFlightRequest> find_request(const Json& id) const;
  size_t requests_in_flight() const;

  // ---- server -> client requests ----
  // Registers a request the server is about to send; returns its id. `done` is called once
  // with the client's result or an error (client error response, session closed).
  Json expect_client_response(ClientResponseCallback done);
  // Delivers a response message from the client; false if no request awaited it.
  bool deliver_client_response(const Json& id, StatusOr<Json> result);
  // Fails an awaited client request (e.g. its reply channel closed).
  void abandon_client_request(const Json& id, const Status& why);

  // ---- messages outside any request ----
  // Installs the channel; returns the previous one (the caller closes it).
  std::shared_ptr<MessageSink> set_standalone_sink(std::shared_ptr<MessageSink> sink);
  // Removes `sink` if it is still the installed one.
  void clear_standalone_sink(const MessageSink* sink);
  bool has_standalone_sink() const;
  // Sends on the standalone channel; false when there is none or it is gone.
  bool send_standalone(const Json& message);

  // ---- activity and end ----
  void touch(std::chrono::steady_clock::time_point now);
  std::chrono::steady_clock::time_point last_active() const;
  // No requests in flight, no awaited client responses and no open stream.
  bool idle() const;
  // Ends the session: closes the standalone channel and fails awaited client requests.
  // Requests in flight still answer on their own channels (a session end is not a cancel); the
  // session lets go of them (each holds the session until it answers).
  void close();
  bool closed() const;

 private:
  const std::string id_;
  const std::string client_;
  const SessionOwner owner_;
  bool stateless_ = false;  // set once, before the session is shared
  mutable Mutex mu_;
  std::optional<std::string> version_ GUARDED_BY(mu_);
  Json client_capabilities_ GUARDED_BY(mu_) = Json::object();
  Json client_info_ GUARDED_BY(mu_) = Json::object();
  bool initialized_notification_ GUARDED_BY(mu_) = false;
  std::optional<LogLevel> log_level_ GUARDED_BY(mu_);
  std::map<std::string, std::shared_ptr<InFlightRequest>> in_flight_ GUARDED_BY(mu_);
  std::map<std::string, ClientResponseCallback> awaiting_client_ GUARDED_BY(mu_);
  int64_t next_client_request_id_ GUARDED_BY(mu_) = 1;
  std::shared_ptr<MessageSink> standalone_ GUARDED_BY(mu_);
  std::chrono::steady_clock::time_point last_active_ GUARDED_BY(mu_);
  bool closed_ GUARDED_BY(mu_) = false;
};

}  // namespace kforge::frontends::mcp
