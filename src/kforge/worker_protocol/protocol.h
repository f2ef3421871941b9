// The supervisor side of the worker protocol (docs/worker-protocol.md): versions, framing
// of the child's stream socket and the zygote's SEQPACKET control socket.
#pragma once

#include <chrono>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "kforge/common/json.h"
#include "kforge/common/status.h"

namespace kforge::worker_protocol {

inline constexpr int kProtocolMajor = 2;
inline constexpr int kProtocolMinor = 0;
// The largest frame: a job spec carries its inline tensor data (up to 256 MiB).
inline constexpr size_t kMaxFrameBytes = size_t{256} << 20;
// The largest frame a worker process sends (progress, result): the judge caps each text of a
// result (64 KiB) and Nsight Compute's output (8 MiB per role), so this is room to spare; a
// process that sends more broke the protocol (its job fails saying so) and is never buffered
// past this.
inline constexpr size_t kMaxChildFrameBytes = size_t{32} << 20;
inline constexpr size_t kMaxControlBytes = size_t{64} << 10;

// OK when `message["protocol"]` has our major version; kFailedPrecondition otherwise,
// naming both versions.
Status check_protocol_version(const Json& message);

// 4-byte big-endian length + compact JSON.
std::string encode_frame(const Json& message);

// Incremental decoder for a byte stream of frames of at most `max_frame_bytes` each. It never
// holds much more than one frame: a length prefix over the limit (or 0) fails the stream as
// soon as its 4 bytes are in, and what arrives after that is dropped; a reader stops reading
// while saturated() and calls next() first.
class FrameDecoder {
 public:
  explicit FrameDecoder(size_t max_frame_bytes = kMaxFrameBytes)
      : max_frame_bytes_(max_frame_bytes) {}
  void append(std::string_view bytes);
  // The next complete message; nullopt when more bytes are needed; an error for a bad
  // length or bad JSON (the stream is then unusable: every later call answers the error).
  std::optional<StatusOr<Json>> next();
  size_t buffered() const { return buffer_.size() - offset_; }
  // True when next() has something to say (a whole frame is buffered, or the stream failed):
  // read no more until it has.
  bool saturated() const { return !failure_.is_ok() || buffered() >= max_frame_bytes_ + 4; }

 private:
  // The current frame's length prefix, checked: 0 when fewer than 4 bytes are buffered.
  StatusOr<uint32_t> current_length() const;

  size_t max_frame_bytes_;
  std::string buffer_;
  size_t offset_ = 0;
  Status failure_;  // set once the stream is unusable
};

// Writes all of `data` to a (possibly non-blocking) descriptor, waiting with poll until
// `deadline`. kDeadlineExceeded on timeout, kIo when the peer is gone.
Status write_all(int fd, std::string_view data, std::chrono::steady_clock::time_point deadline);

// Control socket (SOCK_SEQPACKET): one JSON object per datagram, optional SCM_RIGHTS fds.
Status send_control(int fd, const Json& message, std::span<const int> fds_to_pass = {});
// One read from the (non-blocking) control socket.
struct ControlRead {
  enum class Kind { kMessage, kWouldBlock, kClosed };
  Kind kind = Kind::kWouldBlock;
  Json message;  // for kMessage
};
// Reads one datagram. kIo on a socket error; kInvalidArgument on a datagram that is not a
// JSON object.
StatusOr<ControlRead> recv_control(int fd);

}  // namespace kforge::worker_protocol
