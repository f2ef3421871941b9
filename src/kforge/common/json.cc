#include "kforge/common/json.h"

#include <algorithm>
#include <atomic>
#include <utility>
#include <vector>

namespace kforge {
namespace {

std::atomic<size_t> g_max_json_depth{kDefaultMaxJsonDepth};

// nlohmann's DOM builder (iterative: it keeps its own stack) behind a depth counter. A start
// past the limit returns false, which stops the parser at once.
class BoundedDomBuilder {
 public:
  using number_integer_t = Json::number_integer_t;
  using number_unsigned_t = Json::number_unsigned_t;
  using number_float_t = Json::number_float_t;
  using string_t = Json::string_t;
  using binary_t = Json::binary_t;

  BoundedDomBuilder(Json& root, size_t max_depth) : dom_(root, false), max_depth_(max_depth) {}

  bool null() { return dom_.null(); }
  bool boolean(bool v) { return dom_.boolean(v); }
  bool number_integer(number_integer_t v) { return dom_.number_integer(v); }
  bool number_unsigned(number_unsigned_t v) { return dom_.number_unsigned(v); }
  bool number_float(number_float_t v, const string_t& s) { return dom_.number_float(v, s); }
  bool string(string_t& v) { return dom_.string(v); }
  bool binary(binary_t& v) { return dom_.binary(v); }
  bool key(string_t& v) { return dom_.key(v); }
  bool start_object(size_t n) { return enter() && dom_.start_object(n); }
  bool start_array(size_t n) { return enter() && dom_.start_array(n); }
  bool end_object() {
    --depth_;
    return dom_.end_object();
  }
  bool end_array() {
    --depth_;
    return dom_.end_array();
  }
  template <class Exception>
  bool parse_error(size_t position, const std::string& token, const Exception& e) {
    error_ = e.what();
    return dom_.parse_error(position, token, e);
  }

  bool too_deep() const { return too_deep_; }
  const std::string& error() const { return error_; }

 private:
  bool enter() {
    if (++depth_ > max_depth_) {
      too_deep_ = true;
      return false;
    }
    return true;
  }

  nlohmann::detail::json_sax_dom_parser<Json> dom_;
  const size_t max_depth_;
  size_t depth_ = 0;
  bool too_deep_ = false;
  std::string error_;
};

}  // namespace

size_t max_json_depth() {
  return g_max_json_depth.load(std::memory_order_relaxed);
}

Status set_max_json_depth(size_t depth) {
  if (depth < 1 || depth > kMaxJsonDepthCeiling) {
    return invalid_argument("must be between 1 and " + std::to_string(kMaxJsonDepthCeiling) +
                                ", got " + std::to_string(depth),
                            "max_json_depth");
  }
  g_max_json_depth.store(depth, std::memory_order_relaxed);
  return Status::ok();
}

StatusOr<Json> parse_json(std::string_view text) {
  return parse_json(text, max_json_depth());
}

StatusOr<Json> parse_json(std::string_view text, size_t max_depth) {
  if (max_depth < 1 || max_depth > kMaxJsonDepthCeiling) {
    return internal_error("parse_json: depth limit " + std::to_string(max_depth) + " out of range");
  }
  Json root;
  BoundedDomBuilder builder(root, max_depth);
  bool ok = false;
  try {
    ok = Json::sax_parse(text, &builder);
  } catch (const Json::exception& e) {  // e.g. an object too large for the container
    return invalid_argument(std::string("body is not valid JSON: ") + e.what());
  }
  if (ok) return root;
  if (builder.too_deep()) {
    return invalid_argument("body is not valid JSON: nested deeper than the limit of " +
                            std::to_string(max_depth) + " levels (--max-json-depth)");
  }
  return invalid_argument("body is not valid JSON: " + builder.error());
}

size_t json_depth(const Json& value) {
  size_t deepest = 0;
  std::vector<std::pair<const Json*, size_t>> pending = {{&value, 0}};
  while (!pending.empty()) {
    auto [v, depth] = pending.back();
    pending.pop_back();
    if (!v->is_structured()) continue;
    deepest = std::max(deepest, depth + 1);
    for (const Json& child : *v)
      pending.emplace_back(&child, depth + 1);
  }
  return deepest;
}

JsonPath JsonPath::key(std::string_view name) const {
  if (path_.empty()) return JsonPath(std::string(name));
  std::string p = path_;
  p += '.';
  p += name;
  return JsonPath(std::move(p));
}

JsonPath JsonPath::index(size_t i) const {
  return JsonPath(path_ + "[" + std::to_string(i) + "]");
}

std::string_view json_type_name(const Json& value) {
  switch (value.type()) {
    case Json::value_t::null:
      return "null";
    case Json::value_t::object:
      return "object";
    case Json::value_t::array:
      return "array";
    case Json::value_t::string:
      return "string";
    case Json::value_t::boolean:
      return "boolean";
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
      return "integer";
    case Json::value_t::number_float:
      return "number";
    case Json::value_t::binary:
      return "binary";
    case Json::value_t::discarded:
      return "discarded";
  }
  return "unknown";
}

}  // namespace kforge
