#include "kforge/worker_protocol/protocol.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace kforge::worker_protocol {

Status check_protocol_version(const Json& message) {
  auto it = message.find("protocol");
  if (it == message.end() || !it->is_object() || !it->contains("major") ||
      !(*it)["major"].is_number_integer()) {
    return failed_precondition("worker sent no protocol version");
  }
  int major = (*it)["major"].get<int>();
  if (major != kProtocolMajor) {
    return failed_precondition("worker speaks protocol " + std::to_string(major) + "." +
                               it->value("minor", Json(0)).dump() + ", server speaks " +
                               std::to_string(kProtocolMajor) + "." +
                               std::to_string(kProtocolMinor));
  }
  return Status::ok();
}

std::string encode_frame(const Json& message) {
  std::string body = message.dump(-1, ' ', false, Json::error_handler_t::replace);
  auto n = static_cast<uint32_t>(body.size());
  std::string out;
  out.reserve(body.size() + 4);
  out += static_cast<char>((n >> 24) & 0xff);
  out += static_cast<char>((n >> 16) & 0xff);
  out += static_cast<char>((n >> 8) & 0xff);
  out += static_cast<char>(n & 0xff);
  out += body;
  return out;
}

StatusOr<uint32_t> FrameDecoder::current_length() const {
  if (buffered() < 4) return uint32_t{0};
  const auto* p = reinterpret_cast<const unsigned char*>(buffer_.data() + offset_);
  uint32_t n = (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | p[3];
  if (n == 0) return io_error("protocol frame of invalid length 0");
  if (n > max_frame_bytes_) {
    return io_error("protocol frame of " + std::to_string(n) + " bytes, over the limit of " +
                    std::to_string(max_frame_bytes_));
  }
  return n;
}

void FrameDecoder::append(std::string_view bytes) {
  if (!failure_.is_ok()) return;  // the stream is dead: nothing more is kept
  buffer_.append(bytes);
  if (auto n = current_length(); !n.is_ok()) {
    failure_ = n.status();
    buffer_.clear();
    offset_ = 0;
  }
}

std::optional<StatusOr<Json>> FrameDecoder::next() {
  if (!failure_.is_ok()) return StatusOr<Json>(failure_);
  auto length = current_length();
  if (!length.is_ok()) {
    failure_ = length.status();
    buffer_.clear();
    offset_ = 0;
    return StatusOr<Json>(failure_);
  }
  const uint32_t n = *length;
  if (n == 0) return std::nullopt;
  if (buffered() < 4 + size_t{n}) return std::nullopt;
  std::string_view body(buffer_.data() + offset_ + 4, n);
  offset_ += 4 + n;
  // A child is untrusted: its frames go through the same depth-limited parser as requests.
  auto message = parse_json(body);
  // Compact the buffer once the consumed prefix dominates.
  if (offset_ > (size_t{1} << 20) && offset_ * 2 > buffer_.size()) {
    buffer_.erase(0, offset_);
    offset_ = 0;
  }
  if (!message.is_ok() || !message->is_object()) {
    failure_ = io_error(message.is_ok()
                            ? std::string("protocol frame is not a JSON object")
                            : "protocol frame is not a JSON object: " + message.status().message());
    buffer_.clear();
    offset_ = 0;
    return StatusOr<Json>(failure_);
  }
  return message;
}

Status write_all(int fd, std::string_view data, std::chrono::steady_clock::time_point deadline) {
  size_t done = 0;
  while (done < data.size()) {
    ssize_t n = ::send(fd, data.data() + done, data.size() - done, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      done += static_cast<size_t>(n);
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return errno_error("send", errno);
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return {ErrorCode::kDeadlineExceeded, "timed out writing to worker"};
    pollfd pfd{fd, POLLOUT, 0};
    ::poll(&pfd, 1, static_cast<int>(std::min<int64_t>(left.count(), 1000)));
  }
  return Status::ok();
}

Status send_control(int fd, const Json& message, std::span<const int> fds_to_pass) {
  std::string body = message.dump();
  iovec iov{body.data(), body.size()};
  msghdr msg{};
  msg.msg_iov = &iov;
  msg.msg_iovlen = 1;
  std::vector<char> control;
  if (!fds_to_pass.empty()) {
    control.resize(CMSG_SPACE(sizeof(int) * fds_to_pass.size()));
    msg.msg_control = control.data();
    msg.msg_controllen = control.size();
    cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
    cmsg->cmsg_level = SOL_SOCKET;
    cmsg->cmsg_type = SCM_RIGHTS;
    cmsg->cmsg_len = CMSG_LEN(sizeof(int) * fds_to_pass.size());
    std::memcpy(CMSG_DATA(cmsg), fds_to_pass.data(), sizeof(int) * fds_to_pass.size());
  }
  while (true) {
    ssize_t n = ::sendmsg(fd, &msg, MSG_NOSIGNAL);
    if (n >= 0) return Status::ok();
    if (errno == EINTR) continue;
    return errno_error("sendmsg to zygote", errno);
  }
}

StatusOr<ControlRead> recv_control(int fd) {
  std::string buf(kMaxControlBytes, '\0');
  while (true) {
    ssize_t n = ::recv(fd, buf.data(), buf.size(), MSG_DONTWAIT);
    if (n == 0) return ControlRead{ControlRead::Kind::kClosed, Json()};
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        return ControlRead{ControlRead::Kind::kWouldBlock, Json()};
      }
      return errno_error("recv from zygote", errno);
    }
    buf.resize(static_cast<size_t>(n));
    auto message = parse_json(buf);
    if (!message.is_ok() || !message->is_object()) {
      return invalid_argument("zygote sent a message that is not a JSON object");
    }
    return ControlRead{ControlRead::Kind::kMessage, std::move(message).value()};
  }
}

}  // namespace kforge::worker_protocol
