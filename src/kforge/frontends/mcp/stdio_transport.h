// The stdio transport: newline-delimited JSON-RPC on a pair of file descriptors (stdin and
// stdout of `kforge mcp`), one session for the process.
//
// - Each line is one message (or, in a 2025-03-26 session, a batch array). Every message
//   written is compact JSON on one line, flushed at once; nothing else is ever written to
//   the output (logs go to stderr).
// - The reader never waits for a tool: tools/call runs on the dispatcher's executor, so
//   requests are served concurrently and `notifications/cancelled` is read while a tool runs.
// - run() returns at end of input (the client closed stdin), on a read error, or after stop()
//   (e.g. from a signal-handling thread).
// - A request carrying the 2026-07-28 `_meta` claim (modern.h) is served statelessly, next to
//   the initialize-based session (a client may probe with server/discover first).
// - A line longer than `max_message_bytes` is skipped and answered with -32600 (id null);
//   invalid JSON with -32700.
//
// Example:
//   StdioTransport transport(dispatcher, STDIN_FILENO, STDOUT_FILENO, {});
//   Status s = transport.run();  // blocks until EOF
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <string>

#include "kforge/common/status.h"
#include "kforge/common/thread_annotations.h"
#include "kforge/frontends/mcp/protocol/dispatcher.h"
#include "kforge/frontends/mcp/protocol/session.h"

namespace kforge::frontends::mcp {

// Writes one JSON message per line to a file descriptor; thread-safe. After a write error
// (the reader went away) every later send returns false.
class LineWriter : public MessageSink {
 public:
  explicit LineWriter(int fd) : fd_(fd) {}
  bool send(const Json& message) override;
  void close() override {}

 private:
  const int fd_;
  Mutex mu_;
  bool broken_ GUARDED_BY(mu_) = false;
};

// For a server that cannot serve (its engine or configuration failed at start): answers
// every request read from `in_fd` (each line one message; a batch array's requests too) with
// a JSON-RPC internal error whose message is `why`, so the client shows the reason instead
// of "connection closed"; notifications and responses get nothing. Returns at end of input.
Status answer_requests_with_error(int in_fd, int out_fd, const std::string& why);

class StdioTransport {
 public:
  struct Options {
    size_t max_message_bytes = size_t{16} << 20;
  };

  StdioTransport(const Dispatcher& dispatcher, int in_fd, int out_fd, Options options);
  ~StdioTransport();
  StdioTransport(const StdioTransport&) = delete;
  StdioTransport& operator=(const StdioTransport&) = delete;

  // Serves until end of input or stop(). kIo for a read error.
  Status run();
  // Makes run() return soon; thread-safe, idempotent.
  void stop();

  const std::shared_ptr<Session>& session() const { return session_; }

 private:
  void handle_line(std::string_view line);
  // A request of revision 2026-07-28 (modern.h): served statelessly, next to the session.
  void handle_stateless(const jsonrpc::Message& message, std::shared_ptr<ReplyChannel> channel);
  // notifications/cancelled for a stateless request in flight; false when it names none.
  bool cancel_stateless(const jsonrpc::Message& notification);

  const Dispatcher& dispatcher_;
  const int in_fd_;
  const Options options_;
  const std::shared_ptr<LineWriter> writer_;
  const std::shared_ptr<Session> session_;
  // The stateless requests in flight (id key -> their one-request session), for cancels.
  Mutex stateless_mu_;
  std::map<std::string, std::weak_ptr<Session>> stateless_ GUARDED_BY(stateless_mu_);
  int wake_pipe_[2] = {-1, -1};  // stop() writes to [1]; run() polls [0]
};

}  // namespace kforge::frontends::mcp
