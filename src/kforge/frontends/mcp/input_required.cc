#include "kforge/frontends/mcp/input_required.h"

#include <array>
#include <cstdint>

#include "kforge/common/base64.h"
#include "kforge/common/error_mapping.h"
#include "kforge/common/hash.h"
#include "kforge/common/random.h"
#include "kforge/frontends/mcp/jsonrpc.h"

namespace kforge::frontends::mcp::mrtr {
namespace {

// The process's signing key: states do not outlive the process (a client then starts over).
const std::string& signing_key() {
  static const std::string key = random_hex(32);
  return key;
}

std::string hmac_sha256_hex(std::string_view key, std::string_view message) {
  constexpr size_t kBlock = 64;
  std::string k(key);
  if (k.size() > kBlock) {
    Sha256Digest d = sha256(k);
    k.assign(reinterpret_cast<const char*>(d.data()), d.size());
  }
  k.resize(kBlock, '\0');
  std::string inner(kBlock, '\0');
  std::string outer(kBlock, '\0');
  for (size_t i = 0; i < kBlock; ++i) {
    inner[i] = static_cast<char>(k[i] ^ 0x36);
    outer[i] = static_cast<char>(k[i] ^ 0x5c);
  }
  Sha256Digest h = sha256(inner + std::string(message));
  return sha256_hex(outer + std::string(reinterpret_cast<const char*>(h.data()), h.size()));
}

int64_t now_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

Status bad_state(std::string why) {
  return invalid_argument("the requestState " + std::move(why) + "; start the request over",
                          "requestState");
}

}  // namespace

std::string seal_state(const Json& payload, std::string_view binding, std::chrono::seconds ttl) {
  Json envelope = {{"p", payload}, {"b", binding}, {"e", now_seconds() + ttl.count()}};
  std::string body = base64_encode(envelope.dump());
  return body + "." + hmac_sha256_hex(signing_key(), body);
}

StatusOr<Json> open_state(std::string_view state, std::string_view binding) {
  size_t dot = state.rfind('.');
  if (dot == std::string_view::npos) return bad_state("is malformed");
  std::string_view body = state.substr(0, dot);
  if (hmac_sha256_hex(signing_key(), body) != state.substr(dot + 1)) {
    return bad_state("failed its integrity check (altered, or issued by another server process)");
  }
  auto decoded = base64_decode(body);
  if (!decoded.is_ok()) return bad_state("is malformed");
  auto envelope = parse_json(*decoded);
  if (!envelope.is_ok() || !envelope->is_object()) return bad_state("is malformed");
  if (envelope->value("b", std::string()) != binding) {
    return bad_state("was issued for another request");
  }
  if (envelope->value("e", int64_t{0}) < now_seconds()) return bad_state("has expired");
  return envelope->value("p", Json());
}

Round& Round::elicit(const std::string& key, std::string message, Json requested_schema) {
  add(key, "elicitation", "elicitation/create",
      {{"message", std::move(message)}, {"requestedSchema", std::move(requested_schema)}});
  return *this;
}

Round& Round::sample(const std::string& key, std::string text, int max_tokens) {
  Json message = {{"role", "user"}, {"content", {{"type", "text"}, {"text", std::move(text)}}}};
  add(key, "sampling", "sampling/createMessage",
      {{"messages", Json::array({std::move(message)})}, {"maxTokens", max_tokens}});
  return *this;
}

Round& Round::list_roots(const std::string& key) {
  add(key, "roots", "roots/list", Json::object());
  return *this;
}

void Round::add(const std::string& key, const char* capability, const char* method, Json params) {
  auto cap = caps_.is_object() ? caps_.find(capability) : caps_.end();
  if (!caps_.is_object() || cap == caps_.end() || !cap->is_object()) return;
  requests_[key] = {{"method", method}, {"params", std::move(params)}};
}

Json Round::result(std::optional<std::string> state) const {
  Json r = {{"resultType", "input_required"}, {"inputRequests", requests_}};
  if (state) r["requestState"] = std::move(*state);
  return r;
}

StatusOr<Json> input_responses(const Json& params) {
  const Json* responses = jsonrpc::param(params, "inputResponses");
  if (responses == nullptr) return Json::object();
  if (!responses->is_object()) {
    return invalid_argument("must be an object mapping each inputRequests key to its answer, got " +
                                std::string(json_type_name(*responses)),
                            "inputResponses");
  }
  return *responses;
}

Json accepted_content(const Json& responses, const std::string& key) {
  auto it = responses.find(key);
  if (it == responses.end() || !it->is_object()) return nullptr;
  if (it->value("action", std::string()) != "accept") return nullptr;
  auto content = it->find("content");
  return content != it->end() && content->is_object() ? *content : Json(nullptr);
}

std::optional<std::string> sampled_text(const Json& responses, const std::string& key) {
  auto it = responses.find(key);
  if (it == responses.end() || !it->is_object()) return std::nullopt;
  auto content = it->find("content");
  if (content == it->end() || !content->is_object()) return std::nullopt;
  auto text = content->find("text");
  if (text == content->end() || !text->is_string()) return std::nullopt;
  return text->get<std::string>();
}

}  // namespace kforge::frontends::mcp::mrtr
