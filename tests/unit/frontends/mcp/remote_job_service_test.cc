#include "kforge/frontends/mcp/remote_job_service.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <boost/asio/thread_pool.hpp>
#include <future>
#include <thread>

#include "fakes/fake_job_service.h"
#include "frontends/http/server_harness.h"
#include "kforge/common/error_mapping.h"
#include "kforge/jobs/job_view.h"

namespace kforge::frontends::mcp {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

TEST(RemoteJobServiceTest, JobViewsRoundTrip) {
  model::JobRecord job;
  job.id = "abc";
  job.kind = model::JobKind::kCompare;
  job.state = model::JobState::kSucceeded;
  job.device = "cpu";
  job.attempts = 1;
  job.created_ms = 1790000000123;
  job.finished_ms = 1790000001456;
  job.result = {{"compiled", true},
                {"speedup", 2.5},
                {"runtime_stats", {{"mean", 2.0}, {"median", 1.9}}},
                {"ref_runtime", 1.0}};
  for (const Json& view : {jobs::job_status_view(job), jobs::job_result_view(job)}) {
    auto back = job_record_from_view(view);
    ASSERT_TRUE(back.is_ok());
    EXPECT_EQ(back->id, "abc");
    EXPECT_EQ(back->kind, model::JobKind::kCompare);
    EXPECT_EQ(back->state, model::JobState::kSucceeded);
    EXPECT_EQ(back->created_ms, job.created_ms);
    EXPECT_EQ(back->finished_ms, job.finished_ms);
    EXPECT_EQ(back->result["speedup"], 2.5);
    // Shown again (kforge mcp --server), the view is the same.
    EXPECT_EQ(jobs::job_status_view(*back), jobs::job_status_view(job));
  }
  // An older kforge's view: ISO times and kforge's states in `status`.
  auto old = job_record_from_view(
      Json{{"job_id", "x"}, {"status", "running"}, {"created_at", "2026-11-25T21:38:43.123Z"}});
  ASSERT_TRUE(old.is_ok());
  EXPECT_EQ(old->state, model::JobState::kRunning);
  EXPECT_EQ(old->created_ms, 1795642723123);
  EXPECT_FALSE(job_record_from_view(Json{{"status", "success"}}).is_ok());
}

TEST(RemoteJobServiceTest, ErrorBodiesBecomeTheSameStatus) {
  Status s =
      status_from_error_body(400, error_body(invalid_argument("bad", "kernel.io"), 400).dump());
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "bad");
  EXPECT_EQ(s.field_path(), "kernel.io");
  Status nested = status_from_error_body(
      400, R"({"error":{"code":"invalid_argument","message":"bad","field":"kernel.io"}})");
  EXPECT_EQ(nested.field_path(), "kernel.io");
  Status fastapi = status_from_error_body(500, R"({"error": "boom", "status": "error"})");
  EXPECT_EQ(fastapi.message(), "boom");
  EXPECT_EQ(status_from_error_body(404, "").code(), ErrorCode::kNotFound);
  EXPECT_EQ(status_from_error_body(502, "<html>").code(), ErrorCode::kUnavailable);
}

// A peer on the port that answers a status line without a number: a clear error, never a
// status of 0 taken for an answer.
TEST(RemoteJobServiceTest, AnAnswerWithoutAStatusCodeIsAnError) {
  int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  ASSERT_GE(listener, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(::listen(listener, 1), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(::getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  std::thread peer([listener] {
    int conn = ::accept(listener, nullptr, nullptr);
    if (conn < 0) return;
    char buf[4096];
    (void)::recv(conn, buf, sizeof buf, 0);
    const char answer[] = "HTTP/1.1 abc Nonsense\r\nContent-Length: 2\r\n\r\n{}";
    (void)::send(conn, answer, sizeof answer - 1, MSG_NOSIGNAL);
    ::close(conn);
  });
  auto client = RestClient::create(
      {"http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port)), "", seconds(5)});
  ASSERT_TRUE(client.is_ok());
  auto answer = client.value().call_json("GET", "/stats");
  peer.join();
  ::close(listener);
  ASSERT_FALSE(answer.is_ok());
  EXPECT_NE(answer.status().message().find("no HTTP status code"), std::string::npos)
      << answer.status().message();
}

TEST(RemoteJobServiceTest, RefusesUrlsItCannotUse) {
  EXPECT_FALSE(RestClient::create({"https://x", "", seconds(1)}).is_ok());
  EXPECT_FALSE(RestClient::create({"http://", "", seconds(1)}).is_ok());
  EXPECT_TRUE(RestClient::create({"http://[::1]:8000/prefix/", "", seconds(1)}).is_ok());
}

// The forwarding path end to end: RemoteJobService -> RestClient -> a real HttpServer with the
// REST routes -> FakeJobService.
TEST(RemoteJobServiceTest, ForwardsToTheRestApi) {
  testing::FakeJobService backend;
  boost::asio::thread_pool pool(2);
  http::HttpServer::Options options;
  options.port = 0;
  options.token = "secret";
  testing::ServerHarness harness(http::HttpServer::create(options, backend, pool));
  ASSERT_TRUE(harness.ok());
  const std::string url = "http://127.0.0.1:" + std::to_string(harness.port());

  auto unauthorized = RestClient::create({url, "", seconds(5)});
  RemoteJobService anonymous(std::move(unauthorized).value());
  EXPECT_EQ(anonymous.get("x").status().code(), ErrorCode::kUnauthenticated);

  RemoteJobService remote(RestClient::create({url, "secret", seconds(5)}).value(),
                          milliseconds(20));
  model::JobRequest request;
  request.kernel.source_code = "import torch";
  request.device = "cpu";
  auto job = remote.submit(request, "test");
  ASSERT_TRUE(job.is_ok()) << job.status().to_string();
  EXPECT_EQ(job->state, model::JobState::kQueued);
  request.device = "tpu:0";
  EXPECT_EQ(remote.submit(request, "test").status().field_path(), "device");

  std::promise<model::JobRecord> done;
  std::promise<std::string> running;
  bool running_set = false;
  ASSERT_TRUE(remote
                  .on_progress(job->id,
                               [&](const jobs::JobProgress& p) {
                                 if (!running_set && p.phase == "running") {
                                   running_set = true;
                                   running.set_value(p.job_id);
                                 }
                               })
                  .is_ok());
  ASSERT_TRUE(
      remote.when_done(job->id, [&](const model::JobRecord& r) { done.set_value(r); }).is_ok());
  ASSERT_TRUE(backend.start(job->id).is_ok());
  auto running_future = running.get_future();
  ASSERT_EQ(running_future.wait_for(seconds(5)), std::future_status::ready);
  ASSERT_TRUE(backend.finish(job->id, Json{{"compiled", true}, {"correctness", true}}).is_ok());
  auto done_future = done.get_future();
  ASSERT_EQ(done_future.wait_for(seconds(5)), std::future_status::ready);
  model::JobRecord finished = done_future.get();
  EXPECT_EQ(finished.state, model::JobState::kSucceeded);
  EXPECT_EQ(finished.result["correctness"], true);
  EXPECT_TRUE(remote.cancel(job->id, "x").is_ok());  // finished: left as it was
  EXPECT_EQ(remote.cancel("0123456789abcdef", "x").code(), ErrorCode::kNotFound);
  request.device = "cpu";
  auto second = remote.submit(request, "test");
  ASSERT_TRUE(second.is_ok());
  ASSERT_TRUE(remote.cancel(second->id, "the agent gave up").is_ok());
  auto cancelled = remote.get(second->id);
  ASSERT_TRUE(cancelled.is_ok());
  EXPECT_EQ(cancelled->state, model::JobState::kCancelled);
  EXPECT_EQ(cancelled->error, "the agent gave up");
  EXPECT_TRUE(remote.stats().is_object());
  harness.stop();
  pool.join();
  EXPECT_TRUE(remote.stats().contains("error"));  // the server is gone
}

}  // namespace
}  // namespace kforge::frontends::mcp
