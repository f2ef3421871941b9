#include "kforge/frontends/http/http_message.h"

#include "kforge/common/error_mapping.h"

namespace kforge::frontends::http {
namespace {

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

const std::string* find_param(const ParamMap& params, std::string_view name) {
  auto it = params.find(name);
  return it == params.end() ? nullptr : &it->second;
}

}  // namespace

bool iequals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char x = a[i];
    char y = b[i];
    if (x >= 'A' && x <= 'Z') x = static_cast<char>(x - 'A' + 'a');
    if (y >= 'A' && y <= 'Z') y = static_cast<char>(y - 'A' + 'a');
    if (x != y) return false;
  }
  return true;
}

std::string_view trim_ows(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t'))
    s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t'))
    s.remove_suffix(1);
  return s;
}

const std::string* HttpRequest::header(std::string_view name) const {
  for (const auto& [key, value] : headers) {
    if (iequals(key, name)) return &value;
  }
  return nullptr;
}

const std::string* HttpRequest::query_param(std::string_view name) const {
  return find_param(query, name);
}

const std::string* HttpRequest::path_param(std::string_view name) const {
  return find_param(path_params, name);
}

std::string dump_json(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

HttpResponse HttpResponse::json(int status, const Json& body) {
  HttpResponse response;
  response.status = status;
  response.body = dump_json(body);
  return response;
}

HttpResponse HttpResponse::error(const Status& status) {
  return error(http_status_for(status.code()), status);
}

HttpResponse HttpResponse::error(int http_status, const Status& status) {
  return json(http_status, error_body(status, http_status));
}

std::optional<std::string> percent_decode(std::string_view text, bool plus_as_space) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '%') {
      if (i + 2 >= text.size()) return std::nullopt;
      int hi = hex_value(text[i + 1]);
      int lo = hex_value(text[i + 2]);
      if (hi < 0 || lo < 0) return std::nullopt;
      out.push_back(static_cast<char>(hi * 16 + lo));
      i += 2;
    } else if (c == '+' && plus_as_space) {
      out.push_back(' ');
    } else {
      out.push_back(c);
    }
  }
  return out;
}

StatusOr<ParamMap> parse_query(std::string_view query) {
  ParamMap params;
  while (!query.empty()) {
    size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (pair.empty()) continue;
    size_t eq = pair.find('=');
    std::string_view raw_key = pair.substr(0, eq);
    std::string_view raw_value =
        eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1);
    auto key = percent_decode(raw_key, true);
    if (!key) return invalid_argument("malformed percent-escape in the query", "query");
    auto value = percent_decode(raw_value, true);
    if (!value) return invalid_argument("malformed percent-escape", "query." + *key);
    params[*key] = std::move(*value);
  }
  return params;
}

std::pair<std::string_view, std::string_view> split_target(std::string_view target) {
  size_t q = target.find('?');
  if (q == std::string_view::npos) return {target, std::string_view()};
  return {target.substr(0, q), target.substr(q + 1)};
}

}  // namespace kforge::frontends::http
