// Typed access to the fields of a JSON object, with errors that name the field.
//
// Every error is kInvalidArgument whose field path is `path.key(key)` (Status::field_path),
// e.g. "custom_kernel.io.args[2].tensor_spec.shape: must be a list of non-negative integers".
// A member that is absent or null is "not given": the optional readers return nullopt and a
// required one says "is required". Knows nothing of kernels or requests (parse.h does).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kforge/common/json.h"
#include "kforge/common/status.h"

namespace kforge::model::reader {

// kInvalidArgument `message` for the field at `path`.
Status field_error(const JsonPath& path, std::string message);

// OK when `j` is an object; else "must be an object, got <type>".
Status expect_object(const Json& j, const JsonPath& path);

// OK when every key is a member of `obj` and not null; else "<path>.<key>: is required" for
// the first missing one, followed by `why` when given.
Status require_members(const Json& obj, const JsonPath& path,
                       std::initializer_list<std::string_view> keys, std::string_view why = {});

// The member, or nullptr when absent or null.
const Json* member(const Json& obj, std::string_view key);

// A string; "" when absent and not required.
StatusOr<std::string> read_string(const Json& obj, std::string_view key, const JsonPath& path,
                                  bool required);

// A finite number in [min, max].
StatusOr<std::optional<double>> read_number(const Json& obj, std::string_view key,
                                            const JsonPath& path, double min, double max);

// An integer in [min, max]; 5.0 is accepted as 5.
StatusOr<std::optional<int64_t>> read_int(const Json& obj, std::string_view key,
                                          const JsonPath& path, int64_t min, int64_t max);

// A non-negative integer of up to 64 bits; -1 or 2^64 is an error, never a wrap.
StatusOr<std::optional<uint64_t>> read_uint64(const Json& obj, std::string_view key,
                                              const JsonPath& path);

StatusOr<std::optional<bool>> read_bool(const Json& obj, std::string_view key,
                                        const JsonPath& path);

// A JSON integer that fits int64_t (a number_unsigned above INT64_MAX does not).
bool fits_int64(const Json& v);

// A list of at most `max_rank` non-negative integers (required).
StatusOr<std::vector<int64_t>> read_shape(const Json& obj, std::string_view key,
                                          const JsonPath& path, int max_rank);

// A string that must hold a value: required, and "must not be empty" when "" (a field given
// is a value; leave it out, or send null, for a default).
StatusOr<std::string> read_nonempty_string(const Json& obj, std::string_view key,
                                           const JsonPath& path);

// A string naming one value of an enum (`from` maps names to values; `allowed` lists them
// for the message); `fallback` when absent or null. "" is refused ("must not be empty"): it
// names no value, and taking it for the default would hide a client's mistake.
template <typename E>
StatusOr<E> read_enum(const Json& obj, std::string_view key, const JsonPath& path, E fallback,
                      std::optional<E> (*from)(std::string_view), std::string_view allowed) {
  if (member(obj, key) == nullptr) return fallback;
  KF_ASSIGN_OR_RETURN(std::string s, read_string(obj, key, path, false));
  if (s.empty()) {
    return field_error(path.key(key),
                       "must not be empty (expected one of: " + std::string(allowed) + ")");
  }
  auto e = from(s);
  if (!e) {
    return field_error(path.key(key),
                       "unknown value '" + s + "' (expected one of: " + std::string(allowed) + ")");
  }
  return *e;
}

}  // namespace kforge::model::reader
