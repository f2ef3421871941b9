// The HTTP request and response as handlers see them: plain structs, no Beast.
//
// The Beast session (http_server.cc) fills an HttpRequest from the wire and writes the
// HttpResponse a handler produces; routing (router.h) and handlers (rest_handlers.h, the MCP
// frontend) work only with these types, so they compile without Boost.
//
// Example (in a handler):
//   const std::string* wait = request.query_param("wait");
//   responder.send(HttpResponse::json(200, Json{{"ok", true}}));
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kforge/common/json.h"
#include "kforge/common/status.h"
#include "kforge/model/principal.h"

namespace kforge::frontends::http {

// Header name/value pairs in arrival order. Request header names are lower-cased by the
// server; response header names are written as given.
using HeaderList = std::vector<std::pair<std::string, std::string>>;

using ParamMap = std::map<std::string, std::string, std::less<>>;

struct HttpRequest {
  std::string method;      // as sent, e.g. "GET" (HTTP methods are case-sensitive)
  std::string target;      // raw request target, e.g. "/job/ab12?wait=false"
  std::string path;        // target without the query, not percent-decoded: "/job/ab12"
  ParamMap query;          // percent-decoded query parameters; the last of repeated keys wins
  HeaderList headers;      // names lower-cased
  std::string body;        // the whole body (the server enforces its size limit)
  ParamMap path_params;    // filled by the router from `{name}` segments, percent-decoded
  std::string request_id;  // the X-Request-Id the response will carry
  // Who sent it, the key of per-client limits (queue quota, MCP sessions): "peer <address>",
  // prefixed with "token <fingerprint> " when the server has tokens. Set by the server.
  std::string client;
  // On whose behalf (model/principal.h): its token's principal, anonymous on a server without
  // tokens. Set by the server; decides which jobs the request may see.
  model::Principal principal;

  // Value of the first header called `name` (case-insensitive), or nullptr.
  const std::string* header(std::string_view name) const;
  const std::string* query_param(std::string_view name) const;
  const std::string* path_param(std::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  HeaderList headers;  // extra headers; the server adds Content-Length, X-Request-Id, ...

  // `body` serialised compactly; invalid UTF-8 in strings is replaced, never thrown on.
  static HttpResponse json(int status, const Json& body);
  // `error_body(status)` with `http_status_for(status.code())`.
  static HttpResponse error(const Status& status);
  // `error_body(status)` with an explicit HTTP status (405, 431, ...).
  static HttpResponse error(int http_status, const Status& status);
};

// Compact JSON text of `value`; invalid UTF-8 is replaced with U+FFFD instead of throwing.
std::string dump_json(const Json& value);

// Decodes %XX escapes (and '+' as a space when `plus_as_space`); nullopt for a malformed
// escape.
std::optional<std::string> percent_decode(std::string_view text, bool plus_as_space);

// Splits "a=1&b=x%20y" into decoded parameters. kInvalidArgument (field "query.<key>") for a
// malformed escape.
StatusOr<ParamMap> parse_query(std::string_view query);

// Splits a request target into its path and (undecoded) query.
std::pair<std::string_view, std::string_view> split_target(std::string_view target);

// Case-insensitive ASCII comparison (header names, tokens such as "Bearer").
bool iequals(std::string_view a, std::string_view b);

// A header value without the optional white space (spaces and tabs) around it (RFC 9110 5.6.3).
std::string_view trim_ows(std::string_view s);

}  // namespace kforge::frontends::http
