#include "kforge/frontends/http/api_docs.h"

#include <algorithm>
#include <set>

#include "kforge/common/log.h"

namespace kforge::frontends::http {
namespace {

constexpr const char* kMethods[] = {"get", "put", "post", "delete", "options", "head", "patch"};

std::string upper(std::string s) {
  for (char& c : s)
    c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// "/job/{job_id}/cancel" -> "/job/{}/cancel": paths compared by shape, not parameter names.
std::string path_shape(std::string_view path) {
  std::string out;
  for (size_t i = 0; i < path.size(); ++i) {
    if (path[i] == '{') {
      size_t close = path.find('}', i);
      if (close == std::string_view::npos) break;
      out += "{}";
      i = close;
    } else {
      out += path[i];
    }
  }
  return out;
}

std::string escape(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

std::string text_of(const Json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::string anchor(std::string_view text) {
  std::string out;
  for (char c : text)
    out += std::isalnum(static_cast<unsigned char>(c)) != 0 ? c : '-';
  return out;
}

// A schema in one line of HTML: links for $ref, "a | b" for unions, enum values.
std::string type_html(const Json& schema) {
  if (!schema.is_object()) return "any";
  if (auto r = schema.find("$ref"); r != schema.end() && r->is_string()) {
    const std::string name = r->get<std::string>().substr(r->get<std::string>().rfind('/') + 1);
    return "<a href=\"#schema-" + anchor(name) + "\">" + escape(name) + "</a>";
  }
  for (const char* key : {"oneOf", "anyOf"}) {
    if (auto u = schema.find(key); u != schema.end() && u->is_array()) {
      std::string out;
      for (const auto& s : *u)
        out += (out.empty() ? "" : " | ") + type_html(s);
      return out;
    }
  }
  std::string out;
  if (auto t = schema.find("type"); t != schema.end()) {
    if (t->is_string()) {
      out = escape(t->get<std::string>());
    } else if (t->is_array()) {
      for (const auto& name : *t)
        out += (out.empty() ? "" : " | ") + escape(name.get<std::string>());
    }
  }
  if (auto items = schema.find("items"); items != schema.end()) {
    out += " of " + type_html(*items);
  }
  if (auto e = schema.find("enum"); e != schema.end() && e->is_array()) {
    std::string values;
    for (const auto& v : *e)
      values += (values.empty() ? "" : ", ") + escape(v.dump());
    out += " (" + values + ")";
  }
  if (auto c = schema.find("const"); c != schema.end()) out += " = " + escape(c->dump());
  return out.empty() ? "any" : out;
}

std::string notes_html(const Json& schema) {
  std::string out = escape(text_of(schema, "description"));
  auto add = [&out](const std::string& note) { out += (out.empty() ? "" : " ") + note; };
  if (auto d = schema.find("default"); d != schema.end())
    add("Default <code>" + escape(d->dump()) + "</code>.");
  for (const auto& [key, label] : {std::pair{"minimum", "min"}, std::pair{"maximum", "max"},
                                   std::pair{"maxItems", "max items"}}) {
    if (auto v = schema.find(key); v != schema.end()) {
      add(std::string(label) + " <code>" + escape(v->dump()) + "</code>.");
    }
  }
  return out;
}

void render_operation(std::string& html, const std::string& method, const std::string& path,
                      const Json& op) {
  const std::string id = anchor(method + path);
  html += "<section class=\"op\" id=\"op-" + id + "\"><h3><span class=\"method " + method + "\">" +
          upper(method) + "</span> <code>" + escape(path) + "</code></h3>\n";
  if (auto s = text_of(op, "summary"); !s.empty()) html += "<p><b>" + escape(s) + "</b></p>\n";
  if (auto d = text_of(op, "description"); !d.empty()) html += "<p>" + escape(d) + "</p>\n";
  if (auto params = op.find("parameters"); params != op.end() && !params->empty()) {
    html += "<h4>Parameters</h4><table><tr><th>name</th><th>in</th><th>type</th><th></th></tr>\n";
    for (const auto& p : *params) {
      const Json schema = p.value("schema", Json::object());
      html += "<tr><td><code>" + escape(text_of(p, "name")) + "</code>" +
              (p.value("required", false) ? " <span class=\"req\">required</span>" : "") +
              "</td><td>" + escape(text_of(p, "in")) + "</td><td>" + type_html(schema) +
              "</td><td>" + escape(text_of(p, "description")) + " " + notes_html(schema) +
              "</td></tr>\n";
    }
    html += "</table>\n";
  }
  if (auto body = op.find("requestBody"); body != op.end()) {
    html += "<h4>Request body" + std::string(body->value("required", false) ? "" : " (optional)") +
            "</h4><p>";
    const Json content = body->value("content", Json::object());
    for (const auto& [type, media] : content.items()) {
      html += "<code>" + escape(type) +
              "</code>: " + type_html(media.value("schema", Json::object())) + "<br>";
    }
    html += "</p>\n";
  }
  html += "<h4>Responses</h4><table><tr><th>status</th><th>body</th><th></th></tr>\n";
  const Json responses = op.value("responses", Json::object());
  for (const auto& [code, response] : responses.items()) {
    std::string body;
    const Json content = response.value("content", Json::object());
    for (const auto& [type, media] : content.items()) {
      body +=
          "<code>" + escape(type) + "</code> " + type_html(media.value("schema", Json::object()));
    }
    html += "<tr><td><b>" + escape(code) + "</b></td><td>" + body + "</td><td>" +
            escape(text_of(response, "description")) + "</td></tr>\n";
  }
  html += "</table></section>\n";
}

void render_schema(std::string& html, const std::string& name, const Json& schema) {
  html += "<section class=\"schema\" id=\"schema-" + anchor(name) + "\"><h3>" + escape(name) +
          "</h3>\n";
  if (auto d = text_of(schema, "description"); !d.empty()) html += "<p>" + escape(d) + "</p>\n";
  auto props = schema.find("properties");
  if (props == schema.end()) {
    html += "<p>" + type_html(schema) + "</p></section>\n";
    return;
  }
  const Json required = schema.value("required", Json::array());
  html += "<table><tr><th>field</th><th>type</th><th></th></tr>\n";
  for (const auto& [field, prop] : props->items()) {
    const bool req = std::find(required.begin(), required.end(), Json(field)) != required.end();
    html += "<tr><td><code>" + escape(field) + "</code>" +
            (req ? " <span class=\"req\">required</span>" : "") + "</td><td>" + type_html(prop) +
            "</td><td>" + notes_html(prop) + "</td></tr>\n";
  }
  html += "</table></section>\n";
}

constexpr const char* kStyle = R"css(
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;max-width:1100px;margin:2em auto;padding:0 1em;color:#222;line-height:1.45}
code{font-family:ui-monospace,Menlo,Consolas,monospace;background:#f3f3f3;padding:0 .2em;border-radius:3px}
table{border-collapse:collapse;width:100%;margin:.4em 0 1em}th,td{border:1px solid #ddd;padding:.3em .5em;text-align:left;vertical-align:top}
th{background:#fafafa}.op,.schema{border-top:1px solid #eee;padding-top:.5em}
.method{display:inline-block;min-width:4.5em;text-align:center;color:#fff;border-radius:3px;padding:0 .3em;font-size:.85em}
.get{background:#2b7bb9}.post{background:#3a9a49}.delete{background:#c0392b}.put,.patch{background:#b9770e}
.req{color:#c0392b;font-size:.8em}nav li{margin:.1em 0}
)css";

}  // namespace

const Json& openapi_document() {
  static const Json doc = [] {
    auto parsed = parse_json(openapi_text());
    if (!parsed.is_ok()) {
      KF_LOG_ERROR("the embedded OpenAPI document is not valid JSON: {}",
                   parsed.status().to_string());
      return Json::object();
    }
    return std::move(parsed).value();
  }();
  return doc;
}

std::vector<std::pair<std::string, std::string>> documented_operations(const Json& doc) {
  std::vector<std::pair<std::string, std::string>> out;
  const Json paths = doc.value("paths", Json::object());
  for (const auto& [path, item] : paths.items()) {
    for (const char* m : kMethods) {
      if (item.contains(m)) out.emplace_back(upper(m), path);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<std::pair<std::string, std::string>> routed_operations(const Router& router) {
  auto out = router.routes();
  std::sort(out.begin(), out.end());
  return out;
}

Json openapi_for(const Json& doc, const Router& router) {
  std::set<std::pair<std::string, std::string>> routed;
  for (const auto& [method, pattern] : router.routes())
    routed.emplace(method, path_shape(pattern));
  for (const char* own : {"/openapi.json", "/docs"})
    routed.emplace("GET", own);
  Json out = doc;
  Json paths = Json::object();
  const Json documented = doc.value("paths", Json::object());
  for (const auto& [path, item] : documented.items()) {
    Json kept = Json::object();
    for (const auto& [key, value] : item.items()) {
      const bool is_method =
          std::find(std::begin(kMethods), std::end(kMethods), key) != std::end(kMethods);
      if (!is_method || routed.contains({upper(key), path_shape(path)})) kept[key] = value;
    }
    const bool has_operation = std::any_of(std::begin(kMethods), std::end(kMethods),
                                           [&kept](const char* m) { return kept.contains(m); });
    if (has_operation) paths[path] = std::move(kept);
  }
  out["paths"] = std::move(paths);
  return out;
}

std::string render_docs_html(const Json& doc) {
  const Json info = doc.value("info", Json::object());
  const std::string title = text_of(info, "title") + " API " + text_of(info, "version");
  std::string html = "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" +
                     escape(title) + "</title><style>" + kStyle + "</style></head><body>\n";
  html += "<h1>" + escape(title) + "</h1>\n<p>" + escape(text_of(info, "summary")) + "</p>\n<p>" +
          escape(text_of(info, "description")) +
          "</p>\n<p>The machine-readable document: <a href=\"openapi.json\">openapi.json</a> "
          "(OpenAPI " +
          escape(text_of(doc, "openapi")) + ").</p>\n";
  const Json paths = doc.value("paths", Json::object());
  html += "<h2>Operations</h2><nav><ul>\n";
  for (const auto& [path, item] : paths.items()) {
    for (const char* m : kMethods) {
      if (!item.contains(m)) continue;
      html += "<li><a href=\"#op-" + anchor(std::string(m) + path) + "\"><span class=\"method " +
              m + "\">" + upper(m) + "</span> <code>" + escape(path) + "</code></a> " +
              escape(text_of(item[m], "summary")) + "</li>\n";
    }
  }
  html += "</ul></nav>\n";
  for (const auto& [path, item] : paths.items()) {
    for (const char* m : kMethods) {
      if (item.contains(m)) render_operation(html, m, path, item[m]);
    }
  }
  html += "<h2>Schemas</h2>\n";
  const Json components = doc.value("components", Json::object());
  const Json schemas = components.value("schemas", Json::object());
  for (const auto& [name, schema] : schemas.items()) {
    render_schema(html, name, schema);
  }
  html += "</body></html>\n";
  return html;
}

Status add_docs_routes(Router& router) {
  const Json& full = openapi_document();
  std::set<std::pair<std::string, std::string>> documented;
  for (const auto& [method, path] : documented_operations(full))
    documented.emplace(method, path_shape(path));
  for (const auto& [method, pattern] : router.routes()) {
    if (!documented.contains({method, path_shape(pattern)})) {
      KF_LOG_WARN("route {} {} is not described in docs/openapi.json", method, pattern);
    }
  }
  const Json doc = openapi_for(full, router);
  auto json_body = std::make_shared<const std::string>(dump_json(doc));
  auto html_body = std::make_shared<const std::string>(render_docs_html(doc));
  KF_RETURN_IF_ERROR(
      router.add("GET", "/openapi.json", [json_body](const HttpRequest&, const Responder& r) {
        HttpResponse response;
        response.body = *json_body;
        r.send(std::move(response));
      }));
  return router.add("GET", "/docs", [html_body](const HttpRequest&, const Responder& r) {
    HttpResponse response;
    response.content_type = "text/html; charset=utf-8";
    response.body = *html_body;
    r.send(std::move(response));
  });
}

}  // namespace kforge::frontends::http
