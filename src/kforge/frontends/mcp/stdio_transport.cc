#include "kforge/frontends/mcp/stdio_transport.h"

#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <cerrno>
#include <string_view>
#include <vector>

#include "kforge/common/log.h"
#include "kforge/frontends/http/http_message.h"
#include "kforge/frontends/mcp/protocol/batch.h"
#include "kforge/frontends/mcp/protocol/modern.h"

namespace kforge::frontends::mcp {
namespace {

// Stdio requests answer on the output, whatever they produce.
class StdioReplyChannel : public ReplyChannel {
 public:
  explicit StdioReplyChannel(std::shared_ptr<LineWriter> writer) : writer_(std::move(writer)) {}
  void send_related(const Json& message) override { writer_->send(message); }
  void send_response(const Json& response) override { writer_->send(response); }
  void abandon() override {}  // a cancelled request gets no response

 private:
  std::shared_ptr<LineWriter> writer_;
};

// The requests of one line (an object, or a batch array of them); nothing for a line that
// is not JSON or holds no request.
std::vector<Json> request_ids(std::string_view line) {
  std::vector<Json> ids;
  auto json = parse_json(line);
  if (!json.is_ok()) return ids;
  auto take = [&](const Json& m) {
    if (m.is_object() && m.contains("method") && m.contains("id") && !m["id"].is_null()) {
      ids.push_back(m["id"]);
    }
  };
  if (json->is_array()) {
    for (const auto& m : *json)
      take(m);
  } else {
    take(*json);
  }
  return ids;
}

}  // namespace

Status answer_requests_with_error(int in_fd, int out_fd, const std::string& why) {
  LineWriter writer(out_fd);
  std::string buffer;
  char chunk[65536];
  auto answer = [&](std::string_view line) {
    for (const Json& id : request_ids(line))
      writer.send(jsonrpc::make_error(id, jsonrpc::kInternalError, why));
  };
  while (true) {
    ssize_t n = ::read(in_fd, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno_error("reading MCP messages from stdin", errno);
    if (n == 0) break;
    buffer.append(chunk, static_cast<size_t>(n));
    for (size_t newline; (newline = buffer.find('\n')) != std::string::npos;) {
      answer(std::string_view(buffer).substr(0, newline));
      buffer.erase(0, newline + 1);
    }
    if (buffer.size() > (size_t{64} << 20)) buffer.clear();  // no request is that long
  }
  answer(buffer);
  return Status::ok();
}

bool LineWriter::send(const Json& message) {
  std::string line = http::dump_json(message);  // compact: no raw newline can appear
  line += '\n';
  MutexLock lock(mu_);
  if (broken_) return false;
  size_t written = 0;
  while (written < line.size()) {
    ssize_t n = ::write(fd_, line.data() + written, line.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      broken_ = true;
      KF_LOG_WARN("mcp stdio: cannot write to the client ({}); dropping output", errno);
      return false;
    }
    written += static_cast<size_t>(n);
  }
  return true;
}

StdioTransport::StdioTransport(const Dispatcher& dispatcher, int in_fd, int out_fd, Options options)
    : dispatcher_(dispatcher),
      in_fd_(in_fd),
      options_(options),
      writer_(std::make_shared<LineWriter>(out_fd)),
      session_(std::make_shared<Session>("", std::string(kStdioClient))) {
  session_->set_standalone_sink(writer_);
  if (::pipe2(wake_pipe_, O_CLOEXEC | O_NONBLOCK) != 0) {
    KF_LOG_WARN("mcp stdio: no stop pipe ({}); only end of input stops the server", errno);
  }
}

StdioTransport::~StdioTransport() {
  for (int fd : wake_pipe_) {
    if (fd >= 0) ::close(fd);
  }
}

void StdioTransport::stop() {
  if (wake_pipe_[1] < 0) return;
  char byte = 1;
  while (::write(wake_pipe_[1], &byte, 1) < 0 && errno == EINTR) {
  }
}

Status StdioTransport::run() {
  std::string buffer;
  bool skipping = false;  // inside an over-long line, dropping bytes until its newline
  char chunk[65536];
  while (true) {
    pollfd fds[2] = {{in_fd_, POLLIN, 0}, {wake_pipe_[0], POLLIN, 0}};
    int ready = ::poll(fds, wake_pipe_[0] >= 0 ? 2 : 1, -1);
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return errno_error("waiting for MCP messages on stdin", errno);
    if (fds[1].revents != 0) return Status::ok();
    ssize_t n = ::read(in_fd_, chunk, sizeof(chunk));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno_error("reading MCP messages from stdin", errno);
    if (n == 0) break;
    std::string_view data(chunk, static_cast<size_t>(n));
    while (!data.empty()) {
      size_t newline = data.find('\n');
      std::string_view piece = data.substr(0, newline);
      if (!skipping) buffer.append(piece);
      if (!skipping && buffer.size() > options_.max_message_bytes) {
        writer_->send(jsonrpc::make_error(nullptr, jsonrpc::kInvalidRequest,
                                          "message exceeds the limit of " +
                                              std::to_string(options_.max_message_bytes) +
                                              " bytes"));
        buffer.clear();
        skipping = true;
      }
      if (newline == std::string_view::npos) break;
      if (!skipping) handle_line(buffer);
      buffer.clear();
      skipping = false;
      data.remove_prefix(newline + 1);
    }
  }
  if (!skipping && buffer.find_first_not_of(" \t\r") != std::string::npos) handle_line(buffer);
  return Status::ok();
}

void StdioTransport::handle_line(std::string_view line) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (line.find_first_not_of(" \t") == std::string_view::npos) return;
  auto json = parse_json(line);
  if (!json.is_ok()) {
    writer_->send(jsonrpc::make_error(nullptr, jsonrpc::kParseError,
                                      "Parse error: " + json.status().message()));
    return;
  }
  if (json->is_array()) {
    if (Status s = check_batch(*json, session_->effective_version()); !s) {
      writer_->send(jsonrpc::make_error(nullptr, jsonrpc::kInvalidRequest, s.message()));
      return;
    }
    size_t expected = 0;
    std::vector<jsonrpc::Message> messages;
    std::vector<Json> errors;
    for (const Json& element : *json) {
      auto m = jsonrpc::classify(element);
      if (!m.is_ok()) {
        errors.push_back(jsonrpc::make_error(jsonrpc::readable_id(element),
                                             jsonrpc::kInvalidRequest, m.status().message()));
        ++expected;
        continue;
      }
      if (m->kind == jsonrpc::MessageKind::kRequest) ++expected;
      messages.push_back(std::move(m).value());
    }
    auto writer = writer_;
    auto batch = BatchCollector::create(
        expected,
        [writer](const Json& responses) {
          if (!responses.empty()) writer->send(responses);
        },
        [writer](const Json& related) { writer->send(related); });
    for (Json& e : errors)
      batch->add(std::move(e));
    for (const auto& m : messages) {
      dispatcher_.handle(session_, m,
                         m.kind == jsonrpc::MessageKind::kRequest ? batch->channel() : nullptr);
    }
    return;
  }
  auto message = jsonrpc::classify(*json);
  if (!message.is_ok()) {
    writer_->send(jsonrpc::make_error(jsonrpc::readable_id(*json), jsonrpc::kInvalidRequest,
                                      "Invalid Request: " + message.status().message()));
    return;
  }
  if (message->kind == jsonrpc::MessageKind::kNotification &&
      message->method == "notifications/cancelled" && cancel_stateless(*message)) {
    return;
  }
  std::shared_ptr<ReplyChannel> channel;
  if (message->kind == jsonrpc::MessageKind::kRequest) {
    channel = std::make_shared<StdioReplyChannel>(writer_);
    if (modern::claims_modern(*json)) return handle_stateless(*message, std::move(channel));
  }
  dispatcher_.handle(session_, *message, std::move(channel));
}

void StdioTransport::handle_stateless(const jsonrpc::Message& message,
                                      std::shared_ptr<ReplyChannel> channel) {
  auto refuse = [&](const modern::Rejection& r) {
    channel->send_response(jsonrpc::make_error(message.id, r.code, r.message, r.data));
  };
  if (auto bad = modern::check_meta_shape(message.params)) return refuse(*bad);
  const std::string version =
      message.params.at("_meta").at(std::string(modern::kMetaProtocolVersion)).get<std::string>();
  if (auto bad = modern::check_version(version)) return refuse(*bad);
  auto meta = modern::read_meta(message.params);
  if (!meta.is_ok()) {
    channel->send_response(
        jsonrpc::make_error(message.id, jsonrpc::kInvalidParams, meta.status().message()));
    return;
  }
  auto session = Session::stateless(std::string(kStdioClient), {}, meta->version,
                                    meta->client_capabilities, meta->client_info, meta->log_level);
  {
    MutexLock lock(stateless_mu_);
    for (auto it = stateless_.begin(); it != stateless_.end();) {
      it = it->second.expired() ? stateless_.erase(it) : std::next(it);
    }
    stateless_[jsonrpc::id_key(message.id)] = session;
  }
  dispatcher_.handle_stateless(session, message, std::move(channel));
}

bool StdioTransport::cancel_stateless(const jsonrpc::Message& notification) {
  const Json* id = jsonrpc::param(notification.params, "requestId");
  if (id == nullptr) return false;
  std::shared_ptr<Session> session;
  {
    MutexLock lock(stateless_mu_);
    auto it = stateless_.find(jsonrpc::id_key(*id));
    if (it == stateless_.end()) return false;
    session = it->second.lock();
    stateless_.erase(it);
  }
  if (session == nullptr) return false;
  if (auto ctx = session->find_request(*id)) ctx->cancel();
  return true;
}

}  // namespace kforge::frontends::mcp
