// libFuzzer target: what the supervisor decodes from worker processes, which run untrusted
// kernels: the length-prefixed frames of a child's protocol socket (FrameDecoder, fed in
// pieces of fuzzer-chosen sizes), the zygote's control datagrams (recv_control over a real
// SOCK_SEQPACKET pair), the version check of hello/ready, and the assembly of a job result
// from whatever a child sent as its result (assemble_result).
// Oracles: no crash or sanitizer report; every assembled result is an object carrying the
// fields clients rely on.
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "kforge/worker_protocol/protocol.h"
#include "kforge/workers/child_channel.h"

namespace {

using kforge::Json;
using kforge::workers::ChildJobEnd;

void check_result(const Json& message) {
  ChildJobEnd end;
  end.kind = ChildJobEnd::Kind::kResult;
  if (message.contains("result") && message["result"].is_object()) end.result = message["result"];
  if (message.contains("partial") && message["partial"].is_object()) {
    end.partial = message["partial"];
    end.kind = ChildJobEnd::Kind::kCrashed;
  }
  if (auto phase = message.find("phase"); phase != message.end() && phase->is_string()) {
    end.phase = phase->get<std::string>();
  }
  const Json spec = {{"kernel", {{"kernel_type", "torch"}}}, {"device", "cpu"}};
  Json r = kforge::workers::assemble_result(spec, end, std::chrono::milliseconds(1000),
                                            Json{{"type", "python"}});
  if (!r.is_object() || !r.contains("correctness") || !r.contains("runtime") ||
      !r["metadata"].is_object()) {
    __builtin_trap();
  }
  (void)r.dump(-1, ' ', false, Json::error_handler_t::replace);
}

void decode_frames(std::string_view bytes) {
  if (bytes.empty()) return;
  const size_t piece = 1 + static_cast<unsigned char>(bytes[0]) % 64;
  bytes.remove_prefix(1);
  kforge::worker_protocol::FrameDecoder decoder;
  while (true) {
    const size_t n = std::min(piece, bytes.size());
    decoder.append(bytes.substr(0, n));
    bytes.remove_prefix(n);
    while (auto message = decoder.next()) {
      if (!message->is_ok()) return;  // the stream is unusable after an error
      (void)kforge::worker_protocol::check_protocol_version(message->value());
      check_result(message->value());
    }
    if (bytes.empty()) return;
  }
}

void decode_control(std::string_view bytes) {
  static int pair[2] = {-1, -1};
  if (pair[0] < 0 && ::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) return;
  if (bytes.size() > kforge::worker_protocol::kMaxControlBytes) return;
  if (::send(pair[1], bytes.data(), bytes.size(), MSG_DONTWAIT) < 0) return;
  auto read = kforge::worker_protocol::recv_control(pair[0]);
  if (read.is_ok() && read->kind == kforge::worker_protocol::ControlRead::Kind::kMessage) {
    (void)kforge::worker_protocol::check_protocol_version(read->message);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  decode_frames(bytes);
  decode_control(bytes);
  return 0;
}
