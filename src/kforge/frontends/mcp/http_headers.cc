#include "kforge/frontends/mcp/http_headers.h"

#include <fmt/format.h>

#include <charconv>

#include "kforge/common/base64.h"
#include "kforge/frontends/mcp/protocol/jsonrpc.h"

namespace kforge::frontends::mcp {
namespace {

constexpr std::string_view kSentinelPrefix = "=?base64?";
constexpr std::string_view kSentinelSuffix = "?=";

modern::Rejection mismatch(std::string message) {
  return modern::Rejection{400, modern::kHeaderMismatch, "Header mismatch: " + std::move(message),
                           std::nullopt};
}

// The header `name` against the body value `expected`; a rejection naming both when they differ.
std::optional<modern::Rejection> expect_header(const http::HttpRequest& request,
                                               const std::string& name, const std::string& expected,
                                               bool decode) {
  const std::string* raw = request.header(name);
  if (raw == nullptr) {
    return mismatch("the " + name + " header is required and must be '" + expected + "'");
  }
  std::optional<std::string> value =
      decode ? decode_header_value(*raw) : std::optional<std::string>(http::trim_ows(*raw));
  if (!value) return mismatch(name + ": malformed base64 in '" + *raw + "'");
  if (*value != expected) {
    return mismatch(name + " is '" + *value + "' but the body says '" + expected + "'");
  }
  return std::nullopt;
}

// The header text a body value must match, or nullopt for a type x-mcp-header cannot mark.
std::optional<std::string> header_text(const Json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_boolean()) return value.get<bool>() ? "true" : "false";
  if (value.is_number_integer()) return value.dump();
  return std::nullopt;
}

bool integer_equal(const std::string& header, const Json& value) {
  int64_t parsed = 0;
  auto [end, ec] = std::from_chars(header.data(), header.data() + header.size(), parsed);
  return ec == std::errc() && end == header.data() + header.size() &&
         parsed == value.get<int64_t>();
}

std::optional<modern::Rejection> check_params_in(const http::HttpRequest& request,
                                                 const Json& schema, const Json& arguments,
                                                 const std::string& path) {
  auto properties = schema.find("properties");
  if (properties == schema.end() || !properties->is_object()) return std::nullopt;
  for (const auto& [key, property] : properties->items()) {
    if (!property.is_object()) continue;
    const Json* value = arguments.is_object() ? jsonrpc::param(arguments, key) : nullptr;
    auto mark = property.find("x-mcp-header");
    if (mark == property.end() || !mark->is_string()) {
      if (value != nullptr) {
        if (auto bad = check_params_in(request, property, *value, path + key + ".")) return bad;
      }
      continue;
    }
    const std::string name = "mcp-param-" + mark->get<std::string>();
    const std::string* raw = request.header(name);
    const std::string shown = "Mcp-Param-" + mark->get<std::string>();
    if (value == nullptr) {
      if (raw != nullptr)
        return mismatch(fmt::format("{} is sent but argument {}{} is not", shown, path, key));
      continue;
    }
    std::optional<std::string> expected = header_text(*value);
    if (!expected) continue;  // schema validation reports the argument's type
    if (raw == nullptr) {
      return mismatch(fmt::format("the {} header is required: argument {}{} is '{}'", shown, path,
                                  key, *expected));
    }
    std::optional<std::string> got = decode_header_value(*raw);
    if (!got) return mismatch(shown + ": malformed base64 in '" + *raw + "'");
    const bool equal = value->is_number_integer() ? integer_equal(*got, *value) : *got == *expected;
    if (!equal) {
      return mismatch(
          fmt::format("{} is '{}' but argument {}{} is '{}'", shown, *got, path, key, *expected));
    }
  }
  return std::nullopt;
}

// Standard base64 exactly: the alphabet, a length that is a multiple of 4, and padding ('=',
// at most two) only at the end. base64_decode is lenient (whitespace, missing padding).
bool strict_base64(std::string_view b64) {
  if (b64.size() % 4 != 0) return false;  // empty: the empty string
  size_t end = b64.size();
  while (end > b64.size() - 2 && b64[end - 1] == '=')
    --end;
  for (size_t i = 0; i < end; ++i) {
    const char c = b64[i];
    const bool ok = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                    c == '+' || c == '/';
    if (!ok) return false;
  }
  return true;
}

}  // namespace

std::optional<std::string> decode_header_value(std::string_view raw) {
  std::string_view value = http::trim_ows(raw);
  if (value.size() < kSentinelPrefix.size() + kSentinelSuffix.size() ||
      value.substr(0, kSentinelPrefix.size()) != kSentinelPrefix ||
      value.substr(value.size() - kSentinelSuffix.size()) != kSentinelSuffix) {
    return std::string(value);
  }
  std::string_view b64 = value.substr(
      kSentinelPrefix.size(), value.size() - kSentinelPrefix.size() - kSentinelSuffix.size());
  if (!strict_base64(b64)) return std::nullopt;
  auto decoded = base64_decode(b64);
  if (!decoded.is_ok()) return std::nullopt;
  return std::move(decoded).value();
}

std::optional<modern::Rejection> check_version_header(const http::HttpRequest& request,
                                                      std::string_view meta_version) {
  const std::string* header = request.header("mcp-protocol-version");
  if (header == nullptr) {
    return mismatch("the MCP-Protocol-Version header is required and must be '" +
                    std::string(meta_version) + "' as in params._meta");
  }
  if (http::trim_ows(*header) != meta_version) {
    return mismatch("MCP-Protocol-Version is '" + *header + "' but params._meta says '" +
                    std::string(meta_version) + "'");
  }
  return std::nullopt;
}

std::optional<modern::Rejection> check_method_headers(const http::HttpRequest& request,
                                                      const std::string& method,
                                                      const Json& params) {
  if (auto bad = expect_header(request, "mcp-method", method, false)) return bad;
  const char* key = nullptr;
  if (method == "tools/call" || method == "prompts/get") key = "name";
  if (method == "resources/read") key = "uri";
  if (method == "tasks/get" || method == "tasks/update" || method == "tasks/cancel") {
    key = "taskId";
  }
  if (key == nullptr) return std::nullopt;
  const Json* value = jsonrpc::param(params, key);
  // A missing or non-string body value is the handler's -32602; the header cannot match it.
  if (value == nullptr || !value->is_string()) return std::nullopt;
  return expect_header(request, "mcp-name", value->get<std::string>(), true);
}

std::optional<modern::Rejection> check_param_headers(const http::HttpRequest& request,
                                                     const Json& input_schema,
                                                     const Json& arguments) {
  return check_params_in(request, input_schema, arguments, "");
}

}  // namespace kforge::frontends::mcp
