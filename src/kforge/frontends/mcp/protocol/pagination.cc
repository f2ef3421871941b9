#include "kforge/frontends/mcp/protocol/pagination.h"

#include <algorithm>
#include <charconv>

#include "kforge/common/base64.h"
#include "kforge/frontends/mcp/protocol/jsonrpc.h"

namespace kforge::frontends::mcp {
namespace {

Status bad_cursor(std::string_view list) {
  return invalid_argument("is not a cursor of " + std::string(list) +
                              "/list (pass the nextCursor of the previous page unchanged)",
                          "cursor");
}

}  // namespace

std::string encode_cursor(std::string_view list, size_t offset) {
  return base64_encode(std::string(list) + ":" + std::to_string(offset));
}

StatusOr<Page> paginate(std::string_view list, size_t total, const Json& params, size_t page_size) {
  page_size = std::max<size_t>(page_size, 1);
  size_t begin = 0;
  if (const Json* cursor = jsonrpc::param(params, "cursor")) {
    if (!cursor->is_string()) return bad_cursor(list);
    auto decoded = base64_decode(cursor->get<std::string>());
    if (!decoded.is_ok()) return bad_cursor(list);
    const std::string& text = *decoded;
    if (text.size() <= list.size() + 1 || text.compare(0, list.size(), list) != 0 ||
        text[list.size()] != ':') {
      return bad_cursor(list);
    }
    const char* first = text.data() + list.size() + 1;
    const char* last = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(first, last, begin);
    if (ec != std::errc() || ptr != last || begin == 0 || begin > total) return bad_cursor(list);
  }
  Page page;
  page.begin = begin;
  page.end = std::min(total, begin + page_size);
  if (page.end < total) page.next_cursor = encode_cursor(list, page.end);
  return page;
}

}  // namespace kforge::frontends::mcp
