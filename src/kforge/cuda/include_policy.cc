#include "kforge/cuda/include_policy.h"

#include <cctype>
#include <string>
#include <vector>

namespace kforge::cuda {
namespace {

// One logical line of the source (backslash-newlines spliced, comments as one space) and
// the physical line it starts on.
struct LogicalLine {
  int number = 1;
  std::string text;
};

bool is_identifier_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
}

// A backslash (or the `??/` trigraph) followed by a newline at `i`: its length, else 0.
size_t splice_at(std::string_view s, size_t i) {
  size_t slash = 0;
  if (s[i] == '\\') {
    slash = 1;
  } else if (s.substr(i, 3) == "?\?/") {
    slash = 3;
  } else {
    return 0;
  }
  if (s.substr(i + slash, 1) == "\n") return slash + 1;
  if (s.substr(i + slash, 2) == "\r\n") return slash + 2;
  return 0;
}

// Whether a `"` that follows `text` opens a raw string literal (R, u8R, uR, UR, LR prefix).
bool opens_raw_string(const std::string& text) {
  if (text.empty() || text.back() != 'R') return false;
  std::string prefix;
  size_t i = text.size() - 1;
  while (i > 0 && is_identifier_char(text[i - 1])) {
    --i;
  }
  prefix = text.substr(i, text.size() - 1 - i);
  return prefix.empty() || prefix == "u8" || prefix == "u" || prefix == "U" || prefix == "L";
}

// Translation phases 1-3, as far as directives care: splices, comments and literals.
std::vector<LogicalLine> logical_lines(std::string_view s) {
  enum class State { kCode, kLineComment, kBlockComment };
  std::vector<LogicalLine> lines;
  LogicalLine current;
  int line = 1;
  State state = State::kCode;
  size_t i = 0;
  while (i < s.size()) {
    if (size_t n = splice_at(s, i); n > 0) {
      i += n;
      ++line;
      continue;
    }
    const char c = s[i];
    if (c == '\n') {
      ++line;
      ++i;
      if (state == State::kBlockComment) continue;  // the comment (one space) goes on
      state = State::kCode;
      lines.push_back(std::move(current));
      current = LogicalLine{line, {}};
      continue;
    }
    if (state == State::kLineComment) {
      ++i;
      continue;
    }
    if (state == State::kBlockComment) {
      if (s.substr(i, 2) == "*/") {
        state = State::kCode;
        i += 2;
      } else {
        ++i;
      }
      continue;
    }
    if (s.substr(i, 2) == "//") {
      state = State::kLineComment;
      current.text += ' ';
      i += 2;
    } else if (s.substr(i, 2) == "/*") {
      state = State::kBlockComment;
      current.text += ' ';
      i += 2;
    } else if (s.substr(i, 3) == "?\?=") {
      current.text += '#';
      i += 3;
    } else if (c == '"' && opens_raw_string(current.text)) {
      // R"delim( ... )delim": kept as an empty literal; its newlines still count.
      const size_t open = s.find('(', i);
      const std::string end = open == std::string_view::npos
                                  ? "\""
                                  : ")" + std::string(s.substr(i + 1, open - i - 1)) + "\"";
      const size_t close =
          open == std::string_view::npos ? std::string_view::npos : s.find(end, open);
      const size_t stop = close == std::string_view::npos ? s.size() : close + end.size();
      for (size_t k = i; k < stop; ++k) {
        if (s[k] == '\n') ++line;
      }
      current.text += "\"\"";
      i = stop;
    } else if (c == '"' || c == '\'') {
      // A literal: copied as is (an include's path is one), escapes and all, up to its end
      // or the end of the line.
      current.text += c;
      ++i;
      while (i < s.size() && s[i] != '\n') {
        if (size_t n = splice_at(s, i); n > 0) {
          i += n;
          ++line;
          continue;
        }
        current.text += s[i];
        if (s[i] == '\\' && i + 1 < s.size() && s[i + 1] != '\n') {
          current.text += s[i + 1];
          i += 2;
          continue;
        }
        if (s[i++] == c) break;
      }
    } else {
      current.text += c;
      ++i;
    }
  }
  lines.push_back(std::move(current));
  return lines;
}

size_t skip_space(const std::string& t, size_t p) {
  while (p < t.size() && std::isspace(static_cast<unsigned char>(t[p])) != 0) {
    ++p;
  }
  return p;
}

// Why `path` may not be included, or "" when it may.
std::string refusal_of_path(std::string_view path) {
  if (path.empty()) return "an empty path";
  if (path.front() == '/') return "an absolute path";
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string_view::npos) slash = path.size();
    if (path.substr(start, slash - start) == "..") return "a '..' component";
    start = slash + 1;
  }
  return {};
}

// The operand of an include at `p` ("path" or <path>): why it is refused, or "".
std::string refusal_of_operand(const std::string& t, size_t p) {
  p = skip_space(t, p);
  if (p < t.size() && (t[p] == '"' || t[p] == '<')) {
    const size_t close = t.find(t[p] == '"' ? '"' : '>', p + 1);
    if (close == std::string::npos) return "an unterminated path";
    return refusal_of_path(std::string_view(t).substr(p + 1, close - p - 1));
  }
  return "a computed include (its path is a macro only the preprocessor expands)";
}

// `#include`, `#include_next` or `#import` on this line: why it is refused, or "".
std::string refusal_of_directive(const std::string& t) {
  size_t p = skip_space(t, 0);
  if (t.compare(p, 1, "#") == 0 && t.compare(p, 2, "##") != 0) {
    p += 1;
  } else if (t.compare(p, 2, "%:") == 0 && t.compare(p, 4, "%:%:") != 0) {
    p += 2;
  } else {
    return {};
  }
  p = skip_space(t, p);
  size_t end = p;
  while (end < t.size() && is_identifier_char(t[end])) {
    ++end;
  }
  const std::string name = t.substr(p, end - p);
  if (name != "include" && name != "include_next" && name != "import") return {};
  return refusal_of_operand(t, end);
}

// `__has_include(...)` anywhere on the line (outside literals): why it is refused, or "".
std::string refusal_of_has_include(const std::string& t) {
  size_t p = 0;
  while (p < t.size()) {
    if (t[p] == '"' || t[p] == '\'') {
      const char quote = t[p++];
      while (p < t.size() && t[p] != quote) {
        p += t[p] == '\\' ? 2 : 1;
      }
      ++p;
      continue;
    }
    if (!is_identifier_char(t[p]) || (p > 0 && is_identifier_char(t[p - 1]))) {
      ++p;
      continue;
    }
    size_t end = p;
    while (end < t.size() && is_identifier_char(t[end])) {
      ++end;
    }
    const std::string name = t.substr(p, end - p);
    p = end;
    if (name != "__has_include" && name != "__has_include_next") continue;
    const size_t open = skip_space(t, end);
    if (open >= t.size() || t[open] != '(') continue;  // e.g. #ifdef __has_include
    if (std::string why = refusal_of_operand(t, open + 1); !why.empty()) return why;
  }
  return {};
}

std::string shown(const std::string& text) {
  size_t begin = skip_space(text, 0);
  size_t end = text.size();
  while (end > begin && std::isspace(static_cast<unsigned char>(text[end - 1])) != 0) {
    --end;
  }
  std::string out = text.substr(begin, end - begin);
  if (out.size() > 160) out = out.substr(0, 157) + "...";
  return out;
}

}  // namespace

Status check_includes(std::string_view source, std::string_view file_name) {
  for (const LogicalLine& line : logical_lines(source)) {
    std::string why = refusal_of_directive(line.text);
    if (why.empty()) why = refusal_of_has_include(line.text);
    if (why.empty()) continue;
    return invalid_argument(std::string(file_name) + " line " + std::to_string(line.number) +
                            ": `" + shown(line.text) + "` is refused: " + why +
                            ". A cuda source may include the CUDA headers and files beside it, "
                            "by relative paths without '..' (docs/security.md)");
  }
  return Status::ok();
}

}  // namespace kforge::cuda
