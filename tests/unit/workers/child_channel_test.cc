// One job on a real child process (workers/child_channel.h): a small Python program speaks
// the child's side of the protocol on fd 3 (docs/worker-protocol.md "Child messages"), and the
// supervisor's loop turns each way a job can end into its result and error_kind.
#include "kforge/workers/child_channel.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "kforge/model/error_kind.h"

namespace kforge::workers {
namespace {

using namespace std::chrono_literals;

// The child's side: `ready` with the given protocol major, then on its job, by `mode`:
// result (prints, a progress message, the result), hang, crash (exit 7 after a progress
// message), bad_frame (a zero-length frame), no_result (a result message without result).
constexpr const char* kChild = R"PY(
import json, os, struct, sys, time
mode, major = sys.argv[1], int(sys.argv[2])
def send(m):
    b = json.dumps(m).encode()
    os.write(3, struct.pack(">I", len(b)) + b)
def read(n):
    out = b""
    while len(out) < n:
        chunk = os.read(3, n - len(out))
        if not chunk:
            sys.exit(0)
        out += chunk
    return out
send({"type": "ready", "protocol": {"major": major, "minor": 0}, "pid": os.getpid()})
job = json.loads(read(struct.unpack(">I", read(4))[0]))["job"]
if mode == "result":
    print("hello from the job", flush=True)
    send({"type": "progress", "phase": "correctness", "message": "checking",
          "partial": {"compiled": True}})
    send({"type": "result", "job_id": job["job_id"],
          "result": {"compiled": True, "correctness": True, "runtime": 1.5}})
elif mode == "hang":
    send({"type": "progress", "phase": "timing_candidate", "message": "timing"})
    time.sleep(60)
elif mode == "crash":
    send({"type": "progress", "phase": "loading", "message": "importing",
          "partial": {"compiled": True}})
    sys.stderr.write("about to fail\n")
    sys.stderr.flush()
    os._exit(7)
elif mode == "bad_frame":
    os.write(3, b"\0\0\0\0")
    time.sleep(60)
elif mode == "no_result":
    send({"type": "result", "job_id": job["job_id"]})
    time.sleep(60)
)PY";

class OwnExit final : public ExitSource {
 public:
  explicit OwnExit(worker_protocol::Process& p) : p_(p) {}
  int poll_fd() const override { return p_.exit_fd(); }
  void on_readable() override { (void)p_.try_wait(); }
  std::optional<worker_protocol::ExitStatus> exit_of(pid_t pid) override {
    return pid == p_.pid() ? p_.try_wait() : std::nullopt;
  }
  bool alive() const override { return true; }

 private:
  worker_protocol::Process& p_;
};

struct Child {
  worker_protocol::Process process;
  ChildChannel channel;
};

std::unique_ptr<Child> start(const std::string& mode, int major = worker_protocol::kProtocolMajor) {
  auto c = std::make_unique<Child>();
  auto pipes = ChildPipes::create();
  EXPECT_TRUE(pipes.is_ok());
  if (!pipes.is_ok()) return nullptr;
  worker_protocol::LaunchOptions o;
  o.argv = {"/usr/bin/python3", "-c", kChild, mode, std::to_string(major)};
  o.fds = {{1, pipes->out_w.get()}, {2, pipes->err_w.get()}, {3, pipes->proto_theirs.get()}};
  auto p = worker_protocol::launch_process(o);
  EXPECT_TRUE(p.is_ok()) << p.status().to_string();
  if (!p.is_ok()) return nullptr;
  c->process = std::move(p).value();
  c->channel.pid = c->process.pid();
  EXPECT_TRUE(pipes->attach(c->channel).is_ok());
  return c;
}

const Json kSpec = {{"job_id", "j1"},
                    {"kind", "evaluate"},
                    {"device", "cpu"},
                    {"kernel", {{"kernel_type", "triton"}, {"source_code", "x"}}}};

ChildJobEnd run(Child& c, std::chrono::milliseconds timeout, CancelToken& cancel,
                std::vector<std::string>* phases = nullptr) {
  OwnExit exits(c.process);
  EXPECT_TRUE(wait_child_ready(c.channel, exits, std::chrono::steady_clock::now() + 20s).is_ok());
  ProgressSink sink = [phases](const std::string& phase, const std::string&, double) {
    if (phases != nullptr) phases->push_back(phase);
  };
  return run_job_on_child(c.channel, Json{{"type", "job"}, {"job", kSpec}}, timeout, cancel, sink,
                          exits, ChildLimits{});
}

std::string kind_of(const Json& result) {
  return result["error_kind"].is_null() ? "" : result["error_kind"].get<std::string>();
}

TEST(ChildChannelTest, AResultComesBackWithProgressOutputAndProcessFacts) {
  if (!std::filesystem::exists("/usr/bin/python3")) GTEST_SKIP() << "no /usr/bin/python3";
  auto c = start("result");
  ASSERT_TRUE(c);
  CancelToken cancel;
  std::vector<std::string> phases;
  ChildJobEnd end = run(*c, 20s, cancel, &phases);
  ASSERT_EQ(end.kind, ChildJobEnd::Kind::kResult) << end.detail;
  EXPECT_EQ(phases, std::vector<std::string>{"correctness"});
  const Json r = assemble_result(kSpec, end, 20s, Json{{"type", "python"}});
  EXPECT_TRUE(r["correctness"].get<bool>());
  EXPECT_EQ(r["runtime"], 1.5);
  EXPECT_FALSE(r.contains("error_kind") && !r["error_kind"].is_null()) << r.dump();
  EXPECT_NE(r["stdout"].get<std::string>().find("hello from the job"), std::string::npos);
  EXPECT_EQ(r["metadata"]["kernel_type"], "triton");
  EXPECT_EQ(r["metadata"]["device"], "cpu");
}

TEST(ChildChannelTest, ATimeoutKillsTheChildAndSaysWhereItWas) {
  if (!std::filesystem::exists("/usr/bin/python3")) GTEST_SKIP() << "no /usr/bin/python3";
  auto c = start("hang");
  ASSERT_TRUE(c);
  CancelToken cancel;
  const auto t0 = std::chrono::steady_clock::now();
  ChildJobEnd end = run(*c, 1500ms, cancel);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, 20s);
  ASSERT_EQ(end.kind, ChildJobEnd::Kind::kTimeout);
  EXPECT_EQ(end.phase, "timing_candidate");
  const Json r = assemble_result(kSpec, end, 1500ms, Json::object());
  EXPECT_EQ(kind_of(r), "timeout");
  EXPECT_NE(r["runtime_error"].get<std::string>().find("timed out after 1.5 s"), std::string::npos)
      << r["runtime_error"];
  EXPECT_FALSE(r["correctness"].get<bool>());
}

TEST(ChildChannelTest, ACrashKeepsThePartialResultAndTheExit) {
  if (!std::filesystem::exists("/usr/bin/python3")) GTEST_SKIP() << "no /usr/bin/python3";
  auto c = start("crash");
  ASSERT_TRUE(c);
  CancelToken cancel;
  ChildJobEnd end = run(*c, 20s, cancel);
  ASSERT_EQ(end.kind, ChildJobEnd::Kind::kCrashed);
  ASSERT_TRUE(end.exit.has_value());
  EXPECT_EQ(end.exit->exit_code, 7);
  const Json r = assemble_result(kSpec, end, 20s, Json::object());
  EXPECT_EQ(kind_of(r), "crash");
  EXPECT_TRUE(r["compiled"].get<bool>()) << "the last partial result is kept";
  EXPECT_NE(r["runtime_error"].get<std::string>().find("exited with code 7"), std::string::npos)
      << r["runtime_error"];
  EXPECT_NE(r["stderr"].get<std::string>().find("about to fail"), std::string::npos);
}

TEST(ChildChannelTest, ABrokenProtocolIsAWorkerError) {
  if (!std::filesystem::exists("/usr/bin/python3")) GTEST_SKIP() << "no /usr/bin/python3";
  for (const char* mode : {"bad_frame", "no_result"}) {
    SCOPED_TRACE(mode);
    auto c = start(mode);
    ASSERT_TRUE(c);
    CancelToken cancel;
    ChildJobEnd end = run(*c, 20s, cancel);
    ASSERT_EQ(end.kind, ChildJobEnd::Kind::kProtocolError);
    const Json r = assemble_result(kSpec, end, 20s, Json::object());
    EXPECT_EQ(kind_of(r), "worker");
    EXPECT_NE(r["runtime_error"].get<std::string>().find("broke the protocol"), std::string::npos);
  }
}

TEST(ChildChannelTest, CancellingStopsTheJobWithErrorKindCancelled) {
  if (!std::filesystem::exists("/usr/bin/python3")) GTEST_SKIP() << "no /usr/bin/python3";
  auto c = start("hang");
  ASSERT_TRUE(c);
  CancelToken cancel;
  std::thread canceller([&cancel] {
    std::this_thread::sleep_for(500ms);
    cancel.cancel();
  });
  ChildJobEnd end = run(*c, 30s, cancel);
  canceller.join();
  ASSERT_EQ(end.kind, ChildJobEnd::Kind::kCancelled);
  const Json r = assemble_result(kSpec, end, 30s, Json::object());
  EXPECT_EQ(kind_of(r), "cancelled");
  EXPECT_TRUE(model::error_kind_from(kind_of(r)).has_value());
}

TEST(ChildChannelTest, AChildOfAnotherProtocolMajorIsRefusedBeforeAnyJob) {
  if (!std::filesystem::exists("/usr/bin/python3")) GTEST_SKIP() << "no /usr/bin/python3";
  auto c = start("result", worker_protocol::kProtocolMajor + 1);
  ASSERT_TRUE(c);
  OwnExit exits(c->process);
  Status s = wait_child_ready(c->channel, exits, std::chrono::steady_clock::now() + 20s);
  EXPECT_EQ(s.code(), ErrorCode::kFailedPrecondition) << s.to_string();
  EXPECT_NE(s.message().find("server speaks"), std::string::npos) << s.message();
}

TEST(ChildChannelTest, AChildThatDiesBeforeReadyIsUnavailableWithItsOutput) {
  if (!std::filesystem::exists("/usr/bin/python3")) GTEST_SKIP() << "no /usr/bin/python3";
  auto pipes = ChildPipes::create();
  ASSERT_TRUE(pipes.is_ok());
  worker_protocol::LaunchOptions o;
  o.argv = {"/bin/sh", "-c", "echo cannot start >&2; exit 3"};
  o.fds = {{1, pipes->out_w.get()}, {2, pipes->err_w.get()}, {3, pipes->proto_theirs.get()}};
  auto p = worker_protocol::launch_process(o);
  ASSERT_TRUE(p.is_ok());
  ChildChannel channel;
  channel.pid = p->pid();
  ASSERT_TRUE(pipes->attach(channel).is_ok());
  OwnExit exits(*p);
  Status s = wait_child_ready(channel, exits, std::chrono::steady_clock::now() + 20s);
  EXPECT_EQ(s.code(), ErrorCode::kUnavailable) << s.to_string();
  EXPECT_NE(s.message().find("cannot start"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace kforge::workers
