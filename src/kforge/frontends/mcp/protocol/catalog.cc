#include "kforge/frontends/mcp/protocol/catalog.h"

namespace kforge::frontends::mcp {

Json Catalog::capabilities() const {
  Json caps = {{"tools", Json::object()}, {"logging", Json::object()}};
  if (!resources.empty()) {
    Json r = Json::object();
    if (resource_subscriptions) r["subscribe"] = true;
    caps["resources"] = std::move(r);
  }
  if (!prompts.empty()) caps["prompts"] = Json::object();
  if (completion) caps["completions"] = Json::object();
  return caps;
}

Json Catalog::server_info(std::string_view protocol_version) const {
  Json j = {{"name", info.name}, {"version", info.version}};
  if (protocol_version >= std::string_view("2025-06-18") && !info.title.empty()) {
    j["title"] = info.title;
  }
  if (protocol_version >= std::string_view("2025-11-25") && !info.description.empty()) {
    j["description"] = info.description;
  }
  return j;
}

}  // namespace kforge::frontends::mcp
