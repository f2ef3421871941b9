#include "kforge/model/cuda_kernel_names.h"

#include <algorithm>
#include <cctype>

namespace kforge::model {
namespace {

bool is_word_char(char c) {
  return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
}

// Words ([A-Za-z0-9_]+) and the punctuation the scanner needs: { } ( ) < > ; = and "::".
// Comments, literals and preprocessor lines produce nothing.
class Tokenizer {
 public:
  explicit Tokenizer(std::string_view src) : src_(src) {}

  std::vector<std::string> run() {
    std::vector<std::string> out;
    bool line_start = true;
    while (pos_ < src_.size()) {
      const char c = src_[pos_];
      if (c == '\n') {
        line_start = true;
        ++pos_;
      } else if (std::isspace(static_cast<unsigned char>(c)) != 0) {
        ++pos_;
      } else if (c == '#' && line_start) {
        skip_directive();
      } else if (starts_with("//")) {
        skip_until("\n");
      } else if (starts_with("/*")) {
        pos_ += 2;
        skip_until("*/", /*consume=*/true);
      } else if (c == '"') {
        line_start = false;
        const bool raw = pos_ > 0 && src_[pos_ - 1] == 'R' && !out.empty() &&
                         (out.back() == "R" || out.back().ends_with("R"));
        if (raw) out.pop_back();  // the R prefix was read as a word
        raw ? skip_raw_string() : skip_quoted('"');
      } else if (c == '\'') {
        line_start = false;
        // A digit separator (1'000) is not a character literal.
        if (pos_ > 0 && std::isalnum(static_cast<unsigned char>(src_[pos_ - 1])) != 0) {
          ++pos_;
        } else {
          skip_quoted('\'');
        }
      } else if (is_word_char(c)) {
        line_start = false;
        size_t end = pos_;
        while (end < src_.size() && is_word_char(src_[end]))
          ++end;
        out.emplace_back(src_.substr(pos_, end - pos_));
        pos_ = end;
      } else if (starts_with("::")) {
        line_start = false;
        out.emplace_back("::");
        pos_ += 2;
      } else {
        line_start = false;
        if (std::string_view("{}()<>;=").find(c) != std::string_view::npos) out.emplace_back(1, c);
        ++pos_;
      }
    }
    return out;
  }

 private:
  bool starts_with(std::string_view s) const { return src_.substr(pos_, s.size()) == s; }

  void skip_until(std::string_view end, bool consume = false) {
    const size_t at = src_.find(end, pos_);
    pos_ = at == std::string_view::npos ? src_.size() : at + (consume ? end.size() : 0);
  }

  void skip_directive() {  // to the end of the line, following backslash continuations
    while (pos_ < src_.size() && src_[pos_] != '\n') {
      if (src_[pos_] == '\\' && pos_ + 1 < src_.size() && src_[pos_ + 1] == '\n') ++pos_;
      ++pos_;
    }
  }

  void skip_quoted(char quote) {
    ++pos_;
    while (pos_ < src_.size() && src_[pos_] != quote && src_[pos_] != '\n') {
      pos_ += src_[pos_] == '\\' ? 2 : 1;
    }
    ++pos_;
  }

  void skip_raw_string() {  // R"delim( ... )delim"
    const size_t open = src_.find('(', pos_);
    if (open == std::string_view::npos) {
      pos_ = src_.size();
      return;
    }
    const std::string close = ")" + std::string(src_.substr(pos_ + 1, open - pos_ - 1)) + "\"";
    pos_ = open + 1;
    skip_until(close, /*consume=*/true);
  }

  std::string_view src_;
  size_t pos_ = 0;
};

bool is_attribute_word(const std::string& w) {
  return w == "__launch_bounds__" || w == "__attribute__" || w == "__declspec" || w == "alignas" ||
         w == "__align__" || w == "decltype" || w == "__maxnreg__" || w == "__cluster_dims__";
}

// Index just past the group that opens at `i` (`open` ... `close`, nested).
size_t skip_group(const std::vector<std::string>& t, size_t i, const char* open,
                  const char* close) {
  int depth = 0;
  for (; i < t.size(); ++i) {
    if (t[i] == open) ++depth;
    if (t[i] == close && --depth == 0) return i + 1;
  }
  return t.size();
}

// The function name declared after the `__global__` at `i`, or empty.
std::string declared_name(const std::vector<std::string>& t, size_t i) {
  for (size_t j = i + 1; j < t.size();) {
    const std::string& w = t[j];
    if (w == ";" || w == "{" || w == "}") return {};
    if (is_attribute_word(w) && j + 1 < t.size() && t[j + 1] == "(") {
      j = skip_group(t, j + 1, "(", ")");
      continue;
    }
    if (w == "(") {  // __global__ void (...)? not a declaration we understand
      j = skip_group(t, j, "(", ")");
      continue;
    }
    size_t next = j + 1;
    if (next < t.size() && t[next] == "<" && is_word_char(w[0]))
      next = skip_group(t, next, "<", ">");
    if (is_word_char(w[0]) && next < t.size() && t[next] == "(") {
      std::string name = w;
      for (size_t k = j; k >= 2 && t[k - 1] == "::" && is_word_char(t[k - 2][0]); k -= 2) {
        name.insert(0, t[k - 2] + "::");
      }
      return name;
    }
    ++j;
  }
  return {};
}

}  // namespace

std::vector<CudaKernelDecl> find_cuda_kernels(std::string_view source) {
  const std::vector<std::string> t = Tokenizer(source).run();
  std::vector<CudaKernelDecl> found;
  // One entry per open brace: the namespace it opens ("" for any other brace).
  std::vector<std::string> scopes;
  size_t statement_start = 0;  // first token of the current declaration
  for (size_t i = 0; i < t.size(); ++i) {
    const std::string& w = t[i];
    if (w == "namespace") {
      std::string name;
      size_t j = i + 1;
      for (; j < t.size() && t[j] != "{" && t[j] != ";" && t[j] != "="; ++j)
        name += t[j];
      if (j < t.size() && t[j] == "{") {
        scopes.push_back(name.empty() ? std::string("<anonymous>") : name);
        i = j;
        statement_start = i + 1;
      }
      continue;
    }
    if (w == "{") {
      scopes.emplace_back();
      statement_start = i + 1;
    } else if (w == "}") {
      if (!scopes.empty()) scopes.pop_back();
      statement_start = i + 1;
    } else if (w == ";") {
      statement_start = i + 1;
    } else if (w == "__global__") {
      std::string name = declared_name(t, i);
      if (name.empty()) continue;
      std::string prefix;
      for (const std::string& s : scopes) {
        if (!s.empty() && s != "<anonymous>") prefix.append(s).append("::");
      }
      name.insert(0, prefix);
      const bool is_template = std::find(t.begin() + static_cast<std::ptrdiff_t>(statement_start),
                                         t.begin() + static_cast<std::ptrdiff_t>(i),
                                         "template") != t.begin() + static_cast<std::ptrdiff_t>(i);
      auto same = [&name](const CudaKernelDecl& d) { return d.name == name; };
      auto it = std::find_if(found.begin(), found.end(), same);
      if (it == found.end()) {
        found.push_back({name, is_template});
      } else {
        it->is_template = it->is_template || is_template;
      }
    }
  }
  return found;
}

StatusOr<std::string> single_cuda_kernel(std::string_view source) {
  const std::vector<CudaKernelDecl> kernels = find_cuda_kernels(source);
  if (kernels.empty()) {
    return invalid_argument(
        "is required: the source defines no __global__ function kforge can find");
  }
  if (kernels.size() > 1) {
    std::string names;
    for (const auto& k : kernels)
      names += (names.empty() ? "" : ", ") + k.name;
    return invalid_argument("is required: the source defines several __global__ functions (" +
                            names + "); name the one to launch");
  }
  if (kernels[0].is_template) {
    return invalid_argument("is required: the only __global__ function, " + kernels[0].name +
                            ", is a template; name the instance to launch (e.g. \"" +
                            kernels[0].name + "<float>\")");
  }
  return kernels[0].name;
}

}  // namespace kforge::model
