#include "kforge/frontends/mcp/protocol/batch.h"

#include "kforge/frontends/mcp/protocol/protocol.h"

namespace kforge::frontends::mcp {

Status check_batch(const Json& batch, std::string_view protocol_version) {
  if (!batches_allowed(protocol_version)) {
    return invalid_argument("JSON-RPC batches are not supported in protocol version " +
                            std::string(protocol_version) +
                            " (only 2025-03-26 has them): send one message per request");
  }
  if (batch.empty()) return invalid_argument("a JSON-RPC batch must not be empty");
  for (const Json& element : batch) {
    if (element.is_object() && element.value("method", Json()) == "initialize") {
      return invalid_argument("'initialize' must not be part of a JSON-RPC batch");
    }
  }
  return Status::ok();
}

class BatchCollector::Channel : public ReplyChannel {
 public:
  explicit Channel(std::shared_ptr<BatchCollector> batch) : batch_(std::move(batch)) {}
  void send_related(const Json& message) override {
    if (batch_->related_) batch_->related_(message);
  }
  void send_response(const Json& response) override { batch_->complete_one(response); }
  void abandon() override { batch_->complete_one(std::nullopt); }

 private:
  std::shared_ptr<BatchCollector> batch_;
};

std::shared_ptr<BatchCollector> BatchCollector::create(size_t expected, ArrayCallback done,
                                                       RelatedCallback related) {
  return std::shared_ptr<BatchCollector>(
      new BatchCollector(expected, std::move(done), std::move(related)));
}

BatchCollector::BatchCollector(size_t expected, ArrayCallback done, RelatedCallback related)
    : related_(std::move(related)),
      remaining_(expected),
      responses_(Json::array()),
      done_(std::move(done)) {}

std::shared_ptr<ReplyChannel> BatchCollector::channel() {
  return std::make_shared<Channel>(shared_from_this());
}

void BatchCollector::add(Json response) {
  complete_one(std::move(response));
}

void BatchCollector::complete_one(std::optional<Json> response) {
  ArrayCallback done;
  Json responses;
  {
    MutexLock lock(mu_);
    if (remaining_ == 0) return;
    if (response) responses_.push_back(std::move(*response));
    if (--remaining_ > 0) return;
    done = std::move(done_);
    responses = std::move(responses_);
  }
  if (done) done(std::move(responses));
}

}  // namespace kforge::frontends::mcp
