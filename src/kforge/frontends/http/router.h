// Router: the routes table, (method, path pattern) -> handler.
//
// Patterns are absolute paths whose segments are literals or `{name}` parameters:
// "/job/{id}" matches "/job/ab12" with path_params["id"] == "ab12" (percent-decoded). A
// trailing slash is ignored ("/health/" is "/health"), except for the root "/". When several
// patterns match, the one with the most literal segments wins. A path that matches no pattern
// is a 404; a path whose patterns exist only for other methods is a 405 with `Allow`.
//
// Handlers are called on an io thread and must not block (see responder.h).
//
// Thread-safety: build the router (add) before handing it to the server; afterwards it is
// only read, from any number of threads.
//
// Example:
//   Router router;
//   KF_RETURN_IF_ERROR(router.add("GET", "/job/{id}", get_job));
//   router.dispatch(std::move(request), responder);
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "kforge/common/status.h"
#include "kforge/frontends/http/http_message.h"
#include "kforge/frontends/http/responder.h"

namespace kforge::frontends::http {

using Handler = std::function<void(HttpRequest request, Responder responder)>;

class Router {
 public:
  // Registers a route. kInvalidArgument for a malformed pattern or method, kAlreadyExists
  // when the same method and pattern are already registered.
  Status add(std::string method, std::string_view pattern, Handler handler);

  struct Match {
    const Handler* handler = nullptr;  // null when nothing matched
    ParamMap path_params;
    int status = 200;   // 200, 404 (no such path) or 405 (wrong method)
    std::string allow;  // for 405: the allowed methods, "GET, POST"
  };
  Match match(std::string_view method, std::string_view path) const;

  // Methods registered for `path`, sorted ("GET, POST"); empty when the path is unknown.
  std::string allowed_methods(std::string_view path) const;

  // Every registered (method, pattern), in registration order.
  std::vector<std::pair<std::string, std::string>> routes() const;

  // Matches, fills request.path_params and calls the handler; answers 404/405 (JSON error
  // bodies) itself. A handler that throws gets a 500.
  void dispatch(HttpRequest request, const Responder& responder) const;

 private:
  struct Segment {
    std::string text;
    bool is_param = false;
  };
  struct Route {
    std::string method;
    std::string pattern;
    std::vector<Segment> segments;
    int literal_count = 0;
    Handler handler;
  };

  // Matches path segments against a route; fills params on success.
  static bool matches(const Route& route, const std::vector<std::string>& segments,
                      ParamMap* params);

  std::vector<Route> routes_;
};

}  // namespace kforge::frontends::http
