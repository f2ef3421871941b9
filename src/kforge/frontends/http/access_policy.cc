#include "kforge/frontends/http/access_policy.h"

#include <algorithm>

#include "kforge/common/hash.h"

namespace kforge::frontends::http {
namespace {

std::string to_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

// "http://host:port/..." -> "host:port"; empty when there is no "scheme://".
std::string_view origin_authority(std::string_view origin) {
  size_t sep = origin.find("://");
  if (sep == std::string_view::npos) return {};
  std::string_view rest = origin.substr(sep + 3);
  return rest.substr(0, rest.find('/'));
}

// "host:port" / "[v6]:port" / "host" -> host without brackets and port.
std::string_view strip_port(std::string_view host) {
  if (!host.empty() && host.front() == '[') {
    size_t close = host.find(']');
    return close == std::string_view::npos ? host : host.substr(1, close - 1);
  }
  if (std::count(host.begin(), host.end(), ':') == 1) return host.substr(0, host.find(':'));
  return host;
}

}  // namespace

AccessPolicy::AccessPolicy(Options options) : options_(std::move(options)) {
  if (!options_.token.empty()) {
    model::Principal principal{std::string(kDefaultPrincipal), model::Role::kUser};
    tokens_.push_back({{options_.token, std::move(principal)}, {}});
  }
  for (const ApiToken& t : options_.tokens)
    tokens_.push_back({t, {}});
  for (KnownToken& t : tokens_)
    t.fingerprint = sha256_hex(t.token.secret).substr(0, 8);
}

AccessPolicy::Identity AccessPolicy::identify(const HttpRequest& request,
                                              std::string_view peer) const {
  Identity id{"peer " + std::string(peer), {}};
  if (!has_tokens()) return id;
  if (const KnownToken* t = matching_token(request)) {
    id.client = "token " + t->fingerprint + " " + id.client;
    id.principal = t->token.principal;
  } else {
    // check() refuses such a request; should one ever get further, it sees no job at all (no
    // job has a submitter of this name, which a token file cannot give).
    id.principal = {"(unauthenticated)", model::Role::kUser};
  }
  return id;
}

bool AccessPolicy::constant_time_equals(std::string_view given, std::string_view expected) {
  // Every byte of `expected` is visited whatever `given` holds; a length mismatch is folded
  // into the same accumulator rather than returned early.
  volatile unsigned char diff = given.size() == expected.size() ? 0 : 1;
  for (size_t i = 0; i < expected.size(); ++i) {
    unsigned char g = i < given.size() ? static_cast<unsigned char>(given[i]) : 0;
    diff = static_cast<unsigned char>(diff | (g ^ static_cast<unsigned char>(expected[i])));
  }
  return diff == 0;
}

bool AccessPolicy::is_loopback_host(std::string_view host) {
  std::string h = to_lower(strip_port(host));
  if (h == "localhost" || h == "::1" || h == "0:0:0:0:0:0:0:1") return true;
  if (h.rfind("127.", 0) != 0) return false;
  return std::all_of(h.begin(), h.end(), [](char c) { return (c >= '0' && c <= '9') || c == '.'; });
}

bool AccessPolicy::origin_allowed(std::string_view origin) const {
  for (const std::string& allowed : options_.allowed_origins) {
    if (allowed == "*" || iequals(allowed, origin)) return true;
  }
  std::string_view authority = origin_authority(origin);
  return !authority.empty() && is_loopback_host(authority);
}

bool AccessPolicy::host_allowed(std::string_view host) const {
  if (!options_.loopback_bind || has_tokens()) return true;
  if (is_loopback_host(host)) return true;
  for (const std::string& allowed : options_.allowed_origins) {
    if (allowed == "*" || iequals(origin_authority(allowed), host)) return true;
  }
  return false;
}

const AccessPolicy::KnownToken* AccessPolicy::matching_token(const HttpRequest& request) const {
  if (tokens_.empty()) return nullptr;
  const std::string* auth = request.header("authorization");
  if (auth == nullptr) return nullptr;
  std::string_view value(*auth);
  constexpr std::string_view kScheme = "bearer ";
  if (value.size() < kScheme.size() || !iequals(value.substr(0, kScheme.size()), kScheme)) {
    return nullptr;
  }
  value.remove_prefix(kScheme.size());
  while (!value.empty() && value.front() == ' ')
    value.remove_prefix(1);
  while (!value.empty() && value.back() == ' ')
    value.remove_suffix(1);
  // Every token is compared, whichever matches: the time says nothing about which one did.
  const KnownToken* found = nullptr;
  for (const KnownToken& t : tokens_) {
    if (constant_time_equals(value, t.token.secret) && found == nullptr) found = &t;
  }
  return found;
}

std::optional<HttpResponse> AccessPolicy::check(const HttpRequest& request,
                                                const std::string& allow) const {
  if (const std::string* host = request.header("host"); host != nullptr && !host_allowed(*host)) {
    return HttpResponse::error(Status(ErrorCode::kPermissionDenied,
                                      "Host '" + *host +
                                          "' is not allowed for a server bound to loopback "
                                          "(DNS rebinding protection); add its origin to the "
                                          "allowed origins or use an API token"));
  }
  const std::string* origin = request.header("origin");
  if (origin != nullptr && !origin_allowed(*origin)) {
    return HttpResponse::error(
        Status(ErrorCode::kPermissionDenied, "Origin '" + *origin + "' is not allowed"));
  }
  if (request.method == "OPTIONS" && origin != nullptr &&
      request.header("access-control-request-method") != nullptr) {
    HttpResponse preflight;
    preflight.status = 204;
    preflight.headers = cors_headers(request);
    preflight.headers.emplace_back("Access-Control-Allow-Methods",
                                   allow.empty() ? std::string("GET, POST") : allow);
    preflight.headers.emplace_back(
        "Access-Control-Allow-Headers",
        "Authorization, Content-Type, X-Request-Id, Mcp-Session-Id, MCP-Protocol-Version, "
        "Last-Event-ID");
    preflight.headers.emplace_back("Access-Control-Max-Age", "600");
    return preflight;
  }
  if (has_tokens() && !is_probe(request) && !is_ui_asset(request) &&
      matching_token(request) == nullptr) {
    HttpResponse response = HttpResponse::error(
        Status(ErrorCode::kUnauthenticated,
               "missing or wrong API token: send 'Authorization: Bearer <token>'"));
    response.headers.emplace_back("WWW-Authenticate", "Bearer");
    return response;
  }
  return std::nullopt;
}

bool AccessPolicy::is_probe(const HttpRequest& request) {
  return request.method == "GET" && (request.path == "/livez" || request.path == "/readyz");
}

bool AccessPolicy::is_ui_asset(const HttpRequest& request) {
  return request.method == "GET" &&
         (request.path == "/ui" || request.path == "/ui/" || request.path.starts_with("/ui/"));
}

HeaderList AccessPolicy::cors_headers(const HttpRequest& request) const {
  HeaderList headers;
  const std::string* origin = request.header("origin");
  if (origin == nullptr || !origin_allowed(*origin)) return headers;
  headers.emplace_back("Access-Control-Allow-Origin", *origin);
  headers.emplace_back("Vary", "Origin");
  headers.emplace_back("Access-Control-Expose-Headers",
                       "X-Request-Id, Mcp-Session-Id, X-Next-Cursor");
  return headers;
}

}  // namespace kforge::frontends::http
