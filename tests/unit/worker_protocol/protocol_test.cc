#include "kforge/worker_protocol/protocol.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <unistd.h>

#include <array>

namespace kforge::worker_protocol {
namespace {

TEST(ProtocolTest, FramesRoundTripInPieces) {
  Json a = {{"type", "progress"}, {"phase", "loading"}};
  Json b = {{"type", "result"}, {"result", {{"compiled", true}}}};
  std::string bytes = encode_frame(a) + encode_frame(b);
  FrameDecoder d;
  std::vector<Json> got;
  for (char c : bytes) {  // one byte at a time
    d.append(std::string_view(&c, 1));
    while (auto m = d.next()) {
      ASSERT_TRUE(m->is_ok());
      got.push_back(m->value());
    }
  }
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0], a);
  EXPECT_EQ(got[1], b);
  EXPECT_EQ(d.buffered(), 0u);
}

TEST(ProtocolTest, RejectsBadFrames) {
  FrameDecoder zero;
  zero.append(std::string("\0\0\0\0", 4));
  auto m = zero.next();
  ASSERT_TRUE(m.has_value());
  EXPECT_FALSE(m->is_ok());
  FrameDecoder bad_json;
  bad_json.append(std::string("\0\0\0\3{x}", 7));
  m = bad_json.next();
  ASSERT_TRUE(m.has_value());
  EXPECT_FALSE(m->is_ok());
  FrameDecoder huge;
  huge.append(std::string("\x7f\xff\xff\xff", 4));
  m = huge.next();
  ASSERT_TRUE(m.has_value());
  EXPECT_FALSE(m->is_ok());
}

// Issue #37: a job process's frames are bounded tighter than the supervisor's (a 100 MB
// message got through the 256 MiB limit whole); the length prefix alone decides, before the
// frame's bytes are buffered.
TEST(ProtocolTest, AChildsFramesHaveTheirOwnLimit) {
  FrameDecoder child(kMaxChildFrameBytes);
  const uint32_t over = static_cast<uint32_t>(kMaxChildFrameBytes) + 1;
  std::string prefix = {static_cast<char>(over >> 24), static_cast<char>((over >> 16) & 0xff),
                        static_cast<char>((over >> 8) & 0xff), static_cast<char>(over & 0xff)};
  child.append(prefix);
  auto m = child.next();
  ASSERT_TRUE(m.has_value());
  ASSERT_FALSE(m->is_ok());
  EXPECT_NE(m->status().message().find("over the limit of " + std::to_string(kMaxChildFrameBytes)),
            std::string::npos);
  // Nothing more is kept once the stream has failed, whatever arrives.
  EXPECT_TRUE(child.saturated());
  child.append(std::string(size_t{4} << 20, 'x'));
  EXPECT_EQ(child.buffered(), 0u);
  EXPECT_FALSE(child.next()->is_ok());
  FrameDecoder supervisor;  // the default: a job spec may be that large
  supervisor.append(prefix);
  EXPECT_FALSE(supervisor.next().has_value());  // waits for the frame's bytes
  FrameDecoder small(kMaxChildFrameBytes);
  small.append(encode_frame(Json{{"type", "result"}, {"result", Json::object()}}));
  EXPECT_FALSE(small.saturated());
  m = small.next();
  ASSERT_TRUE(m.has_value() && m->is_ok());
  EXPECT_EQ((*m)->value("type", ""), "result");
  // A reader stops once a whole frame of the largest size may be waiting.
  FrameDecoder tiny(16);
  tiny.append(encode_frame(Json{{"a", 1}}));
  tiny.append(std::string("\0\0\0\x05{}   ", 9));  // 15 + 9 bytes: 16 + 4 or more
  EXPECT_TRUE(tiny.saturated());
  EXPECT_TRUE(tiny.next()->is_ok());
  EXPECT_FALSE(tiny.saturated());
}

TEST(ProtocolTest, VersionCheck) {
  EXPECT_TRUE(check_protocol_version({{"protocol", {{"major", 2}, {"minor", 7}}}}).is_ok());
  Status s = check_protocol_version({{"protocol", {{"major", 1}, {"minor", 0}}}});
  EXPECT_EQ(s.code(), ErrorCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("1.0"), std::string::npos);
  EXPECT_FALSE(check_protocol_version({{"type", "ready"}}).is_ok());
}

TEST(ProtocolTest, ControlMessagesCarryDescriptors) {
  int sv[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
  int p[2];
  ASSERT_EQ(pipe(p), 0);
  std::array<int, 1> fds = {p[1]};
  ASSERT_TRUE(send_control(sv[0], {{"type", "fork"}, {"child_id", 3}}, fds).is_ok());
  auto got = recv_control(sv[1]);
  ASSERT_TRUE(got.is_ok());
  EXPECT_EQ(got->kind, ControlRead::Kind::kMessage);
  EXPECT_EQ(got->message["child_id"], 3);
  auto empty = recv_control(sv[1]);
  ASSERT_TRUE(empty.is_ok());
  EXPECT_EQ(empty->kind, ControlRead::Kind::kWouldBlock);
  close(sv[0]);
  auto closed = recv_control(sv[1]);
  ASSERT_TRUE(closed.is_ok());
  EXPECT_EQ(closed->kind, ControlRead::Kind::kClosed);
  close(sv[1]);
  close(p[0]);
  close(p[1]);
}

}  // namespace
}  // namespace kforge::worker_protocol
