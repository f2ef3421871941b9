#include "kforge/frontends/http/workbench_routes.h"

#include <algorithm>
#include <memory>
#include <string>

#include "kforge/frontends/http/job_list.h"
#include "kforge/workbench/session_views.h"
#include "kforge/workbench/state.h"

namespace kforge::frontends::http {
namespace {

constexpr std::string_view kParameters[] = {"state", "kernel_name", "owner", "limit", "cursor"};
constexpr size_t kMaxFilterLength = 128;

StatusOr<std::vector<std::string>> parse_states(const std::string& text) {
  std::vector<std::string> states;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    std::string name = text.substr(start, comma - start);
    if (!workbench::state_from(name)) {
      return invalid_argument("'" + name +
                                  "' is not a session state (start, write, evaluation, end; "
                                  "several separated by commas)",
                              "query.state");
    }
    states.push_back(std::move(name));
    start = comma + 1;
  }
  return states;
}

StatusOr<std::string> parse_text(const std::string& text, const std::string& name) {
  if (text.size() > kMaxFilterLength) {
    return invalid_argument("must be at most " + std::to_string(kMaxFilterLength) + " characters",
                            "query." + name);
  }
  return text;
}

struct WorkbenchContext {
  workbench::Workbench& workbench;
  BlockingExecutor blocking;
};

}  // namespace

StatusOr<store::WorkbenchSessionQuery> parse_session_list_request(const HttpRequest& request) {
  for (const auto& [name, value] : request.query) {
    if (std::find(std::begin(kParameters), std::end(kParameters), name) == std::end(kParameters)) {
      return invalid_argument(
          "is not a parameter of GET /workbench/sessions (state, kernel_name, owner, limit, "
          "cursor)",
          "query." + name);
    }
  }
  store::WorkbenchSessionQuery q;
  if (const std::string* v = request.query_param("state")) {
    KF_ASSIGN_OR_RETURN(q.states, parse_states(*v));
  }
  if (const std::string* v = request.query_param("kernel_name")) {
    KF_ASSIGN_OR_RETURN(q.kernel_name, parse_text(*v, "kernel_name"));
  }
  if (const std::string* v = request.query_param("owner")) {
    KF_ASSIGN_OR_RETURN(q.owner, parse_text(*v, "owner"));
  }
  if (const std::string* v = request.query_param("limit")) {
    KF_ASSIGN_OR_RETURN(q.limit, parse_limit_param(*v, workbench::kMaxSessionListLimit));
  }
  if (const std::string* v = request.query_param("cursor")) {
    KF_RETURN_IF_ERROR(workbench::decode_session_cursor(*v, "query.cursor", q));
  }
  return q;
}

Status add_workbench_routes(Router& router, workbench::Workbench& workbench,
                            BlockingExecutor blocking) {
  auto ctx =
      std::make_shared<const WorkbenchContext>(WorkbenchContext{workbench, std::move(blocking)});
  KF_RETURN_IF_ERROR(router.add(
      "GET", "/workbench/sessions", [ctx](const HttpRequest& request, Responder responder) {
        auto query = parse_session_list_request(request);
        if (!query.is_ok()) {
          responder.send(HttpResponse::error(query.status()));
          return;
        }
        ctx->blocking([ctx, query = std::move(query).value(), principal = request.principal,
                       responder = std::move(responder)] {
          auto page = workbench::list_session_views(ctx->workbench.store(), query, principal);
          responder.send(page.is_ok() ? HttpResponse::json(200, *page)
                                      : HttpResponse::error(page.status()));
        });
      }));
  return router.add(
      "GET", "/workbench/sessions/{id}", [ctx](const HttpRequest& request, Responder responder) {
        const std::string* id = request.path_param("id");
        ctx->blocking([ctx, id = id == nullptr ? std::string() : *id, principal = request.principal,
                       responder = std::move(responder)] {
          auto view = workbench::session_view(ctx->workbench.store(), ctx->workbench.knowledge(),
                                              id, principal);
          responder.send(view.is_ok() ? HttpResponse::json(200, *view)
                                      : HttpResponse::error(view.status()));
        });
      });
}

}  // namespace kforge::frontends::http
