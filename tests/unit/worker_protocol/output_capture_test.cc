#include "kforge/worker_protocol/output_capture.h"

#include <gtest/gtest.h>

namespace kforge::worker_protocol {
namespace {

TEST(OutputCaptureTest, KeepsEverythingUnderTheCap) {
  OutputCapture c(100);
  c.append("hello ");
  c.append("world");
  EXPECT_EQ(c.text(), "hello world");
  EXPECT_FALSE(c.truncated());
}

TEST(OutputCaptureTest, KeepsHeadAndTailOfHugeOutput) {
  OutputCapture c(1000);
  std::string line = "0123456789\n";
  for (int i = 0; i < 500000; ++i)
    c.append(line);  // 5.5 MB
  c.append("THE END");
  std::string text = c.text();
  EXPECT_TRUE(c.truncated());
  EXPECT_EQ(c.total_bytes(), 500000u * line.size() + 7);
  EXPECT_LE(text.size(), 1000u);  // the marker included: what a result may carry
  EXPECT_EQ(text.substr(0, 11), line);
  EXPECT_NE(text.find("bytes omitted"), std::string::npos);
  EXPECT_EQ(text.substr(text.size() - 7), "THE END");
}

TEST(OutputCaptureTest, SingleHugeAppend) {
  OutputCapture c(10);
  c.append(std::string(100, 'a') + "bcdef");
  std::string text = c.text();
  EXPECT_EQ(text.substr(0, 5), "aaaaa");
  EXPECT_EQ(text.substr(text.size() - 5), "bcdef");
}

}  // namespace
}  // namespace kforge::worker_protocol
