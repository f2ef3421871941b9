#include "kforge/workbench/names.h"

#include "kforge/common/random.h"

namespace kforge::workbench {
namespace {

bool is_lower_alnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

}  // namespace

StatusOr<std::string> normalize_kernel_name(std::string_view name) {
  std::string out;
  out.reserve(name.size());
  for (char c : name) {
    if (c >= 'A' && c <= 'Z') {
      out.push_back(static_cast<char>(c - 'A' + 'a'));
    } else if (c == ' ' || c == '-') {
      out.push_back('_');
    } else {
      out.push_back(c);
    }
  }
  const auto bad = [&](const std::string& why) {
    return invalid_argument("kernel name '" + std::string(name) + "' " + why + ": use 1-" +
                                std::to_string(kMaxKernelNameLength) +
                                " characters a-z, 0-9 or _, starting with a letter "
                                "(e.g. 'softmax', 'vector_add')",
                            "name");
  };
  if (out.empty()) return bad("is empty");
  if (out.size() > kMaxKernelNameLength) return bad("is too long");
  if (out[0] < 'a' || out[0] > 'z') return bad("does not start with a letter");
  for (char c : out) {
    if (!is_lower_alnum(c) && c != '_') return bad("has a character that cannot be in a file name");
  }
  return out;
}

bool is_session_id(std::string_view id) {
  if (id.size() != 19 || !id.starts_with("wb_")) return false;
  for (char c : id.substr(3)) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

std::string new_session_id() {
  return "wb_" + random_hex(8);
}

}  // namespace kforge::workbench
