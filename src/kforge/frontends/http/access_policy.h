// AccessPolicy: who may talk to the server, checked on the request head before the body is
// read. Shared by every route (REST and MCP).
//
// - Token: when tokens are configured (api_tokens.h), every request needs
//   `Authorization: Bearer <token>` with one of them (scheme case-insensitive; compared in
//   constant time with every token), else 401 with `WWW-Authenticate: Bearer`. The token
//   names the request's principal (model/principal.h). CORS preflights (OPTIONS with
//   Access-Control-Request-Method) are exempt, as browsers send them without credentials,
//   and so are the probes `GET /livez` and `GET /readyz` (is_probe), which an orchestrator
//   sends without one and which answer only a status word, and the web UI's static files
//   (is_ui_asset), which a browser loads before it has the token to send.
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

#include "kforge/frontends/http/api_tokens.h"
#include "kforge/frontends/http/http_message.h"

namespace kforge::frontends::http {

class AccessPolicy {
 public:
  struct Options {
    // --token / --token-file: the user principal "default"; empty: none.
    std::string token;
    std::vector<std::string> allowed_origins;  // exact origins ("https://ui.example:8443") or "*"
    bool loopback_bind = true;                 // the server listens on a loopback address
    // Further tokens with their principals (--admin-token-file, --tokens-file). No tokens at
    // all (neither `token` nor these): no authentication, every client anonymous.
    std::vector<ApiToken> tokens;
  };

  explicit AccessPolicy(Options options);

  // The response that refuses `request` (401/403), or the answer to a CORS preflight (204),
  // or nullopt when the request may proceed. `allow` lists the path's methods (for
  // preflights).
  std::optional<HttpResponse> check(const HttpRequest& request, const std::string& allow) const;

  struct Identity {
    // The key of per-client limits: "peer <address>", prefixed with "token <first 8 hex of
    // sha256(token)> " when tokens are configured (so one token's holders on different hosts
    // are different clients, and the identity never reveals the token).
    std::string client;
    // The token's principal; anonymous without tokens; a user that owns nothing for a request
    // without a valid token (one check() refuses).
    model::Principal principal;
  };

  // Who sent `request` from the peer address `peer` (meaningful once check() passed it).
  Identity identify(const HttpRequest& request, std::string_view peer) const;

  // True when requests need a token.
  bool has_tokens() const { return !tokens_.empty(); }

  // GET /livez or GET /readyz: the probes, answered without a token.
  static bool is_probe(const HttpRequest& request);

  // GET /ui or /ui/...: the web UI's static files (ui_route.h), answered without a token:
  // they hold no data, and the page asks for the token before it reads the API.
  static bool is_ui_asset(const HttpRequest& request);

  // CORS headers to add to the response of `request` (empty without an allowed Origin).
  HeaderList cors_headers(const HttpRequest& request) const;

  // Constant-time comparison (the time depends only on the length of `expected`).
  static bool constant_time_equals(std::string_view given, std::string_view expected);

  // True for loopback host names: "localhost", "127.0.0.1" (any 127.x), "::1", with or
  // without a port and brackets.
  static bool is_loopback_host(std::string_view host);

 private:
  struct KnownToken {
    ApiToken token;
    std::string fingerprint;  // first 8 hex of its SHA-256
  };

  bool origin_allowed(std::string_view origin) const;
  bool host_allowed(std::string_view host) const;
  // The configured token `request` carries, or null (also when none is configured).
  const KnownToken* matching_token(const HttpRequest& request) const;

  Options options_;
  std::vector<KnownToken> tokens_;  // Options::token and Options::tokens
};

}  // namespace kforge::frontends::http
