#include "kforge/frontends/mcp/rest_client.h"

#include <netdb.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>

#include "kforge/common/errno_message.h"

namespace kforge::frontends::mcp {
namespace {

class Socket {
 public:
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() {
    if (fd_ >= 0) ::close(fd_);
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  int fd() const { return fd_; }

 private:
  int fd_;
};

std::string lower(std::string s) {
  for (char& c : s)
    c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

void set_timeouts(int fd, std::chrono::milliseconds timeout) {
  timeval tv{};
  tv.tv_sec = static_cast<time_t>(timeout.count() / 1000);
  tv.tv_usec = static_cast<suseconds_t>((timeout.count() % 1000) * 1000);
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
}

StatusOr<int> connect_to(const std::string& host, const std::string& port,
                         std::chrono::milliseconds timeout) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    return unavailable("cannot resolve " + host + ": " + gai_strerror(rc));
  }
  int last_errno = 0;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    set_timeouts(fd, timeout);
    if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
      freeaddrinfo(found);
      return fd;
    }
    last_errno = errno;
    ::close(fd);
  }
  freeaddrinfo(found);
  return unavailable("cannot connect to " + host + ":" + port + ": " + errno_message(last_errno));
}

Status write_all(int fd, std::string_view data) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return errno_error("sending the request", errno);
    data.remove_prefix(static_cast<size_t>(n));
  }
  return Status::ok();
}

// The most a server's answer may hold (job results carry at most a few MiB of output).
constexpr size_t kMaxResponseBytes = size_t{64} << 20;

StatusOr<std::string> read_all(int fd) {
  std::string out;
  char buf[65536];
  while (true) {
    ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno_error("reading the response", errno);
    if (n == 0) return out;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > kMaxResponseBytes) {
      return io_error("the server's answer exceeds " + std::to_string(kMaxResponseBytes) +
                      " bytes");
    }
  }
}

StatusOr<std::string> decode_chunked(std::string_view data) {
  std::string out;
  while (true) {
    size_t eol = data.find("\r\n");
    if (eol == std::string_view::npos) return io_error("truncated chunked response");
    size_t size = std::strtoul(std::string(data.substr(0, eol)).c_str(), nullptr, 16);
    data.remove_prefix(eol + 2);
    if (size == 0) return out;
    if (size > data.size() || data.size() - size < 2) {
      return io_error("truncated chunked response");
    }
    out.append(data.substr(0, size));
    data.remove_prefix(size + 2);
  }
}

StatusOr<RestResponse> parse_response(const std::string& raw) {
  size_t head_end = raw.find("\r\n\r\n");
  if (head_end == std::string::npos || raw.compare(0, 5, "HTTP/") != 0) {
    return io_error("the server's answer is not HTTP");
  }
  RestResponse r;
  size_t sp = raw.find(' ');
  const char* code = raw.data() + (sp == std::string::npos ? head_end : sp + 1);
  auto [end, ec] = std::from_chars(code, raw.data() + head_end, r.status);
  if (ec != std::errc() || end == code || r.status < 100 || r.status > 599) {
    return io_error("the server's answer has no HTTP status code");
  }
  bool chunked = false;
  size_t pos = raw.find("\r\n") + 2;
  while (pos < head_end) {
    size_t eol = raw.find("\r\n", pos);
    std::string line = raw.substr(pos, eol - pos);
    pos = eol + 2;
    size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    std::string name = lower(line.substr(0, colon));
    std::string value = line.substr(line.find_first_not_of(' ', colon + 1));
    if (name == "content-type") r.content_type = value;
    if (name == "transfer-encoding" && lower(value).find("chunked") != std::string::npos) {
      chunked = true;
    }
  }
  std::string_view body(raw);
  body.remove_prefix(head_end + 4);
  if (chunked) {
    KF_ASSIGN_OR_RETURN(r.body, decode_chunked(body));
  } else {
    r.body = std::string(body);
  }
  return r;
}

}  // namespace

StatusOr<RestClient> RestClient::create(RestClientOptions options) {
  std::string_view url(options.base_url);
  constexpr std::string_view kScheme = "http://";
  if (url.substr(0, kScheme.size()) != kScheme) {
    return invalid_argument(
        "must be an http:// URL of a kforge server, got '" + options.base_url + "'", "--server");
  }
  url.remove_prefix(kScheme.size());
  std::string_view authority = url.substr(0, url.find('/'));
  std::string prefix(url.substr(authority.size()));
  while (!prefix.empty() && prefix.back() == '/')
    prefix.pop_back();
  std::string host;
  std::string port = "80";
  if (!authority.empty() && authority.front() == '[') {
    size_t close = authority.find(']');
    if (close == std::string_view::npos) return invalid_argument("bad IPv6 address", "--server");
    host = std::string(authority.substr(1, close - 1));
    if (close + 1 < authority.size() && authority[close + 1] == ':') {
      port = std::string(authority.substr(close + 2));
    }
  } else {
    size_t colon = authority.find(':');
    host = std::string(authority.substr(0, colon));
    if (colon != std::string_view::npos) port = std::string(authority.substr(colon + 1));
  }
  if (host.empty() || port.empty()) {
    return invalid_argument("has no host: '" + options.base_url + "'", "--server");
  }
  return RestClient(std::move(options), std::move(host), std::move(port), std::move(prefix));
}

StatusOr<RestResponse> RestClient::call(std::string_view method, std::string_view path,
                                        std::string_view json_body) const {
  KF_ASSIGN_OR_RETURN(int fd, connect_to(host_, port_, options_.timeout));
  Socket socket(fd);
  std::string request = std::string(method) + " " + prefix_ + std::string(path) + " HTTP/1.1\r\n";
  request += "Host: " + (host_.find(':') != std::string::npos ? "[" + host_ + "]" : host_) + ":" +
             port_ + "\r\nConnection: close\r\nAccept: application/json\r\n";
  if (!options_.token.empty()) request += "Authorization: Bearer " + options_.token + "\r\n";
  if (!json_body.empty() || method == "POST") {
    request +=
        "Content-Type: application/json\r\nContent-Length: " + std::to_string(json_body.size()) +
        "\r\n";
  }
  request += "\r\n";
  request += json_body;
  Status sent = write_all(fd, request);
  if (!sent.is_ok()) return Status(ErrorCode::kUnavailable, sent.message());
  KF_ASSIGN_OR_RETURN(std::string raw, read_all(fd));
  return parse_response(raw);
}

Status status_from_error_body(int http_status, const std::string& body) {
  // The answer of another process: parsed with the depth limit, like every untrusted JSON.
  auto parsed = parse_json(body);
  const Json j = parsed.is_ok() ? std::move(parsed).value() : Json();
  std::string message = "HTTP " + std::to_string(http_status);
  ErrorCode code = http_status == 404   ? ErrorCode::kNotFound
                   : http_status == 400 ? ErrorCode::kInvalidArgument
                   : http_status == 401 ? ErrorCode::kUnauthenticated
                   : http_status == 403 ? ErrorCode::kPermissionDenied
                                        : ErrorCode::kUnavailable;
  std::string field;
  // kforge's body has code/message/field beside the old server's `error` string; an older
  // kforge nested them in an `error` object.
  const Json* e = nullptr;
  if (j.is_object() && j.contains("code") && j["code"].is_string()) {
    e = &j;
  } else if (j.is_object() && j.contains("error") && j["error"].is_object()) {
    e = &j["error"];
  }
  if (e != nullptr) {
    message = e->value("message", message);
    field = e->value("field", std::string());
    const std::string name = e->value("code", std::string());
    for (int c = 0; c <= static_cast<int>(ErrorCode::kIo); ++c) {
      if (error_code_name(static_cast<ErrorCode>(c)) == name) code = static_cast<ErrorCode>(c);
    }
  } else if (j.is_object() && j.contains("error") && j["error"].is_string()) {
    message = j["error"].get<std::string>();
  } else if (!body.empty()) {
    message += ": " + body.substr(0, 200);
  }
  if (code == ErrorCode::kOk) code = ErrorCode::kUnavailable;
  return Status(code, message, field);
}

StatusOr<Json> RestClient::call_json(std::string_view method, std::string_view path,
                                     const Json* body) const {
  std::string text = body != nullptr ? body->dump() : std::string();
  KF_ASSIGN_OR_RETURN(RestResponse r, call(method, path, text));
  if (r.status < 200 || r.status >= 300) return status_from_error_body(r.status, r.body);
  auto j = parse_json(r.body);
  if (!j.is_ok()) {
    return io_error("the server at " + options_.base_url + " answered " + std::string(path) +
                    " with something that is not JSON: " + j.status().message());
  }
  return j;
}

}  // namespace kforge::frontends::mcp
