#include "kforge/frontends/http/api_tokens.h"

#include <map>
#include <set>

namespace kforge::frontends::http {
namespace {

bool is_blank(char c) {
  return c == ' ' || c == '\t' || c == '\r';
}

std::vector<std::string_view> split_fields(std::string_view line) {
  std::vector<std::string_view> fields;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && is_blank(line[i]))
      ++i;
    const size_t start = i;
    while (i < line.size() && !is_blank(line[i]))
      ++i;
    if (i > start) fields.push_back(line.substr(start, i - start));
  }
  return fields;
}

}  // namespace

StatusOr<std::vector<ApiToken>> parse_tokens_file(std::string_view text, const std::string& file) {
  std::vector<ApiToken> tokens;
  size_t number = 0;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    const std::string_view line = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    ++number;
    const std::vector<std::string_view> fields = split_fields(line);
    if (fields.empty() || fields[0].front() == '#') continue;
    const std::string where = file + " line " + std::to_string(number);
    if (fields.size() != 3) {
      return invalid_argument(where + ": expected '<name> <role> <token>', got " +
                                  std::to_string(fields.size()) + " field(s)",
                              "--tokens-file");
    }
    if (!model::is_principal_name(fields[0])) {
      return invalid_argument(where + ": the name '" + std::string(fields[0]) +
                                  "' must be 1 to 64 of A-Z a-z 0-9 . _ -",
                              "--tokens-file");
    }
    const auto role = model::role_from(fields[1]);
    if (!role || *role == model::Role::kAnonymous) {
      return invalid_argument(
          where + ": the role must be 'user' or 'admin', got '" + std::string(fields[1]) + "'",
          "--tokens-file");
    }
    if (fields[2].size() < kMinTokenLength) {
      return invalid_argument(where + ": the token of '" + std::string(fields[0]) +
                                  "' is shorter than " + std::to_string(kMinTokenLength) +
                                  " characters",
                              "--tokens-file");
    }
    tokens.push_back({std::string(fields[2]), {std::string(fields[0]), *role}});
  }
  if (tokens.empty()) return invalid_argument(file + " holds no token", "--tokens-file");
  return tokens;
}

Status check_tokens(const std::vector<ApiToken>& tokens) {
  std::set<std::string_view> secrets;
  std::map<std::string_view, model::Role> roles;
  for (const ApiToken& t : tokens) {
    if (!secrets.insert(t.secret).second) {
      return invalid_argument("a token is given twice (the second time for '" + t.principal.name +
                              "'): every token must be different");
    }
    auto [it, added] = roles.emplace(t.principal.name, t.principal.role);
    if (!added && it->second != t.principal.role) {
      return invalid_argument("the principal '" + t.principal.name + "' is given both roles '" +
                              std::string(model::to_string(it->second)) + "' and '" +
                              std::string(model::to_string(t.principal.role)) + "'");
    }
  }
  return Status::ok();
}

}  // namespace kforge::frontends::http
