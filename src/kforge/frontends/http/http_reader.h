// The request side of HTTP/1.1 as kforge reads it, without sockets: the Beast parser set up as
// the server uses it, and the checks and conversions of a parsed head. http_session.cc drives
// it from a socket (asynchronously); read_request() drives the same code from bytes, for
// tests and the libFuzzer target (tests/fuzz/http_reader_fuzz.cc).
//
// Rules on top of Beast's parser (RFC 9112):
// - §6.1: a request with Transfer-Encoding is accepted only when that is one header whose
//   value is exactly "chunked" (case-insensitive) and there is no Content-Length; anything
//   else ("xchunked", "gzip, chunked", TE together with Content-Length, TE twice) is 400,
//   since a proxy in front may frame the body differently (request smuggling).
// - The body limit is checked from Content-Length before the body is read, and enforced
//   while reading chunked bodies (413).
// - Malformed heads are 400 (431 for a head over the header limit).
//
// Including this header pulls in Beast's HTTP parser: only the session and the reader TUs do.
#pragma once

#include <boost/beast/core/error.hpp>
#include <boost/beast/http/parser.hpp>
#include <boost/beast/http/string_body.hpp>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "kforge/frontends/http/http_message.h"

namespace kforge::frontends::http {

using RequestParser = boost::beast::http::request_parser<boost::beast::http::string_body>;

struct ReaderLimits {
  size_t max_header_bytes = size_t{64} << 10;
  size_t max_body_bytes = size_t{16} << 20;
};

// A parser for one request: the header limit set, no body limit yet (set it with
// limit_body() once the head passed the checks, so a refusal can be answered first).
void configure_for_head(RequestParser& parser, const ReaderLimits& limits);
void limit_body(RequestParser& parser, const ReaderLimits& limits);

// The answer to a request whose framing we refuse (see above), or nullopt.
std::optional<HttpResponse> check_framing(const RequestParser& parser);
// 413 when the declared Content-Length exceeds the body limit, or nullopt.
std::optional<HttpResponse> check_content_length(const RequestParser& parser,
                                                 const ReaderLimits& limits);

// The handler's view of a parsed head: method, target, path, lower-cased headers, and the
// client's X-Request-Id when it is sane (else a fresh one). Body and query are not set.
HttpRequest request_from_head(const RequestParser& parser);

// Answers for errors of the parser: reading a head (400/431) and reading a body (400/413).
HttpResponse malformed_request_response(const boost::beast::error_code& ec);
HttpResponse body_error_response(const boost::beast::error_code& ec, size_t limit);

// One request read from `bytes` by the same steps as the server (head, framing and
// Content-Length checks, body, query). Exactly one of `request` and `refusal` is set when the
// bytes hold a complete request or a fatal error; neither when more bytes are needed.
struct ReadOutcome {
  std::optional<HttpRequest> request;
  std::optional<HttpResponse> refusal;
  size_t consumed = 0;  // bytes of `bytes` the parser used
};
ReadOutcome read_request(std::string_view bytes, const ReaderLimits& limits);

}  // namespace kforge::frontends::http
