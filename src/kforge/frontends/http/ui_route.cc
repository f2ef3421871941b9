#include "kforge/frontends/http/ui_route.h"

#include <map>
#include <memory>
#include <string>

#include "kforge/frontends/http/ui_assets.h"

namespace kforge::frontends::http {
namespace {

bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

HttpResponse asset_response(std::string_view path, std::string_view content) {
  HttpResponse response;
  response.content_type = std::string(ui_content_type(path));
  response.body = std::string(content);
  response.headers = {{"Content-Security-Policy", std::string(kUiContentSecurityPolicy)},
                      {"X-Content-Type-Options", "nosniff"},
                      {"Referrer-Policy", "no-referrer"},
                      {"X-Frame-Options", "DENY"},
                      {"Cache-Control", "no-cache"}};
  return response;
}

}  // namespace

std::string_view ui_content_type(std::string_view path) {
  if (ends_with(path, ".html")) return "text/html; charset=utf-8";
  if (ends_with(path, ".js")) return "text/javascript; charset=utf-8";
  if (ends_with(path, ".css")) return "text/css; charset=utf-8";
  if (ends_with(path, ".svg")) return "image/svg+xml";
  if (ends_with(path, ".png")) return "image/png";
  return "application/octet-stream";
}

Status add_ui_routes(Router& router) {
  auto files = std::make_shared<std::map<std::string, std::string_view, std::less<>>>();
  for (const EmbeddedFile& f : ui_files())
    (*files)[std::string(f.path)] = f.content;
  if (!files->contains("index.html")) return internal_error("the web UI has no index.html");
  KF_RETURN_IF_ERROR(router.add("GET", "/ui", [files](const HttpRequest&, const Responder& r) {
    r.send(asset_response("index.html", files->at("index.html")));
  }));
  return router.add("GET", "/ui/{asset}", [files](const HttpRequest& request, const Responder& r) {
    const std::string* asset = request.path_param("asset");
    auto it = asset == nullptr ? files->end() : files->find(*asset);
    if (it == files->end()) {
      r.send(HttpResponse::error(not_found("no web UI file " + request.path)));
      return;
    }
    r.send(asset_response(it->first, it->second));
  });
}

}  // namespace kforge::frontends::http
