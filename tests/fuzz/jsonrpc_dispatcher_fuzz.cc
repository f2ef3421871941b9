// libFuzzer target: the JSON-RPC side of MCP as both transports drive it: bytes -> parse_json
// -> batch check / jsonrpc::classify -> Dispatcher::handle, against the server catalog of
// `kforge serve` (kernel tools on a FakeJobService from tests/unit/fakes; the conformance
// fixtures are left out: they are test-only and some of them sleep).
// The first input byte chooses whether the session is initialized first (so tools/call and
// the other methods are reached) and whether submitted jobs finish, fail or stay queued.
// Oracles: no crash or sanitizer report; every request is answered exactly once with a
// well-formed JSON-RPC response.
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string_view>

#include "fakes/fake_job_service.h"
#include "kforge/common/json.h"
#include "kforge/frontends/mcp/protocol/batch.h"
#include "kforge/frontends/mcp/protocol/dispatcher.h"
#include "kforge/frontends/mcp/protocol/jsonrpc.h"
#include "kforge/frontends/mcp/server_catalog.h"

namespace {

namespace mcp = kforge::frontends::mcp;
using kforge::Json;

// Tasks posted by the dispatcher run after handle() returns (never inline), in order.
class QueueExecutor {
 public:
  kforge::frontends::http::BlockingExecutor executor() {
    return [this](std::function<void()> task) { tasks_.push_back(std::move(task)); };
  }
  void drain() {
    for (int i = 0; i < 10000 && !tasks_.empty(); ++i) {
      auto task = std::move(tasks_.front());
      tasks_.pop_front();
      task();
    }
    tasks_.clear();
  }

 private:
  std::deque<std::function<void()>> tasks_;
};

// Checks the one-response contract of ReplyChannel.
class CheckingChannel : public mcp::ReplyChannel {
 public:
  ~CheckingChannel() override = default;
  void send_related(const Json& message) override {
    if (done_ || !message.is_object()) __builtin_trap();
  }
  void send_response(const Json& response) override {
    if (done_ || !mcp::jsonrpc::classify(response).is_ok()) __builtin_trap();
    done_ = true;
  }
  void abandon() override {
    if (done_) __builtin_trap();
    done_ = true;
  }

 private:
  bool done_ = false;
};

Json initialize_request() {
  return Json{{"jsonrpc", "2.0"},
              {"id", 0},
              {"method", "initialize"},
              {"params",
               {{"protocolVersion", "2025-06-18"},
                {"capabilities", {{"sampling", Json::object()}, {"elicitation", Json::object()}}},
                {"clientInfo", {{"name", "fuzz"}, {"version", "1"}}}}}};
}

void dispatch(const mcp::Dispatcher& dispatcher, const std::shared_ptr<mcp::Session>& session,
              const Json& json) {
  auto message = mcp::jsonrpc::classify(json);
  if (!message.is_ok()) {
    (void)mcp::jsonrpc::readable_id(json);
    return;
  }
  std::shared_ptr<mcp::ReplyChannel> channel;
  if (message->kind == mcp::jsonrpc::MessageKind::kRequest) {
    channel = std::make_shared<CheckingChannel>();
  }
  (void)dispatcher.prefers_stream(*message);
  dispatcher.handle(session, *message, channel);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t mode = data[0];
  const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
  auto json = kforge::parse_json(text);
  if (!json.is_ok()) return 0;

  kforge::testing::FakeJobService jobs;
  QueueExecutor queue;
  mcp::ServerCatalogOptions options;
  auto catalog = mcp::build_server_catalog(jobs, queue.executor(), options);
  if (!catalog.is_ok()) __builtin_trap();
  mcp::Dispatcher dispatcher(**catalog, queue.executor());
  auto session = std::make_shared<mcp::Session>("fuzz", "peer fuzz");
  if ((mode & 1) != 0) {
    dispatch(dispatcher, session, initialize_request());
    dispatch(dispatcher, session,
             Json{{"jsonrpc", "2.0"}, {"method", "notifications/initialized"}});
    queue.drain();
  }
  if (json->is_array()) {
    if (mcp::check_batch(*json, session->effective_version()).is_ok()) {
      for (const Json& element : *json)
        dispatch(dispatcher, session, element);
    }
  } else {
    dispatch(dispatcher, session, *json);
  }
  queue.drain();
  // Let submitted jobs end, so the tools' result paths run too.
  for (const std::string& id : jobs.job_ids()) {
    if ((mode & 2) != 0) {
      (void)jobs.finish(id, Json{{"compiled", true}, {"correctness", true}, {"runtime", 1.0}});
    } else {
      (void)jobs.fail(id, "fuzz");
    }
  }
  queue.drain();
  session->close();
  return 0;
}
