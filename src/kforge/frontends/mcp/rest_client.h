// RestClient: a small blocking HTTP/1.1 client for kforge's own REST API (plain http, one
// connection per request, Content-Length or chunked responses). Used by `kforge mcp --server`
// to forward tool calls to a running `kforge serve`; kept off Beast so it compiles fast.
//
// Example:
//   KF_ASSIGN_OR_RETURN(RestClient client, RestClient::create({"http://127.0.0.1:8000", ""}));
//   KF_ASSIGN_OR_RETURN(Json stats, client.call_json("GET", "/stats"));
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "kforge/common/json.h"
#include "kforge/common/status.h"

namespace kforge::frontends::mcp {

struct RestClientOptions {
  std::string base_url;  // "http://host[:port][/prefix]"
  std::string token;     // sent as "Authorization: Bearer <token>" when not empty
  std::chrono::milliseconds timeout{std::chrono::seconds(30)};  // connect, and each read/write
};

struct RestResponse {
  int status = 0;
  std::string content_type;
  std::string body;
};

class RestClient {
 public:
  // kInvalidArgument (field "--server") for a URL that is not http://host[:port][/prefix].
  static StatusOr<RestClient> create(RestClientOptions options);

  // One request; kUnavailable when the server cannot be reached, kIo for a broken answer.
  StatusOr<RestResponse> call(std::string_view method, std::string_view path,
                              std::string_view json_body = {}) const;

  // call() for a JSON API: a 2xx answer's JSON body, or the server's error (kforge's error
  // body {"error": {"code", "message", "field"}} becomes the same Status).
  StatusOr<Json> call_json(std::string_view method, std::string_view path,
                           const Json* body = nullptr) const;

  const std::string& base_url() const { return options_.base_url; }

 private:
  RestClient(RestClientOptions options, std::string host, std::string port, std::string prefix)
      : options_(std::move(options)),
        host_(std::move(host)),
        port_(std::move(port)),
        prefix_(std::move(prefix)) {}

  RestClientOptions options_;
  std::string host_;
  std::string port_;
  std::string prefix_;
};

// The Status a kforge REST error body stands for (code by name, message, field).
Status status_from_error_body(int http_status, const std::string& body);

}  // namespace kforge::frontends::mcp
