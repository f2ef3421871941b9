#include "kforge/frontends/mcp/protocol/modern.h"

#include <array>

#include "kforge/frontends/mcp/protocol/jsonrpc.h"

namespace kforge::frontends::mcp::modern {
namespace {

struct CacheHint {
  std::string_view method;
  int64_t ttl_ms;
  std::string_view scope;
};

// The catalogue (tools, prompts, templates, skills, discovery) changes only with the server's
// configuration: shared caches may keep it a minute. resources/list and resources/read may show
// a client's own jobs, so they are private and stale at once.
constexpr std::array<CacheHint, 8> kCacheHints = {{
    {"server/discover", 60000, "public"},
    {"tools/list", 60000, "public"},
    {"prompts/list", 60000, "public"},
    {"resources/templates/list", 60000, "public"},
    {"resources/list", 0, "private"},
    {"resources/read", 0, "private"},
    {"skills/list", 60000, "public"},
    {"skills/get", 60000, "public"},
}};

Rejection invalid_params(std::string message) {
  return Rejection{400, jsonrpc::kInvalidParams, std::move(message), std::nullopt};
}

class ModernReplyChannel : public ReplyChannel {
 public:
  ModernReplyChannel(std::shared_ptr<ReplyChannel> inner, std::string method, Json server_info,
                     bool retry)
      : inner_(std::move(inner)),
        method_(std::move(method)),
        server_info_(std::move(server_info)),
        retry_(retry) {}

  void send_related(const Json& message) override {
    // A request (it has an id and a method) never goes to the client at 2026-07-28.
    if (message.contains("id") && message.contains("method")) return;
    inner_->send_related(message);
  }

  void send_response(const Json& response) override {
    auto result = response.find("result");
    if (result == response.end()) return inner_->send_response(response);
    Json out = response;
    out["result"] = decorate_result(method_, *result, server_info_, retry_);
    inner_->send_response(out);
  }

  void abandon() override { inner_->abandon(); }

 private:
  const std::shared_ptr<ReplyChannel> inner_;
  const std::string method_;
  const Json server_info_;
  const bool retry_;
};

}  // namespace

const std::vector<std::string_view>& supported_versions() {
  static const std::vector<std::string_view> versions = {kVersion};
  return versions;
}

bool names_modern_version(std::string_view version) {
  // Revisions are dates (YYYY-MM-DD): they order as strings.
  return version.size() == 10 && version[4] == '-' && version[7] == '-' && version >= kVersion;
}

bool claims_modern(const Json& body) {
  if (!body.is_object()) return false;
  auto params = body.find("params");
  if (params == body.end()) return false;
  const Json* meta = jsonrpc::param(*params, "_meta");
  return meta != nullptr && meta->is_object() && meta->contains(kMetaProtocolVersion);
}

std::optional<Rejection> check_meta_shape(const Json& params) {
  const Json* meta = jsonrpc::param(params, "_meta");
  if (meta == nullptr || !meta->is_object()) {
    return invalid_params("params._meta: is required at revision 2026-07-28 (with \"" +
                          std::string(kMetaProtocolVersion) + "\" and \"" +
                          std::string(kMetaClientCapabilities) + "\")");
  }
  auto version = meta->find(kMetaProtocolVersion);
  if (version == meta->end() || !version->is_string()) {
    return invalid_params("params._meta[\"" + std::string(kMetaProtocolVersion) +
                          "\"]: is required and must be a string");
  }
  auto caps = meta->find(kMetaClientCapabilities);
  if (caps == meta->end() || !caps->is_object()) {
    return invalid_params("params._meta[\"" + std::string(kMetaClientCapabilities) +
                          "\"]: is required and must be an object (may be {})");
  }
  return std::nullopt;
}

std::optional<Rejection> check_version(std::string_view version) {
  for (std::string_view v : supported_versions()) {
    if (v == version) return std::nullopt;
  }
  Json supported = Json::array();
  std::string names;
  for (std::string_view v : supported_versions()) {
    supported.push_back(v);
    names += names.empty() ? std::string(v) : ", " + std::string(v);
  }
  return Rejection{400, kUnsupportedProtocolVersion,
                   "Unsupported protocol version '" + std::string(version) +
                       "' (supported without initialize: " + names + ")",
                   Json{{"supported", std::move(supported)}, {"requested", version}}};
}

StatusOr<RequestMeta> read_meta(const Json& params) {
  const Json& meta = params.at("_meta");
  RequestMeta out;
  out.version = meta.at(kMetaProtocolVersion).get<std::string>();
  out.client_capabilities = meta.at(kMetaClientCapabilities);
  if (auto info = meta.find(kMetaClientInfo); info != meta.end() && info->is_object()) {
    out.client_info = *info;
  }
  if (auto level = meta.find(kMetaLogLevel); level != meta.end() && !level->is_null()) {
    out.log_level = level->is_string() ? log_level_from(level->get<std::string>()) : std::nullopt;
    if (!out.log_level) {
      return invalid_argument(
          "params._meta[\"" + std::string(kMetaLogLevel) +
          "\"]: must be one of debug, info, notice, warning, error, critical, alert, emergency");
    }
  }
  return out;
}

int http_status_for_error(int code) {
  if (code == jsonrpc::kMethodNotFound) return 404;
  if (code == kMissingRequiredClientCapability) return 400;
  return 200;
}

Json decorate_result(std::string_view method, Json result, const Json& server_info, bool retry) {
  if (!result.is_object()) result = Json::object();
  if (!result.contains("resultType")) result["resultType"] = "complete";
  Json& meta = result["_meta"];
  if (!meta.is_object()) meta = Json::object();
  meta[std::string(kMetaServerInfo)] = server_info;
  if (retry || result["resultType"] != "complete") return result;
  for (const CacheHint& hint : kCacheHints) {
    if (hint.method != method) continue;
    if (!result.contains("ttlMs")) result["ttlMs"] = hint.ttl_ms;
    if (!result.contains("cacheScope")) result["cacheScope"] = hint.scope;
  }
  return result;
}

std::shared_ptr<ReplyChannel> wrap_channel(std::shared_ptr<ReplyChannel> inner, std::string method,
                                           Json server_info, bool retry) {
  return std::make_shared<ModernReplyChannel>(std::move(inner), std::move(method),
                                              std::move(server_info), retry);
}

bool is_retry(const Json& params) {
  return jsonrpc::param(params, "inputResponses") != nullptr ||
         jsonrpc::param(params, "requestState") != nullptr;
}

}  // namespace kforge::frontends::mcp::modern
