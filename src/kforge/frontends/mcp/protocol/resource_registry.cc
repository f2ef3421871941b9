#include "kforge/frontends/mcp/protocol/resource_registry.h"

namespace kforge::frontends::mcp {
namespace {

Json listing(const ResourceSpec& spec, const char* uri_key) {
  Json j = {{uri_key, spec.uri}, {"name", spec.name}};
  if (!spec.title.empty()) j["title"] = spec.title;
  if (!spec.description.empty()) j["description"] = spec.description;
  if (!spec.mime_type.empty()) j["mimeType"] = spec.mime_type;
  return j;
}

Status check_spec(const ResourceSpec& spec, const ResourceReader& reader) {
  if (spec.uri.empty() || spec.name.empty()) {
    return invalid_argument("a resource needs a URI and a name");
  }
  if (!reader) return invalid_argument("resource '" + spec.uri + "' has no reader");
  return Status::ok();
}

}  // namespace

Status ResourceRegistry::add(ResourceSpec spec, ResourceReader reader) {
  KF_RETURN_IF_ERROR(check_spec(spec, reader));
  resources_.push_back(Entry{std::move(spec), std::move(reader)});
  return Status::ok();
}

Status ResourceRegistry::add_template(ResourceSpec spec, ResourceReader reader) {
  KF_RETURN_IF_ERROR(check_spec(spec, reader));
  if (spec.uri.find('{') == std::string::npos) {
    return invalid_argument("resource template '" + spec.uri + "' has no {variable}");
  }
  templates_.push_back(Entry{std::move(spec), std::move(reader)});
  return Status::ok();
}

std::vector<Json> ResourceRegistry::resource_listings() const {
  std::vector<Json> out;
  for (const Entry& e : resources_)
    out.push_back(listing(e.spec, "uri"));
  return out;
}

std::vector<Json> ResourceRegistry::template_listings() const {
  std::vector<Json> out;
  for (const Entry& e : templates_)
    out.push_back(listing(e.spec, "uriTemplate"));
  return out;
}

std::optional<UriVariables> ResourceRegistry::match_template(std::string_view uri_template,
                                                             std::string_view uri) {
  UriVariables vars;
  size_t t = 0;
  size_t u = 0;
  while (t < uri_template.size()) {
    if (uri_template[t] != '{') {
      if (u >= uri.size() || uri[u] != uri_template[t]) return std::nullopt;
      ++t;
      ++u;
      continue;
    }
    size_t close = uri_template.find('}', t);
    if (close == std::string_view::npos) return std::nullopt;
    std::string name(uri_template.substr(t + 1, close - t - 1));
    t = close + 1;
    // The variable runs to the next literal character of the template (or to a '/').
    char stop = t < uri_template.size() ? uri_template[t] : '\0';
    size_t end = u;
    while (end < uri.size() && uri[end] != '/' && (stop == '\0' || uri[end] != stop))
      ++end;
    if (end == u) return std::nullopt;
    vars[name] = std::string(uri.substr(u, end - u));
    u = end;
  }
  if (u != uri.size()) return std::nullopt;
  return vars;
}

StatusOr<Json> ResourceRegistry::read(const std::string& uri) const {
  for (const Entry& e : resources_) {
    if (e.spec.uri != uri) continue;
    KF_ASSIGN_OR_RETURN(Json contents, e.reader(uri, {}));
    return Json{{"contents", std::move(contents)}};
  }
  for (const Entry& e : templates_) {
    auto vars = match_template(e.spec.uri, uri);
    if (!vars) continue;
    KF_ASSIGN_OR_RETURN(Json contents, e.reader(uri, *vars));
    return Json{{"contents", std::move(contents)}};
  }
  return not_found("no resource has the URI '" + uri + "'");
}

}  // namespace kforge::frontends::mcp
