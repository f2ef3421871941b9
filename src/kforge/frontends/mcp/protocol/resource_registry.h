// ResourceRegistry: resources (fixed URIs) and resource templates (RFC 6570 level-1 URI
// templates such as "test://template/{id}/data", each variable matching one or more
// characters other than '/') with the functions that read them.
//
// Thread-safety: build before serving; afterwards only read (from any thread).
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kforge/common/json.h"
#include "kforge/common/status.h"

namespace kforge::frontends::mcp {

struct ResourceSpec {
  std::string uri;  // for a template: the URI template
  std::string name;
  std::string title;
  std::string description;
  std::string mime_type;
};

using UriVariables = std::map<std::string, std::string>;
// Returns the `contents` array of resources/read for the concrete `uri`.
using ResourceReader = std::function<StatusOr<Json>(const std::string& uri, const UriVariables&)>;

class ResourceRegistry {
 public:
  Status add(ResourceSpec spec, ResourceReader reader);
  Status add_template(ResourceSpec spec, ResourceReader reader);

  bool empty() const { return resources_.empty() && templates_.empty(); }
  // resources/list and resources/templates/list entries, in registration order.
  std::vector<Json> resource_listings() const;
  std::vector<Json> template_listings() const;
  // {"contents": [...]}; kNotFound when no resource or template matches `uri`.
  StatusOr<Json> read(const std::string& uri) const;

  // Matches `uri` against `uri_template`; nullopt when it does not match.
  static std::optional<UriVariables> match_template(std::string_view uri_template,
                                                    std::string_view uri);

 private:
  struct Entry {
    ResourceSpec spec;
    ResourceReader reader;
  };
  std::vector<Entry> resources_;
  std::vector<Entry> templates_;
};

}  // namespace kforge::frontends::mcp
