#include "kforge/frontends/http/router.h"

#include <algorithm>
#include <exception>
#include <set>

#include "kforge/common/log.h"

namespace kforge::frontends::http {
namespace {

// "/a/b/" -> {"a", "b"}; "/" -> {}. Segments are returned raw (not decoded).
std::vector<std::string_view> split_path(std::string_view path) {
  std::vector<std::string_view> out;
  if (path.size() > 1 && path.back() == '/') path.remove_suffix(1);
  if (!path.empty() && path.front() == '/') path.remove_prefix(1);
  if (path.empty()) return out;
  size_t start = 0;
  while (true) {
    size_t slash = path.find('/', start);
    out.push_back(path.substr(
        start, slash == std::string_view::npos ? std::string_view::npos : slash - start));
    if (slash == std::string_view::npos) break;
    start = slash + 1;
  }
  return out;
}

bool is_token(std::string_view s) {
  if (s.empty()) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' ||
           c == '_';
  });
}

}  // namespace

std::vector<std::pair<std::string, std::string>> Router::routes() const {
  std::vector<std::pair<std::string, std::string>> out;
  out.reserve(routes_.size());
  for (const Route& r : routes_)
    out.emplace_back(r.method, r.pattern);
  return out;
}

Status Router::add(std::string method, std::string_view pattern, Handler handler) {
  if (!is_token(method)) return invalid_argument("malformed HTTP method '" + method + "'");
  if (pattern.empty() || pattern.front() != '/') {
    return invalid_argument("route pattern must start with '/': '" + std::string(pattern) + "'");
  }
  if (!handler) return invalid_argument("route " + std::string(pattern) + " has no handler");
  Route route;
  route.method = std::move(method);
  route.pattern = std::string(pattern);
  route.handler = std::move(handler);
  std::set<std::string, std::less<>> names;
  for (std::string_view raw : split_path(pattern)) {
    Segment segment;
    if (raw.size() >= 2 && raw.front() == '{' && raw.back() == '}') {
      segment.is_param = true;
      segment.text = std::string(raw.substr(1, raw.size() - 2));
      if (!is_token(segment.text) || !names.insert(segment.text).second) {
        return invalid_argument("bad or repeated parameter '" + std::string(raw) +
                                "' in route pattern '" + route.pattern + "'");
      }
    } else {
      if (raw.empty() || raw.find_first_of("{}") != std::string_view::npos) {
        return invalid_argument("malformed route pattern '" + route.pattern + "'");
      }
      segment.text = std::string(raw);
      ++route.literal_count;
    }
    route.segments.push_back(std::move(segment));
  }
  for (const Route& existing : routes_) {
    if (existing.method != route.method || existing.segments.size() != route.segments.size()) {
      continue;
    }
    bool same = true;
    for (size_t i = 0; same && i < route.segments.size(); ++i) {
      const Segment& a = existing.segments[i];
      const Segment& b = route.segments[i];
      same = a.is_param == b.is_param && (a.is_param || a.text == b.text);
    }
    if (same) {
      return Status(ErrorCode::kAlreadyExists, "route " + route.method + " " + route.pattern +
                                                   " conflicts with " + existing.pattern);
    }
  }
  routes_.push_back(std::move(route));
  return Status::ok();
}

bool Router::matches(const Route& route, const std::vector<std::string>& segments,
                     ParamMap* params) {
  if (route.segments.size() != segments.size()) return false;
  for (size_t i = 0; i < segments.size(); ++i) {
    const Segment& s = route.segments[i];
    if (s.is_param) {
      if (segments[i].empty()) return false;
    } else if (s.text != segments[i]) {
      return false;
    }
  }
  if (params != nullptr) {
    params->clear();
    for (size_t i = 0; i < segments.size(); ++i) {
      if (route.segments[i].is_param) (*params)[route.segments[i].text] = segments[i];
    }
  }
  return true;
}

Router::Match Router::match(std::string_view method, std::string_view path) const {
  Match result;
  std::vector<std::string> segments;
  for (std::string_view raw : split_path(path)) {
    auto decoded = percent_decode(raw, /*plus_as_space=*/false);
    if (!decoded) {
      result.status = 400;
      return result;
    }
    segments.push_back(std::move(*decoded));
  }
  const Route* best = nullptr;
  std::set<std::string> allowed;
  for (const Route& route : routes_) {
    if (!matches(route, segments, nullptr)) continue;
    allowed.insert(route.method);
    if (route.method == method && (best == nullptr || route.literal_count > best->literal_count)) {
      best = &route;
    }
  }
  if (best != nullptr) {
    matches(*best, segments, &result.path_params);
    result.handler = &best->handler;
    return result;
  }
  if (allowed.empty()) {
    result.status = 404;
    return result;
  }
  result.status = 405;
  for (const std::string& m : allowed) {
    if (!result.allow.empty()) result.allow += ", ";
    result.allow += m;
  }
  return result;
}

std::string Router::allowed_methods(std::string_view path) const {
  Match m = match("", path);  // "" never names a route, so this collects the Allow list
  return m.allow;
}

void Router::dispatch(HttpRequest request, const Responder& responder) const {
  Match m = match(request.method, request.path);
  switch (m.status) {
    case 400:
      responder.send(HttpResponse::error(
          invalid_argument("malformed percent-escape in the path '" + request.path + "'")));
      return;
    case 404:
      responder.send(
          HttpResponse::error(not_found("no route for " + request.method + " " + request.path)));
      return;
    case 405: {
      HttpResponse response = HttpResponse::error(
          405,
          Status(ErrorCode::kInvalidArgument, "method " + request.method + " is not allowed on " +
                                                  request.path + " (allowed: " + m.allow + ")"));
      response.headers.emplace_back("Allow", m.allow);
      responder.send(std::move(response));
      return;
    }
    default:
      break;
  }
  request.path_params = std::move(m.path_params);
  try {
    (*m.handler)(std::move(request), responder);
  } catch (const std::exception& e) {
    KF_LOG_ERROR("http handler threw: {}", e.what());
    responder.send(HttpResponse::error(internal_error(std::string("handler failed: ") + e.what())));
  }
}

}  // namespace kforge::frontends::http
