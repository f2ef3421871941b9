// Removing job cgroups for good (sandbox/cgroup_reaper.h), on this host's real cgroup file
// system: a cgroup whose process still runs is killed and removed; stale servers' trees are
// swept, a live server's (its lock held) is not. Skipped without root or a writable cgroup2.
#include "kforge/sandbox/cgroup_reaper.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "kforge/sandbox/cgroup_io.h"

namespace kforge::sandbox {
namespace {

namespace fs = std::filesystem;

// A fresh directory in this process's cgroup2 tree (pure v2, or a hybrid host's unified).
fs::path test_parent() {
  if (::geteuid() != 0) return {};
  for (const auto& mount : {fs::path("/sys/fs/cgroup"), fs::path("/sys/fs/cgroup/unified")}) {
    if (!fs::exists(mount / "cgroup.controllers")) continue;  // not a cgroup2 tree
    const fs::path dir = mount / own_cgroup_path("").substr(1) /
                         ("kforge-reaper-test-" + std::to_string(::getpid()));
    if (::mkdir(dir.c_str(), 0755) == 0) return dir;
  }
  return {};
}

class CgroupReaperTest : public ::testing::Test {
 protected:
  void SetUp() override {
    parent_ = test_parent();
    if (parent_.empty()) GTEST_SKIP() << "needs root and a writable cgroup2 tree";
  }
  void TearDown() override {
    if (!parent_.empty()) ::rmdir(parent_.c_str());
  }
  fs::path parent_;
};

TEST_F(CgroupReaperTest, ACgroupWithARunningProcessIsKilledAndRemoved) {
  const fs::path job = parent_ / "py-cpu-1";
  ASSERT_EQ(::mkdir(job.c_str(), 0755), 0);
  const pid_t child = ::fork();
  if (child == 0) {
    ::pause();
    ::_exit(0);
  }
  ASSERT_TRUE(cgroup_write(job / "cgroup.procs", std::to_string(child)).is_ok());
  CgroupReaper reaper;
  reaper.remove({job});
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  EXPECT_TRUE(reaper.drain(std::chrono::seconds(10)));
  EXPECT_FALSE(fs::exists(job));
}

TEST_F(CgroupReaperTest, StaleServersTreesAreSweptLiveOnesAreNot) {
  const fs::path dead = parent_ / "kforge-4999999";  // no such pid
  const fs::path reused = parent_ / "kforge-1";      // a pid that is not a kforge
  const fs::path live = parent_ / "kforge-4999998";  // locked: a live server
  const fs::path own = parent_ / ("kforge-" + std::to_string(::getpid()));
  for (const auto& d : {dead, reused, live, own}) {
    ASSERT_EQ(::mkdir(d.c_str(), 0755), 0) << d;
    ASSERT_EQ(::mkdir((d / "py-cpu-3").c_str(), 0755), 0);
  }
  {
    InstanceLock lock(live);
    CgroupReaper reaper;
    sweep_stale(parent_, own.filename().string(), reaper);
    EXPECT_TRUE(reaper.drain(std::chrono::seconds(10)));
    EXPECT_FALSE(fs::exists(dead));
    EXPECT_FALSE(fs::exists(reused));
    EXPECT_TRUE(fs::exists(live / "py-cpu-3"));
    EXPECT_TRUE(fs::exists(own));                // this server's own directory stays,
    EXPECT_FALSE(fs::exists(own / "py-cpu-3"));  // emptied of what a former life left
  }
  for (const auto& d : {live / "py-cpu-3", live, own}) {
    EXPECT_EQ(::rmdir(d.c_str()), 0) << d;
  }
}

}  // namespace
}  // namespace kforge::sandbox
