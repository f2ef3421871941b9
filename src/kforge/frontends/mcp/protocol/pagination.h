// Cursor pagination of the list methods (tools/list, resources/list, prompts/list, ...).
//
// Cursors are opaque to clients: base64 of "<list>:<offset>". A page holds at most
// `page_size` entries; `nextCursor` is present only when more entries follow, so the last
// page never carries one (clients loop forever on an empty or non-advancing cursor). The
// order is the registration order, so pages are deterministic.
//
// Example:
//   KF_ASSIGN_OR_RETURN(Page page, paginate("tools", tools.size(), params, 100));
//   for (size_t i = page.begin; i < page.end; ++i) out.push_back(listing(tools[i]));
//   if (page.next_cursor) result["nextCursor"] = *page.next_cursor;
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "kforge/common/json.h"
#include "kforge/common/status.h"

namespace kforge::frontends::mcp {

struct Page {
  size_t begin = 0;
  size_t end = 0;
  std::optional<std::string> next_cursor;
};

// The page that `params.cursor` (absent: the first page) selects in a list of `total`
// entries. kInvalidArgument (field "cursor") for a cursor this server did not issue for `list`
// or one past the end.
StatusOr<Page> paginate(std::string_view list, size_t total, const Json& params, size_t page_size);

std::string encode_cursor(std::string_view list, size_t offset);

}  // namespace kforge::frontends::mcp
