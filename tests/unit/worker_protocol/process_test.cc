#include "kforge/worker_protocol/process.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>

#include "kforge/workers/worker_env.h"

namespace kforge::worker_protocol {
namespace {

using namespace std::chrono_literals;

std::string read_all(int fd) {
  std::string out;
  char buf[4096];
  ssize_t n;
  while ((n = read(fd, buf, sizeof(buf))) > 0)
    out.append(buf, static_cast<size_t>(n));
  return out;
}

TEST(ProcessTest, RunsWithOnlyTheGivenEnvironmentAndDescriptors) {
  int out[2];
  ASSERT_EQ(pipe2(out, O_CLOEXEC), 0);
  int extra = open("/dev/null", O_RDONLY);  // not CLOEXEC: must still not leak
  LaunchOptions o;
  o.argv = {"/bin/sh", "-c", "echo \"$FOO:$HOME\"; ls /proc/self/fd | wc -l"};
  o.env = {{"FOO", "bar"}};
  o.fds = {{1, out[1]}};
  auto p = launch_process(o);
  ASSERT_TRUE(p.is_ok()) << p.status().to_string();
  close(out[1]);
  std::string text = read_all(out[0]);
  close(out[0]);
  close(extra);
  auto status = p->wait_for(5s);
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(status->exit_code, 0);
  EXPECT_EQ(text.substr(0, 5), "bar:\n");
  // fds 0, 1, 2 plus the one `ls` opens for /proc/self/fd.
  EXPECT_EQ(std::stoi(text.substr(5)), 4);
}

TEST(ProcessTest, ReportsSignalsAndKillsTheWholeGroup) {
  int out[2];
  ASSERT_EQ(pipe2(out, O_CLOEXEC), 0);
  LaunchOptions o;
  o.argv = {"/bin/sh", "-c", "sleep 60 & echo $!; wait"};
  o.fds = {{1, out[1]}};
  auto p = launch_process(o);
  ASSERT_TRUE(p.is_ok());
  close(out[1]);
  char buf[32] = {};
  ASSERT_GT(read(out[0], buf, sizeof(buf) - 1), 0);
  close(out[0]);
  pid_t grandchild = std::stoi(buf);
  EXPECT_EQ(kill(grandchild, 0), 0);
  p->kill_group();
  auto status = p->wait_for(5s);
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(status->signal, SIGKILL);
  EXPECT_NE(status->describe().find("SIGKILL"), std::string::npos);
  // The grandchild was in the same group: gone, or a zombie waiting for init to reap it.
  bool gone = false;
  for (int i = 0; i < 100 && !gone; ++i) {
    if (kill(grandchild, 0) != 0) {
      gone = true;
      break;
    }
    FILE* f = fopen(("/proc/" + std::to_string(grandchild) + "/stat").c_str(), "r");
    if (f == nullptr) {
      gone = true;
      break;
    }
    char line[512] = {};
    if (fgets(line, sizeof(line), f) != nullptr &&
        std::string(line).find(") Z") != std::string::npos) {
      gone = true;
    }
    fclose(f);
    usleep(20000);
  }
  EXPECT_TRUE(gone) << "grandchild " << grandchild << " survived the group kill";
}

TEST(ProcessTest, ExecFailureIsAnError) {
  LaunchOptions o;
  o.argv = {"/nonexistent/program"};
  auto p = launch_process(o);
  EXPECT_FALSE(p.is_ok());
}

TEST(ProcessTest, ExitCode) {
  LaunchOptions o;
  o.argv = {"/bin/sh", "-c", "exit 3"};
  auto p = launch_process(o);
  ASSERT_TRUE(p.is_ok());
  auto status = p->wait_for(5s);
  ASSERT_TRUE(status.has_value());
  EXPECT_EQ(status->exit_code, 3);
  EXPECT_EQ(status->describe(), "exited with code 3");
}

TEST(WorkerEnvTest, NeverPassesSecrets) {
  setenv("KFORGE_TOKEN", "s3cret", 1);
  setenv("MY_API_TOKEN", "s3cret", 1);
  setenv("AWS_SECRET_ACCESS_KEY", "s3cret", 1);
  setenv("TRITON_CACHE_DIR", "/tmp/x", 1);
  setenv("SOMETHING_ELSE", "1", 1);
  auto env = workers::base_worker_env({"SOMETHING_ELSE", "MY_API_TOKEN"});
  EXPECT_FALSE(env.contains("KFORGE_TOKEN"));
  EXPECT_FALSE(env.contains("MY_API_TOKEN"));
  EXPECT_FALSE(env.contains("AWS_SECRET_ACCESS_KEY"));
  EXPECT_EQ(env["TRITON_CACHE_DIR"], "/tmp/x");
  EXPECT_EQ(env["SOMETHING_ELSE"], "1");
  EXPECT_TRUE(env.contains("PATH"));
}

}  // namespace
}  // namespace kforge::worker_protocol
