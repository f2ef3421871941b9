// The device grant over a child's protocol channel (run_job_on_child with a DeviceGate):
// `device_request` answered by `device_grant` in request order, one holder at a time, and
// the grant given back when a job ends however it ends (result, cancel, timeout). The
// "child" is a thread on the other end of the real socket and pipes (no process: the
// launcher is what these tests leave out).
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdint>
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
  EXPECT_TRUE(order.empty());  // nobody runs GPU work while the blocker holds the device
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

}  // namespace
}  // namespace kforge::workers
