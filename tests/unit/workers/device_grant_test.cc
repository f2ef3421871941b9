// The device grant over a child's protocol channel (run_job_on_child with a DeviceGate):
// `device_request` answered by `device_grant` in request order, one holder at a time, and
// the grant given back when a job ends however it ends (result, cancel, timeout). The
// "child" is a thread on the other end of the real socket and pipes (no process: the
// launcher is what these tests leave out).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <fstream>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "kforge/worker_protocol/protocol.h"
#include "kforge/workers/child_channel.h"
#include "kforge/workers/device_gate.h"

namespace kforge::workers {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

class NoExits final : public ExitSource {
 public:
  int poll_fd() const override { return -1; }
  void on_readable() override {}
  std::optional<worker_protocol::ExitStatus> exit_of(pid_t) override { return std::nullopt; }
  bool alive() const override { return true; }
};

// The child's end: blocking reads and writes of frames.
struct FakeChildEnd {
  worker_protocol::UniqueFd proto, out_w, err_w;

  std::optional<Json> read() {
    worker_protocol::FrameDecoder decoder;
    char buf[4096];
    while (true) {
      if (auto m = decoder.next()) {
        if (!m->is_ok()) return std::nullopt;
        return m->value();
      }
      ssize_t n = ::read(proto.get(), buf, sizeof(buf));
      if (n <= 0) return std::nullopt;
      decoder.append(std::string_view(buf, static_cast<size_t>(n)));
    }
  }
  void send(const Json& m) {
    ASSERT_TRUE(worker_protocol::write_all(proto.get(), worker_protocol::encode_frame(m),
                                           Clock::now() + std::chrono::seconds(5)));
  }
};

struct Wired {
  ChildChannel channel;
  FakeChildEnd child;
};

std::unique_ptr<Wired> wire() {
  auto pipes = ChildPipes::create();
  EXPECT_TRUE(pipes.is_ok());
  auto w = std::make_unique<Wired>();
  w->child.proto = std::move(pipes->proto_theirs);
  w->child.out_w = std::move(pipes->out_w);
  w->child.err_w = std::move(pipes->err_w);
  EXPECT_TRUE(pipes->attach(w->channel));
  return w;
}

Json job(const std::string& id) {
  return Json{{"type", "job"}, {"job", {{"job_id", id}}}};
}

// A well-behaved child: reads its job, asks for the device, notes when it got it, holds it
// for `hold`, sends its result.
void polite_child(FakeChildEnd& c, milliseconds hold, std::atomic<int>& inside,
                  std::atomic<int>& most, std::mutex& mu, std::vector<std::string>& order) {
  auto j = c.read();
  if (!j) return;
  c.send(Json{{"type", "device_request"}});
  auto grant = c.read();
  if (!grant || grant->value("type", "") != "device_grant") return;
  int now = ++inside;
  int seen = most.load();
  while (now > seen && !most.compare_exchange_weak(seen, now)) {
  }
  {
    std::lock_guard lock(mu);
    order.push_back((*j)["job"]["job_id"].get<std::string>());
  }
  std::this_thread::sleep_for(hold);
  --inside;
  c.send(Json{{"type", "result"}, {"result", {{"ok", true}}}});
  c.out_w.reset();
  c.err_w.reset();
}

TEST(DeviceGrantTest, WithoutAGateARequestIsGrantedAtOnce) {
  auto w = wire();
  std::atomic<int> inside{0}, most{0};
  std::mutex mu;
  std::vector<std::string> order;
  std::thread child([&] { polite_child(w->child, milliseconds(0), inside, most, mu, order); });
  CancelToken cancel;
  NoExits exits;
  ChildJobEnd end = run_job_on_child(w->channel, job("solo"), milliseconds(5000), cancel, {}, exits,
                                     ChildLimits{}, nullptr);
  child.join();
  EXPECT_EQ(end.kind, ChildJobEnd::Kind::kResult);
  EXPECT_EQ(order, std::vector<std::string>{"solo"});
}

TEST(DeviceGrantTest, JobsSharingAGateHoldTheDeviceOneAtATimeInRequestOrder) {
  DeviceGate gate("cuda:0");
  std::atomic<int> inside{0}, most{0};
  std::mutex mu;
  std::vector<std::string> order;
  // The first job holds the device while the others ask for it.
  auto first = gate.request("blocker");
  ASSERT_TRUE(first.is_ok());
  constexpr int kJobs = 4;
  std::vector<std::unique_ptr<Wired>> wired;
  std::vector<std::thread> children, supervisors;
  std::vector<ChildJobEnd::Kind> kinds(kJobs);
  for (int i = 0; i < kJobs; ++i)
    wired.push_back(wire());
  for (int i = 0; i < kJobs; ++i) {
    children.emplace_back(
        [&, i] { polite_child(wired[i]->child, milliseconds(20), inside, most, mu, order); });
    supervisors.emplace_back([&, i] {
      CancelToken cancel;
      NoExits exits;
      kinds[i] = run_job_on_child(wired[i]->channel, job("job-" + std::to_string(i)),
                                  milliseconds(10000), cancel, {}, exits, ChildLimits{}, &gate)
                     .kind;
    });
    // Request order is job-0, job-1, ...: wait until this one is queued.
    const auto until = Clock::now() + std::chrono::seconds(5);
    while (gate.status()["waiting"].get<int>() < i + 1 && Clock::now() < until)
      std::this_thread::sleep_for(milliseconds(1));
  }
  EXPECT_EQ(gate.status()["waiting"], kJobs);
  {
    // Under the lock: the children's writes are ordered after this read through sockets and
    // an eventfd, which ThreadSanitizer does not see.
    std::lock_guard lock(mu);
    EXPECT_TRUE(order.empty());  // nobody runs GPU work while the blocker holds the device
  }
  first->reset();
  for (auto& t : supervisors)
    t.join();
  for (auto& t : children)
    t.join();
  for (auto k : kinds)
    EXPECT_EQ(k, ChildJobEnd::Kind::kResult);
  EXPECT_EQ(most.load(), 1);
  EXPECT_EQ(order, (std::vector<std::string>{"job-0", "job-1", "job-2", "job-3"}));
  EXPECT_TRUE(gate.status()["holder"].is_null());
}

// A child that gets the grant and then never answers (hangs, or is cancelled).
void hanging_child(FakeChildEnd& c, std::atomic<bool>& granted) {
  if (!c.read()) return;
  c.send(Json{{"type", "device_request"}});
  auto grant = c.read();
  granted = grant && grant->value("type", "") == "device_grant";
  while (c.read()) {  // until the supervisor's end closes
  }
}

TEST(DeviceGrantTest, ATimedOutHolderGivesTheDeviceBack) {
  DeviceGate gate("cuda:0");
  auto w = wire();
  std::atomic<bool> granted{false};
  std::thread child([&] { hanging_child(w->child, granted); });
  CancelToken cancel;
  NoExits exits;
  ChildJobEnd end = run_job_on_child(w->channel, job("hangs"), milliseconds(300), cancel, {}, exits,
                                     ChildLimits{}, &gate);
  EXPECT_EQ(end.kind, ChildJobEnd::Kind::kTimeout);
  EXPECT_TRUE(granted.load());
  EXPECT_TRUE(gate.status()["holder"].is_null());
  auto next = gate.request("next");
  ASSERT_TRUE(next.is_ok());
  EXPECT_TRUE((*next)->granted());
  w->channel.proto.reset();
  child.join();
}

TEST(DeviceGrantTest, ACancelledWaiterLeavesTheQueueAndACancelledHolderFreesTheDevice) {
  DeviceGate gate("cuda:0");
  auto holder = wire();
  auto waiter = wire();
  std::atomic<bool> holder_granted{false}, waiter_granted{false};
  std::thread hc([&] { hanging_child(holder->child, holder_granted); });
  std::thread wc([&] { hanging_child(waiter->child, waiter_granted); });
  CancelToken cancel_holder, cancel_waiter;
  ChildJobEnd holder_end, waiter_end;
  std::thread hs([&] {
    NoExits exits;
    holder_end = run_job_on_child(holder->channel, job("holder"), milliseconds(10000),
                                  cancel_holder, {}, exits, ChildLimits{}, &gate);
  });
  const auto until = Clock::now() + std::chrono::seconds(5);
  while (!holder_granted && Clock::now() < until)
    std::this_thread::sleep_for(milliseconds(1));
  ASSERT_TRUE(holder_granted.load());
  std::thread ws([&] {
    NoExits exits;
    waiter_end = run_job_on_child(waiter->channel, job("waiter"), milliseconds(10000),
                                  cancel_waiter, {}, exits, ChildLimits{}, &gate);
  });
  while (gate.status()["waiting"].get<int>() < 1 && Clock::now() < until)
    std::this_thread::sleep_for(milliseconds(1));
  EXPECT_EQ(gate.status()["waiting"], 1);
  cancel_waiter.cancel();
  ws.join();
  EXPECT_EQ(waiter_end.kind, ChildJobEnd::Kind::kCancelled);
  EXPECT_FALSE(waiter_granted.load());
  EXPECT_EQ(gate.status()["waiting"], 0);
  EXPECT_EQ(gate.status()["holder"], "holder");
  cancel_holder.cancel();
  hs.join();
  EXPECT_EQ(holder_end.kind, ChildJobEnd::Kind::kCancelled);
  EXPECT_TRUE(gate.status()["holder"].is_null());
  holder->channel.proto.reset();
  waiter->channel.proto.reset();
  hc.join();
  wc.join();
}

TEST(DeviceGrantTest, DeviceReleaseGivesTheDeviceBackBeforeTheResult) {
  DeviceGate gate("cuda:0");
  auto w = wire();
  std::atomic<bool> free_after_release{false};
  std::thread child([&] {
    if (!w->child.read()) return;
    w->child.send(Json{{"type", "device_request"}});
    if (!w->child.read()) return;
    w->child.send(Json{{"type", "device_release"}});
    const auto until = Clock::now() + std::chrono::seconds(5);
    while (!gate.status()["holder"].is_null() && Clock::now() < until)
      std::this_thread::sleep_for(milliseconds(1));
    free_after_release = gate.status()["holder"].is_null();
    w->child.send(Json{{"type", "result"}, {"result", {{"ok", true}}}});
    w->child.out_w.reset();
    w->child.err_w.reset();
  });
  CancelToken cancel;
  NoExits exits;
  ChildJobEnd end = run_job_on_child(w->channel, job("releases"), milliseconds(10000), cancel, {},
                                     exits, ChildLimits{}, &gate);
  child.join();
  EXPECT_EQ(end.kind, ChildJobEnd::Kind::kResult);
  EXPECT_TRUE(free_after_release.load());
  EXPECT_GE(end.device_wait_ms, 0.0);
}

// --- Pipelined Python jobs: admitted shared, timed exclusive, stopped while they wait ---

// A real process standing in for the job's processes (its own process group, as a worker
// child is), so that SIGSTOP/SIGCONT/SIGKILL reach something the kernel can report on.
pid_t start_sleeper() {
  pid_t pid = ::fork();
  if (pid == 0) {
    ::setpgid(0, 0);
    while (true)
      ::pause();
  }
  ::setpgid(pid, pid);
  return pid;
}

// The state letter of /proc/<pid>/stat ('T' stopped, 'S' sleeping, 'Z' zombie).
char proc_state(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  std::getline(f, line);
  auto close = line.rfind(')');
  return close == std::string::npos || close + 2 >= line.size() ? '?' : line[close + 2];
}

bool wait_for_state(pid_t pid, char state) {
  const auto until = Clock::now() + std::chrono::seconds(5);
  while (proc_state(pid) != state && Clock::now() < until)
    std::this_thread::sleep_for(milliseconds(1));
  return proc_state(pid) == state;
}

std::unique_ptr<DeviceGate::Ticket> shared_ticket(DeviceGate& gate, const std::string& id) {
  auto t = gate.request(id, DeviceGate::Mode::kShared);
  EXPECT_TRUE(t.is_ok());
  EXPECT_TRUE((*t)->granted());
  return std::move(t).value();
}

TEST(DeviceGrantTest, AnAdmittedJobWaitsForItsExclusiveGrantStoppedAndRunsAloneAfter) {
  DeviceGate gate("cuda:0", 3);
  auto other = shared_ticket(gate, "other");  // another job's correctness phase
  auto w = wire();
  w->channel.pid = start_sleeper();
  std::atomic<bool> granted{false};
  std::atomic<bool> alone{false};
  std::thread child([&] {
    if (!w->child.read()) return;
    w->child.send(Json{{"type", "device_request"}, {"mode", "exclusive"}});
    auto grant = w->child.read();
    granted = grant && grant->value("type", "") == "device_grant";
    Json s = gate.status();
    alone = s["holder"] == "timed" && s["shared_holders"].empty();
    w->child.send(Json{{"type", "device_release"}});
    w->child.send(Json{{"type", "result"}, {"result", {{"ok", true}}}});
    w->child.out_w.reset();
    w->child.err_w.reset();
  });
  ChildJobEnd end;
  std::thread supervisor([&] {
    CancelToken cancel;
    NoExits exits;
    end = run_job_on_child(w->channel, job("timed"), milliseconds(10000), cancel, {}, exits,
                           ChildLimits{}, &gate, shared_ticket(gate, "timed"));
  });
  // Its shared admission went back when it asked; it waits for `other`, stopped.
  EXPECT_TRUE(wait_for_state(w->channel.pid, 'T'));
  Json s = gate.status();
  EXPECT_EQ(s["shared_holders"], Json::array({"other"}));
  EXPECT_EQ(s["waiting_exclusive"], 1);
  EXPECT_FALSE(granted.load());
  std::this_thread::sleep_for(milliseconds(20));
  other.reset();
  supervisor.join();
  child.join();
  EXPECT_EQ(end.kind, ChildJobEnd::Kind::kResult);
  EXPECT_TRUE(granted.load());
  EXPECT_TRUE(alone.load());
  EXPECT_GE(end.device_wait_ms, 15.0);
  ASSERT_EQ(end.device_grants.size(), 1u);
  EXPECT_LE(end.device_grants[0]["granted_at_ms"].get<double>(),
            end.device_grants[0]["released_at_ms"].get<double>());
  int status = 0;
  ASSERT_EQ(::waitpid(w->channel.pid, &status, 0), w->channel.pid);
  EXPECT_TRUE(WIFSIGNALED(status));  // the job's processes are killed at its end
  EXPECT_TRUE(gate.status()["holder"].is_null());
}

TEST(DeviceGrantTest, AChildWarmingBesideTheJobsIsStoppedWhileAnExclusiveGrantIsIn) {
  DeviceGate gate("cuda:0", 3);
  auto w = wire();
  w->channel.pid = start_sleeper();
  auto warming = w->channel.warm_beside(gate);
  EXPECT_EQ(gate.status()["warming"], 1);
  EXPECT_TRUE(wait_for_state(w->channel.pid, 'S'));
  {
    auto timed = gate.request("timed", DeviceGate::Mode::kExclusive);
    ASSERT_TRUE(timed.is_ok());
    ASSERT_TRUE((*timed)->granted());
    EXPECT_TRUE(wait_for_state(w->channel.pid, 'T'));
  }
  EXPECT_TRUE(wait_for_state(w->channel.pid, 'S'));  // continued once no holder is left
  auto timed = gate.request("timed-again", DeviceGate::Mode::kExclusive);
  ASSERT_TRUE(timed.is_ok());
  EXPECT_TRUE(wait_for_state(w->channel.pid, 'T'));
  warming.reset();  // ready: no longer registered, so continued although the grant is in
  EXPECT_TRUE(wait_for_state(w->channel.pid, 'S'));
  EXPECT_EQ(gate.status()["warming"], 0);
  EXPECT_EQ(gate.status()["warming_pauses"], 2);
  w->channel.kill_all();
  int status = 0;
  ASSERT_EQ(::waitpid(w->channel.pid, &status, 0), w->channel.pid);
}

TEST(DeviceGrantTest, AChannelDestroyedWhileItsWarmUpIsStoppedContinuesItFirst) {
  // Without pipelining the registration lives in the channel (ChildChannel::warming), so a
  // pool that retires a child during a timed region must not leave its processes stopped.
  DeviceGate gate("cuda:0", 1);
  auto w = wire();
  const pid_t pid = start_sleeper();
  w->channel.pid = pid;
  w->channel.warming = w->channel.warm_beside(gate);
  auto timed = gate.request("timed", DeviceGate::Mode::kExclusive);
  ASSERT_TRUE(timed.is_ok());
  ASSERT_TRUE((*timed)->granted());
  EXPECT_TRUE(wait_for_state(pid, 'T'));
  w.reset();
  EXPECT_TRUE(wait_for_state(pid, 'S'));
  EXPECT_EQ(gate.status()["warming"], 0);
  EXPECT_EQ(gate.status()["warmed"], 1);
  ::kill(-pid, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
}

TEST(DeviceGrantTest, AJobStoppedWhileItWaitsIsStillKilledAtItsTimeout) {
  DeviceGate gate("cuda:0", 2);
  auto other = shared_ticket(gate, "never-releases");
  auto w = wire();
  w->channel.pid = start_sleeper();
  std::atomic<bool> granted{false};
  std::thread child([&] { hanging_child(w->child, granted); });
  CancelToken cancel;
  NoExits exits;
  ChildJobEnd end = run_job_on_child(w->channel, job("stopped"), milliseconds(300), cancel, {},
                                     exits, ChildLimits{}, &gate, shared_ticket(gate, "stopped"));
  EXPECT_EQ(end.kind, ChildJobEnd::Kind::kTimeout);
  EXPECT_FALSE(granted.load());
  int status = 0;
  ASSERT_EQ(::waitpid(w->channel.pid, &status, 0), w->channel.pid);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_EQ(WTERMSIG(status), SIGKILL);
  Json s = gate.status();
  EXPECT_EQ(s["waiting"], 0);  // its exclusive request left the queue
  EXPECT_EQ(s["shared_holders"], Json::array({"never-releases"}));
  EXPECT_TRUE(end.device_grants.empty());
  w->channel.proto.reset();
  child.join();
}

TEST(DeviceGrantTest, AJobMayAskAgainAfterARelease) {
  DeviceGate gate("cuda:0", 2);
  auto w = wire();
  std::thread child([&] {
    if (!w->child.read()) return;
    for (int i = 0; i < 2; ++i) {
      w->child.send(Json{{"type", "device_request"}, {"mode", "exclusive"}});
      if (!w->child.read()) return;
      w->child.send(Json{{"type", "device_release"}});
    }
    w->child.send(Json{{"type", "result"}, {"result", {{"ok", true}}}});
    w->child.out_w.reset();
    w->child.err_w.reset();
  });
  CancelToken cancel;
  NoExits exits;
  ChildJobEnd end = run_job_on_child(w->channel, job("twice"), milliseconds(10000), cancel, {},
                                     exits, ChildLimits{}, &gate, shared_ticket(gate, "twice"));
  child.join();
  EXPECT_EQ(end.kind, ChildJobEnd::Kind::kResult);
  EXPECT_EQ(end.device_grants.size(), 2u);
  EXPECT_EQ(gate.status()["exclusive_grants"], 2);
  EXPECT_TRUE(gate.status()["shared_holders"].empty());
}

TEST(DeviceGrantTest, AnUnknownRequestModeIsAProtocolErrorNamingTheField) {
  DeviceGate gate("cuda:0", 2);
  auto w = wire();
  std::thread child([&] {
    if (!w->child.read()) return;
    w->child.send(Json{{"type", "device_request"}, {"mode", "shared-please"}});
    while (w->child.read()) {
    }
  });
  CancelToken cancel;
  NoExits exits;
  ChildJobEnd end = run_job_on_child(w->channel, job("odd"), milliseconds(10000), cancel, {}, exits,
                                     ChildLimits{}, &gate, shared_ticket(gate, "odd"));
  EXPECT_EQ(end.kind, ChildJobEnd::Kind::kProtocolError);
  EXPECT_NE(end.detail.find("device_request.mode"), std::string::npos) << end.detail;
  EXPECT_TRUE(gate.status()["shared_holders"].empty());  // its admission went back
  w->channel.proto.reset();
  child.join();
}

}  // namespace
}  // namespace kforge::workers

namespace kforge::workers {
namespace {

// A deferred teardown (the answer goes out while the processes end): the job's grant is
// handed back to the caller instead of given back, so the device's next grant still waits
// for the end of its processes; the output written before the result is kept.
TEST(DeviceGrantTest, ADeferredTeardownHandsTheJobsGrantToTheCaller) {
  DeviceGate gate("cuda:0");
  auto w = wire();
  std::thread child([&] {
    auto j = w->child.read();
    ASSERT_TRUE(j.has_value());
    w->child.send(Json{{"type", "device_request"}});
    auto grant = w->child.read();
    ASSERT_TRUE(grant.has_value());
    const std::string line = "printed before the result\n";
    ASSERT_EQ(::write(w->child.out_w.get(), line.data(), line.size()),
              static_cast<ssize_t>(line.size()));
    w->child.send(Json{{"type", "result"}, {"result", {{"ok", true}}}});
    // Still "tearing down": the pipes stay open until the caller's teardown.
  });
  CancelToken cancel;
  NoExits exits;
  ChildJobEnd end =
      run_job_on_child(w->channel, job("deferred"), milliseconds(5000), cancel, {}, exits,
                       ChildLimits{}, &gate, nullptr, AfterResult::kDeferTeardown);
  child.join();
  EXPECT_EQ(end.kind, ChildJobEnd::Kind::kResult);
  EXPECT_TRUE(end.teardown_deferred);
  EXPECT_NE(end.stdout_capture.text().find("printed before the result"), std::string::npos);
  ASSERT_NE(end.held, nullptr);
  EXPECT_TRUE(end.held->granted());
  auto next = gate.request("next");
  ASSERT_TRUE(next.is_ok());
  EXPECT_FALSE((*next)->granted()) << "the next job got the device before the teardown";
  end.held.reset();
  EXPECT_TRUE((*next)->wait_until(Clock::now() + milliseconds(5000)));

  // Without the deferral the grant goes back before run_job_on_child returns.
  auto w2 = wire();
  std::atomic<int> inside{0}, most{0};
  std::mutex mu;
  std::vector<std::string> order;
  next->reset();
  std::thread polite([&] { polite_child(w2->child, milliseconds(0), inside, most, mu, order); });
  ChildJobEnd plain = run_job_on_child(w2->channel, job("plain"), milliseconds(5000), cancel, {},
                                       exits, ChildLimits{}, &gate);
  polite.join();
  EXPECT_FALSE(plain.teardown_deferred);
  EXPECT_EQ(plain.held, nullptr);
  auto after = gate.request("after");
  ASSERT_TRUE(after.is_ok());
  EXPECT_TRUE((*after)->granted());
}

// A judge kept between jobs (AfterResult::kKeepChild) is kept only where its processes can be
// counted (a cgroup): without one the job is torn down as any other, its grant given back.
TEST(DeviceGrantTest, KeepingAChildNeedsItsCgroup) {
  DeviceGate gate("cuda:0");
  auto w = wire();
  std::thread child([&] {
    auto j = w->child.read();
    ASSERT_TRUE(j.has_value());
    w->child.send(Json{{"type", "result"}, {"result", {{"ok", true}}}});
  });
  CancelToken cancel;
  NoExits exits;
  ChildJobEnd end = run_job_on_child(w->channel, job("kept"), milliseconds(5000), cancel, {}, exits,
                                     ChildLimits{}, &gate, nullptr, AfterResult::kKeepChild);
  child.join();
  EXPECT_EQ(end.kind, ChildJobEnd::Kind::kResult);
  EXPECT_FALSE(end.kept);
  EXPECT_FALSE(end.teardown_deferred);
  EXPECT_EQ(end.held, nullptr);
}

// Between a kept judge's jobs: `idle` and the next `ready` may arrive in one read; the wait
// for `idle` must leave `ready` for the next look, and a closed socket is the child gone.
TEST(DeviceGrantTest, AKeptJudgesMessagesAreReadOneAtATime) {
  auto w = wire();
  std::string both = worker_protocol::encode_frame(Json{{"type", "progress"}}) +
                     worker_protocol::encode_frame(Json{{"type", "idle"}}) +
                     worker_protocol::encode_frame(Json{
                         {"type", "ready"},
                         {"protocol", {{"major", worker_protocol::kProtocolMajor}, {"minor", 0}}},
                         {"jobs_done", 1}});
  ASSERT_TRUE(worker_protocol::write_all(w->child.proto.get(), both,
                                         Clock::now() + std::chrono::seconds(5)));
  EXPECT_TRUE(await_message_of(w->channel, "idle", Clock::now() + milliseconds(2000)));
  EXPECT_FALSE(w->channel.ready);
  EXPECT_EQ(next_message_of(w->channel, "ready"), ChildMessage::kArrived);
  EXPECT_TRUE(w->channel.ready);
  EXPECT_EQ(w->channel.ready_message.value("jobs_done", 0), 1);
  EXPECT_EQ(next_message_of(w->channel, "ready"), ChildMessage::kNotYet);
  EXPECT_FALSE(await_message_of(w->channel, "idle", Clock::now() + milliseconds(50)));
  w->child.proto.reset();
  EXPECT_EQ(next_message_of(w->channel, "ready"), ChildMessage::kGone);
}

}  // namespace
}  // namespace kforge::workers
