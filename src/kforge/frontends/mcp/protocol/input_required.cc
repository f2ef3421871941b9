#include "kforge/frontends/mcp/protocol/input_required.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdint>
#include <memory>

#include "kforge/common/base64.h"
#include "kforge/common/error_mapping.h"
#include "kforge/common/files.h"
#include "kforge/common/hash.h"
#include "kforge/common/random.h"
#include "kforge/common/thread_annotations.h"
#include "kforge/frontends/mcp/protocol/jsonrpc.h"

namespace kforge::frontends::mcp::mrtr {
namespace {

struct SigningKey {
  std::string key;
  std::string id;  // the first 16 hex digits of sha256(key): named in every state
};

SigningKey make_key(std::string key) {
  std::string id = sha256_hex(key).substr(0, 16);
  return SigningKey{std::move(key), std::move(id)};
}

// Set once by use_key_file before serving; until then (tests) a key drawn per process.
Mutex key_mu;
std::shared_ptr<const SigningKey>& key_slot() REQUIRES(key_mu) {
  static std::shared_ptr<const SigningKey> slot =
      std::make_shared<const SigningKey>(make_key(random_hex(32)));
  return slot;
}

std::shared_ptr<const SigningKey> signing_key() {
  MutexLock lock(key_mu);
  return key_slot();
}

bool is_key_text(std::string_view text) {
  return text.size() == 64 && std::all_of(text.begin(), text.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
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

Status use_key_file(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) {
    const std::string fresh = random_hex(32);
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0) {
      const std::string line = fresh + "\n";
      const bool written =
          ::write(fd, line.data(), line.size()) == static_cast<ssize_t>(line.size());
      const bool synced = ::fsync(fd) == 0;
      ::close(fd);
      if (!written || !synced) {
        return io_error("writing the MCP requestState key " + path.string());
      }
    } else if (errno != EEXIST) {  // EEXIST: another process made it first; read theirs
      return errno_error("creating the MCP requestState key " + path.string(), errno);
    }
  }
  KF_ASSIGN_OR_RETURN(std::string text, read_file(path));
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r'))
    text.pop_back();
  if (!is_key_text(text)) {
    return invalid_argument("the MCP requestState key " + path.string() +
                                " must hold 64 lowercase hex characters (256 bits)",
                            "mcp-state-key-file");
  }
  auto key = std::make_shared<const SigningKey>(make_key(std::move(text)));
  MutexLock lock(key_mu);
  key_slot() = std::move(key);
  return Status::ok();
}

std::string seal_state(const Json& payload, std::string_view binding, std::chrono::seconds ttl) {
  const auto key = signing_key();
  Json envelope = {
      {"p", payload}, {"b", binding}, {"e", now_seconds() + ttl.count()}, {"k", key->id}};
  std::string body = base64_encode(envelope.dump());
  return body + "." + hmac_sha256_hex(key->key, body);
}

StatusOr<Json> open_state(std::string_view state, std::string_view binding) {
  size_t dot = state.rfind('.');
  if (dot == std::string_view::npos) return bad_state("is malformed");
  std::string_view body = state.substr(0, dot);
  auto decoded = base64_decode(body);
  if (!decoded.is_ok()) return bad_state("is malformed");
  auto envelope = parse_json(*decoded);
  if (!envelope.is_ok() || !envelope->is_object()) return bad_state("is malformed");
  const auto key = signing_key();
  if (hmac_sha256_hex(key->key, body) != state.substr(dot + 1)) {
    // The key id is read before the check only to explain the refusal; nothing else is used.
    const std::string signer = envelope->value("k", std::string());
    if (!signer.empty() && signer != key->id) {
      return bad_state("was signed with another key (" + signer + ", this server's is " + key->id +
                       "): issued by another server that does not share this one's "
                       "--mcp-state-key-file, or before the key changed");
    }
    return bad_state("failed its integrity check (altered)");
  }
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
