// A deliberately small HTTP/1.1 client over a raw TCP socket, for tests of the HTTP server:
// it can send malformed or partial requests byte for byte and read responses, chunked
// streams and connection closes with timeouts. Header-only (tests/unit globs *_test.cc).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace kforge::testing {

struct RawResponse {
  int status = 0;
  std::map<std::string, std::string> headers;  // names lower-cased
  std::string body;

  std::string header(const std::string& name) const {
    auto it = headers.find(name);
    return it == headers.end() ? std::string() : it->second;
  }
};

class RawHttpClient {
 public:
  using Millis = std::chrono::milliseconds;

  explicit RawHttpClient(uint16_t port) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd_ < 0) throw std::runtime_error("socket() failed");
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(port);
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      ::close(fd_);
      throw std::runtime_error("connect() failed");
    }
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  }
  ~RawHttpClient() { close(); }
  RawHttpClient(const RawHttpClient&) = delete;
  RawHttpClient& operator=(const RawHttpClient&) = delete;

  void close() {
    if (fd_ >= 0) ::close(fd_);
    fd_ = -1;
  }

  // An abortive close: the server sees a reset, not an end of stream.
  void reset() {
    if (fd_ < 0) return;
    linger abort{1, 0};
    ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &abort, sizeof(abort));
    close();
  }

  // shutdown(SHUT_WR): the server reads end of stream; this side can still read.
  void shutdown_write() { ::shutdown(fd_, SHUT_WR); }

  // Writes all of `bytes`; false if the peer closed.
  bool send(std::string_view bytes) {
    while (!bytes.empty()) {
      ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  // Reads a status line and headers (an interim 100 Continue is returned like any head).
  std::optional<RawResponse> read_head(Millis timeout = Millis(10000)) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    size_t end;
    while ((end = buf_.find("\r\n\r\n")) == std::string::npos) {
      if (!fill(deadline)) return std::nullopt;
    }
    std::string head = buf_.substr(0, end);
    buf_.erase(0, end + 4);
    RawResponse r;
    size_t line_end = head.find("\r\n");
    std::string status_line = head.substr(0, line_end);
    if (status_line.size() < 12) return std::nullopt;
    r.status = std::stoi(status_line.substr(9, 3));
    size_t pos = line_end == std::string::npos ? head.size() : line_end + 2;
    while (pos < head.size()) {
      size_t next = head.find("\r\n", pos);
      if (next == std::string::npos) next = head.size();
      std::string line = head.substr(pos, next - pos);
      size_t colon = line.find(':');
      if (colon != std::string::npos) {
        std::string name = line.substr(0, colon);
        for (char& c : name)
          c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
        size_t v = line.find_first_not_of(' ', colon + 1);
        r.headers[name] = v == std::string::npos ? std::string() : line.substr(v);
      }
      pos = next + 2;
    }
    return r;
  }

  // Reads one complete response (body by Content-Length, chunked, or until close).
  std::optional<RawResponse> read_response(Millis timeout = Millis(10000)) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    auto head = read_head(timeout);
    if (!head) return std::nullopt;
    RawResponse r = std::move(*head);
    if (r.status / 100 == 1 || r.status == 204 || r.status == 304) return r;
    if (r.header("transfer-encoding") == "chunked") {
      while (true) {
        auto chunk = read_chunk(remaining(deadline));
        if (!chunk) return std::nullopt;
        if (chunk->empty()) break;
        r.body += *chunk;
      }
      return r;
    }
    if (!r.header("content-length").empty()) {
      size_t length = std::stoul(r.header("content-length"));
      while (buf_.size() < length) {
        if (!fill(deadline)) return std::nullopt;
      }
      r.body = buf_.substr(0, length);
      buf_.erase(0, length);
      return r;
    }
    while (fill(deadline)) {
    }
    r.body = std::move(buf_);
    buf_.clear();
    return r;
  }

  // Next chunk of a chunked body: its data, "" for the last chunk, nullopt on timeout/close.
  std::optional<std::string> read_chunk(Millis timeout = Millis(10000)) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    size_t eol;
    while ((eol = buf_.find("\r\n")) == std::string::npos) {
      if (!fill(deadline)) return std::nullopt;
    }
    size_t size = std::stoul(buf_.substr(0, eol), nullptr, 16);
    size_t need = eol + 2 + size + 2;
    while (buf_.size() < need) {
      if (!fill(deadline)) return std::nullopt;
    }
    std::string data = buf_.substr(eol + 2, size);
    buf_.erase(0, need);
    return data;
  }

  // True if the peer closes the connection (EOF or reset) within `timeout`.
  bool wait_for_close(Millis timeout = Millis(10000)) {
    auto deadline = std::chrono::steady_clock::now() + timeout;
    while (true) {
      pollfd p{fd_, POLLIN, 0};
      int ms = static_cast<int>(remaining(deadline).count());
      if (ms <= 0 || ::poll(&p, 1, ms) <= 0) return false;
      char tmp[4096];
      ssize_t n = ::recv(fd_, tmp, sizeof(tmp), 0);
      if (n <= 0) return true;
      buf_.append(tmp, static_cast<size_t>(n));
    }
  }

  // Bytes received but not consumed yet.
  const std::string& pending() const { return buf_; }

 private:
  static Millis remaining(std::chrono::steady_clock::time_point deadline) {
    auto left = std::chrono::duration_cast<Millis>(deadline - std::chrono::steady_clock::now());
    return left.count() > 0 ? left : Millis(0);
  }

  // Receives more bytes before the deadline; false on timeout, EOF or error.
  bool fill(std::chrono::steady_clock::time_point deadline) {
    pollfd p{fd_, POLLIN, 0};
    int ms = static_cast<int>(remaining(deadline).count());
    if (ms <= 0 || ::poll(&p, 1, ms) <= 0) return false;
    char tmp[65536];
    ssize_t n = ::recv(fd_, tmp, sizeof(tmp), 0);
    if (n <= 0) return false;
    buf_.append(tmp, static_cast<size_t>(n));
    return true;
  }

  int fd_ = -1;
  std::string buf_;
};

// "METHOD target HTTP/1.1" with Host, Content-Length (when there is a body) and `extra`
// header lines ("Name: value\r\n" each).
inline std::string make_request(std::string_view method, std::string_view target,
                                std::string_view body = {}, std::string_view extra = {}) {
  std::string r;
  r += method;
  r += ' ';
  r += target;
  r += " HTTP/1.1\r\nHost: 127.0.0.1\r\n";
  r += extra;
  if (!body.empty() || method == "POST")
    r += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  r += "\r\n";
  r += body;
  return r;
}

// One request on a fresh connection.
inline std::optional<RawResponse> http_call(uint16_t port, std::string_view method,
                                            std::string_view target, std::string_view body = {},
                                            std::string_view extra = {}) {
  RawHttpClient client(port);
  if (!client.send(make_request(method, target, body, extra))) return std::nullopt;
  return client.read_response();
}

}  // namespace kforge::testing
