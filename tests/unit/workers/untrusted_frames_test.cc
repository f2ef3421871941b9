// What children and the zygote send is untrusted (a kernel can write to its protocol socket):
// frames and control datagrams are parsed with the JSON depth limit (issue #8 item 5).
#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>

#include "kforge/worker_protocol/protocol.h"

namespace kforge::workers {
namespace {

std::string frame_of(const std::string& body) {
  const auto n = static_cast<uint32_t>(body.size());
  std::string out = {static_cast<char>(n >> 24), static_cast<char>(n >> 16),
                     static_cast<char>(n >> 8), static_cast<char>(n)};
  return out + body;
}

std::string nested(size_t depth) {
  return std::string(depth, '[') + std::string(depth, ']');
}

TEST(UntrustedFramesTest, AFrameNested100kDeepIsAnErrorNotACrash) {
  worker_protocol::FrameDecoder decoder;
  decoder.append(frame_of(R"({"type":"progress","partial":{"d":)" + nested(100000) + "}}"));
  auto message = decoder.next();
  ASSERT_TRUE(message);
  ASSERT_FALSE(message->is_ok());
  EXPECT_NE(message->status().message().find("nested deeper"), std::string::npos)
      << message->status().message();
  // Up to the limit is fine.
  worker_protocol::FrameDecoder fine;
  fine.append(frame_of(R"({"a":)" + nested(63) + "}"));
  auto ok = fine.next();
  ASSERT_TRUE(ok && ok->is_ok());
}

TEST(UntrustedFramesTest, AControlDatagramNestedTooDeepIsRefused) {
  int pair[2];
  ASSERT_EQ(::socketpair(AF_UNIX, SOCK_SEQPACKET, 0, pair), 0);
  const std::string deep = R"({"type":"exited","x":)" + nested(20000) + "}";
  ASSERT_EQ(::send(pair[1], deep.data(), deep.size(), 0), static_cast<ssize_t>(deep.size()));
  auto read = worker_protocol::recv_control(pair[0]);
  EXPECT_FALSE(read.is_ok());
  ::close(pair[0]);
  ::close(pair[1]);
}

}  // namespace
}  // namespace kforge::workers
