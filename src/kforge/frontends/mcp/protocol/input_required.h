// Multi-round requests of revision 2026-07-28 (SEP-2322): instead of sending the client a
// request (elicitation, sampling, roots) in the middle of a call, a tools/call, prompts/get or
// resources/read answers
//
//   {"resultType": "input_required",
//    "inputRequests": {"<key>": {"method": "elicitation/create", "params": {...}}, ...},
//    "requestState": "<opaque>"}
//
// and the client retries the same request (new id, same params) with
// params.inputResponses {"<key>": <ElicitResult | CreateMessageResult | ListRootsResult>} and
// the requestState echoed verbatim.
//
// requestState is attacker input: seal_state signs it (HMAC-SHA256), binds it to what it was
// issued for (method and name) and gives it an expiry, so a tampered, expired or transplanted
// state is refused (-32602). Keys the server did not ask for are ignored; a missing answer is
// asked again (a new input_required, not an error).
//
// The signing key. The revision is stateless: the retry may reach the server after a restart,
// or another server behind the same address. So the key is not drawn per process but read
// from a key file (use_key_file: kforge serve and kforge mcp use <data dir>/mcp-state.key,
// created on first use with mode 0600, or --mcp-state-key-file, one file for every node of a
// deployment), and a state names the key that signed it (the first 16 hex digits of its
// SHA-256): a state signed with another key is refused with an error that says so (another
// server without the shared key file, or a key that changed), never mistaken for tampering.
// Without use_key_file (unit tests, fuzzers) a key is drawn per process.
#pragma once

#include <chrono>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>

#include "kforge/common/json.h"
#include "kforge/common/status.h"

namespace kforge::frontends::mcp::mrtr {

// Signs states with the key in `path` (64 lowercase hex characters: 256 bits), creating the
// file (mode 0600) with a fresh key when it does not exist. Call before serving. An unreadable
// or malformed file is an error naming it.
Status use_key_file(const std::filesystem::path& path);

// An opaque requestState carrying `payload`, valid for `binding` (e.g. "tools/call x") until
// `ttl` from now.
std::string seal_state(const Json& payload, std::string_view binding,
                       std::chrono::seconds ttl = std::chrono::minutes(10));
// The payload of a sealed state; kInvalidArgument (field "requestState") when it was altered,
// has expired or was issued for another binding.
StatusOr<Json> open_state(std::string_view state, std::string_view binding);

// The input requests of one round, each kept only when the client declared the capability it
// needs (elicitation, sampling, roots) in `client_capabilities`.
class Round {
 public:
  explicit Round(Json client_capabilities) : caps_(std::move(client_capabilities)) {}
  Round& elicit(const std::string& key, std::string message, Json requested_schema);
  Round& sample(const std::string& key, std::string text, int max_tokens);
  Round& list_roots(const std::string& key);
  bool empty() const { return requests_.empty(); }
  // The InputRequiredResult; `state` becomes its requestState when set.
  Json result(std::optional<std::string> state = std::nullopt) const;

 private:
  void add(const std::string& key, const char* capability, const char* method, Json params);
  const Json caps_;
  Json requests_ = Json::object();
};

// params.inputResponses: an empty object when absent or null; kInvalidArgument naming the
// field when it is not an object.
StatusOr<Json> input_responses(const Json& params);
// The accepted elicitation content for `key` ({"action": "accept", "content": {...}}), or null.
Json accepted_content(const Json& responses, const std::string& key);
// The text of a sampling answer (CreateMessageResult) for `key`, or nullopt.
std::optional<std::string> sampled_text(const Json& responses, const std::string& key);

}  // namespace kforge::frontends::mcp::mrtr
