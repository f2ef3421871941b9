#include "kforge/frontends/http/http_reader.h"

#include <boost/asio/buffer.hpp>
#include <boost/beast/http/error.hpp>

#include "kforge/common/random.h"

namespace kforge::frontends::http {

namespace beast = boost::beast;
namespace bhttp = boost::beast::http;

namespace {

bool sane_request_id(std::string_view id) {
  if (id.empty() || id.size() > 128) return false;
  for (char c : id) {
    bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.' || c == ':';
    if (!ok) return false;
  }
  return true;
}

HttpResponse framing_refusal(const std::string& why) {
  return HttpResponse::error(
      400, invalid_argument("malformed HTTP request: " + why + " (RFC 9112 section 6.1)"));
}

}  // namespace

void configure_for_head(RequestParser& parser, const ReaderLimits& limits) {
  parser.header_limit(static_cast<uint32_t>(limits.max_header_bytes));
  parser.body_limit(boost::none);  // checked against Content-Length after the access checks
}

void limit_body(RequestParser& parser, const ReaderLimits& limits) {
  parser.body_limit(limits.max_body_bytes);
}

std::optional<HttpResponse> check_framing(const RequestParser& parser) {
  const auto& head = parser.get();
  size_t te_fields = 0;
  size_t cl_fields = 0;
  std::string_view te;
  for (const auto& field : head) {
    if (field.name() == bhttp::field::transfer_encoding) {
      ++te_fields;
      te = std::string_view(field.value().data(), field.value().size());
    } else if (field.name() == bhttp::field::content_length) {
      ++cl_fields;
    }
  }
  if (te_fields == 0) return std::nullopt;
  if (te_fields > 1) return framing_refusal("more than one Transfer-Encoding header");
  if (cl_fields > 0) {
    return framing_refusal("Transfer-Encoding and Content-Length in the same request");
  }
  if (!iequals(trim_ows(te), "chunked")) {
    return framing_refusal("Transfer-Encoding '" + std::string(te.substr(0, 64)) +
                           "' is not supported (only 'chunked')");
  }
  return std::nullopt;
}

std::optional<HttpResponse> check_content_length(const RequestParser& parser,
                                                 const ReaderLimits& limits) {
  boost::optional<std::uint64_t> length = parser.content_length();
  if (!length || *length <= limits.max_body_bytes) return std::nullopt;
  return HttpResponse::error(
      Status(ErrorCode::kPayloadTooLarge, "request body of " + std::to_string(*length) +
                                              " bytes exceeds the limit of " +
                                              std::to_string(limits.max_body_bytes) + " bytes"));
}

HttpRequest request_from_head(const RequestParser& parser) {
  const auto& head = parser.get();
  HttpRequest request;
  request.method = std::string(head.method_string());
  request.target = std::string(head.target());
  request.path = std::string(split_target(request.target).first);
  for (const auto& field : head) {
    std::string name(field.name_string());
    for (char& c : name) {
      if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    }
    request.headers.emplace_back(std::move(name), std::string(field.value()));
  }
  const std::string* client_id = request.header("x-request-id");
  if (client_id != nullptr && sane_request_id(*client_id)) {
    request.request_id = *client_id;
  } else {
    request.request_id = random_hex(8);
  }
  return request;
}

HttpResponse malformed_request_response(const beast::error_code& ec) {
  if (ec == bhttp::error::header_limit) {
    return HttpResponse::error(431, invalid_argument("request header is too large"));
  }
  return HttpResponse::error(400, invalid_argument("malformed HTTP request: " + ec.message()));
}

HttpResponse body_error_response(const beast::error_code& ec, size_t limit) {
  if (ec == bhttp::error::body_limit) {
    return HttpResponse::error(
        Status(ErrorCode::kPayloadTooLarge,
               "request body exceeds the limit of " + std::to_string(limit) + " bytes"));
  }
  return HttpResponse::error(invalid_argument("malformed HTTP body: " + ec.message()));
}

ReadOutcome read_request(std::string_view bytes, const ReaderLimits& limits) {
  ReadOutcome out;
  RequestParser parser;
  configure_for_head(parser, limits);
  parser.eager(false);  // stop after the head, as async_read_header does
  // Feeds the parser until `done` holds; false when it needs more bytes or failed.
  auto feed = [&](auto done, auto on_error) {
    while (!done()) {
      beast::error_code ec;
      const size_t n = parser.put(
          boost::asio::const_buffer(bytes.data() + out.consumed, bytes.size() - out.consumed), ec);
      out.consumed += n;
      if (ec == bhttp::error::need_more) return false;
      if (ec) {
        out.refusal = on_error(ec);
        return false;
      }
      if (n == 0) return false;
    }
    return true;
  };
  if (!feed([&] { return parser.is_header_done(); },
            [](const beast::error_code& ec) { return malformed_request_response(ec); })) {
    return out;
  }
  if (auto refusal = check_framing(parser)) {
    out.refusal = std::move(refusal);
    return out;
  }
  if (auto refusal = check_content_length(parser, limits)) {
    out.refusal = std::move(refusal);
    return out;
  }
  HttpRequest request = request_from_head(parser);
  limit_body(parser, limits);
  parser.eager(true);
  if (!feed([&] { return parser.is_done(); },
            [&](const beast::error_code& ec) {
              return body_error_response(ec, limits.max_body_bytes);
            })) {
    return out;
  }
  request.body = std::move(parser.get().body());
  auto query = parse_query(split_target(request.target).second);
  if (!query.is_ok()) {
    out.refusal = HttpResponse::error(query.status());
    return out;
  }
  request.query = std::move(query).value();
  out.request = std::move(request);
  return out;
}

}  // namespace kforge::frontends::http
