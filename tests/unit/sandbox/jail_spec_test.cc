// The `jail` object of the worker protocol (sandbox/jail_spec.h): what the supervisor sends is
// what the jailed process builds, and a malformed one is refused naming the field.
#include "kforge/sandbox/jail_spec.h"

#include <gtest/gtest.h>

namespace kforge::sandbox {
namespace {

TEST(JailSpecTest, RoundTripsEveryField) {
  JailSpec spec;
  spec.role = "candidate";
  spec.read_only = {"/usr/lib", "/opt/venv"};
  spec.devices = {"/dev/null", "/dev/nvidia0"};
  spec.binds = {{"/data/cache/triton", "/data/cache/triton", false}};
  spec.tmpfs = {{"/tmp", 64 << 20, 01777, std::nullopt, std::nullopt},
                {"/data/scratch/py-1/candidate", 32 << 20, 0700, 61001, 61001}};
  spec.files = {{"/etc/hosts", "127.0.0.1 localhost\n"}};
  spec.links = {{"/dev/fd", "/proc/self/fd"}};
  spec.hide = {"/data", "/sys/fs/cgroup"};
  spec.bind_sys = false;
  spec.uid = 61001;
  spec.gid = 61001;
  spec.rlimits = {{"nofile", 4096}};
  spec.seccomp_bpf = std::string(16, '\x01');
  auto back = JailSpec::from_json(spec.to_json());
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  EXPECT_EQ(back->to_json(), spec.to_json());
  ASSERT_EQ(back->tmpfs.size(), 2u);
  EXPECT_EQ(back->tmpfs[1].size_bytes, 32u << 20);
  EXPECT_EQ(back->tmpfs[1].mode, 0700u);
  EXPECT_EQ(back->tmpfs[1].uid, 61001u);
  EXPECT_FALSE(back->tmpfs[0].uid.has_value());
  EXPECT_EQ(back->files.at("/etc/hosts"), "127.0.0.1 localhost\n");
  EXPECT_FALSE(back->bind_sys);
}

TEST(JailSpecTest, MalformedFieldsAreRefusedByName) {
  auto refused = [](const Json& j) {
    auto s = JailSpec::from_json(j);
    return s.is_ok() ? std::string() : s.status().to_string();
  };
  EXPECT_NE(refused({{"tmpfs", {{{"path", "/tmp"}}}}}).find("tmpfs[0]"), std::string::npos);
  EXPECT_NE(refused({{"tmpfs", {{{"path", "/tmp"}, {"size_bytes", 0}}}}}).find("size_bytes"),
            std::string::npos);
  EXPECT_NE(refused({{"read_only", {1}}}).find("read_only[0]"), std::string::npos);
  EXPECT_NE(refused({{"files", {{"/etc/hosts", 3}}}}).find("files./etc/hosts"), std::string::npos);
  EXPECT_NE(refused(Json::parse(R"({"uid": 0})")).find("uid 0"), std::string::npos);
  EXPECT_NE(refused({{"uid", -1}}).find("uid"), std::string::npos);
  EXPECT_NE(refused({{"gid", "x"}}).find("gid"), std::string::npos);
  EXPECT_NE(refused({{"rlimits", {{"bogus", 1}}}}).find("bogus"), std::string::npos);
  EXPECT_EQ(refused(Json::object()), "");
}

}  // namespace
}  // namespace kforge::sandbox
