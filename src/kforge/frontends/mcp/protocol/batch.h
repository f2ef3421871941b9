// JSON-RPC batches: an array of messages, which MCP receives only in protocol 2025-03-26.
// The responses to a batch's requests go back as one array once all of them are answered
// (a cancelled request contributes none); messages related to them (progress, logging) go
// to a separate channel because an array response cannot interleave them.
//
// Example (a transport):
//   KF_RETURN_IF_ERROR(check_batch(array, session->effective_version()));
//   auto batch = BatchCollector::create(expected, send_array, send_related);
//   for each request: dispatcher.handle(session, message, batch->channel());
//   for each invalid element: batch->add(error_response);
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string_view>

#include "kforge/common/json.h"
#include "kforge/common/status.h"
#include "kforge/common/thread_annotations.h"
#include "kforge/frontends/mcp/protocol/request_context.h"

namespace kforge::frontends::mcp {

// kInvalidArgument when `batch` is not allowed: a protocol version other than 2025-03-26, an
// empty array, or an `initialize` inside it.
Status check_batch(const Json& batch, std::string_view protocol_version);

class BatchCollector : public std::enable_shared_from_this<BatchCollector> {
 public:
  using ArrayCallback = std::function<void(Json responses)>;
  using RelatedCallback = std::function<void(const Json& message)>;

  // `expected`: how many answers to wait for (requests plus invalid elements). `done` runs
  // once, with the array of responses (possibly empty), on the thread of the last answer.
  static std::shared_ptr<BatchCollector> create(size_t expected, ArrayCallback done,
                                                RelatedCallback related);

  // A reply channel for one request of the batch.
  std::shared_ptr<ReplyChannel> channel();
  // Adds a response that needs no request (e.g. the error for an invalid element).
  void add(Json response);

 private:
  BatchCollector(size_t expected, ArrayCallback done, RelatedCallback related);
  void complete_one(std::optional<Json> response);

  class Channel;
  const RelatedCallback related_;
  Mutex mu_;
  size_t remaining_ GUARDED_BY(mu_);
  Json responses_ GUARDED_BY(mu_);
  ArrayCallback done_ GUARDED_BY(mu_);  // cleared once called
};

}  // namespace kforge::frontends::mcp
