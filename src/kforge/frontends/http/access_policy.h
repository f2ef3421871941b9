// AccessPolicy: who may talk to the server, checked on the request head before the body is
// read. Shared by every route (REST and MCP).
//
// - Token: when a token is configured, every request needs `Authorization: Bearer <token>`
//   (scheme case-insensitive; compared in constant time), else 401 with
//   `WWW-Authenticate: Bearer`. CORS preflights (OPTIONS with Access-Control-Request-Method)
//   are exempt, as browsers send them without credentials.
// - Origin: a request carrying `Origin` must come from an allowed origin: one listed in
//   `allowed_origins` ("*" allows all), or a loopback origin (http://localhost:*,
//   http://127.0.0.1:*, http://[::1]:*). Otherwise 403. Allowed origins get CORS headers.
// - Host: a server bound to loopback without a token accepts only loopback `Host` names (or
//   the hosts of allowed origins), which defeats DNS rebinding from a browser. Otherwise 403.
//
// Thread-safety: immutable after construction.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "kforge/frontends/http/http_message.h"

namespace kforge::frontends::http {

class AccessPolicy {
 public:
  struct Options {
    std::string token;                         // empty: no authentication
    std::vector<std::string> allowed_origins;  // exact origins ("https://ui.example:8443") or "*"
    bool loopback_bind = true;                 // the server listens on a loopback address
  };

  explicit AccessPolicy(Options options);

  // The response that refuses `request` (401/403), or the answer to a CORS preflight (204),
  // or nullopt when the request may proceed. `allow` lists the path's methods (for
  // preflights).
  std::optional<HttpResponse> check(const HttpRequest& request, const std::string& allow) const;

  // The client identity of a request that passed check() from the peer address `peer`:
  // "peer <address>", prefixed with "token <first 8 hex of sha256(token)> " when a token is
  // configured (so one token's holders on different hosts are different clients, and the
  // identity never reveals the token).
  std::string client_identity(std::string_view peer) const;

  // CORS headers to add to the response of `request` (empty without an allowed Origin).
  HeaderList cors_headers(const HttpRequest& request) const;

  // Constant-time comparison (the time depends only on the length of `expected`).
  static bool constant_time_equals(std::string_view given, std::string_view expected);

  // True for loopback host names: "localhost", "127.0.0.1" (any 127.x), "::1", with or
  // without a port and brackets.
  static bool is_loopback_host(std::string_view host);

 private:
  bool origin_allowed(std::string_view origin) const;
  bool host_allowed(std::string_view host) const;
  bool token_ok(const HttpRequest& request) const;

  Options options_;
  std::string token_fingerprint_;  // empty without a token
};

}  // namespace kforge::frontends::http
