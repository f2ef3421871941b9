#include "kforge/workbench/input_cases.h"

#include <cctype>
#include <optional>

namespace kforge::workbench {
namespace {

// A value of the literal: an integer or a tuple of integers.
struct Value {
  std::vector<int64_t> items;
  bool tuple = false;
};

class LiteralParser {
 public:
  explicit LiteralParser(std::string_view text) : text_(text) {}

  // The literal list/tuple starting at the current position.
  StatusOr<std::vector<Value>> parse_sizes() {
    skip();
    const char open = peek();
    if (open != '[' && open != '(') return error("expected a list '[' after 'sizes ='");
    ++pos_;
    const char close = open == '[' ? ']' : ')';
    std::vector<Value> out;
    while (true) {
      skip();
      if (peek() == close) {
        ++pos_;
        return out;
      }
      KF_ASSIGN_OR_RETURN(Value v, parse_item());
      out.push_back(std::move(v));
      skip();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      if (peek() != close) return error(std::string("expected ',' or '") + close + "'");
    }
  }

 private:
  Status error(const std::string& why) const {
    return invalid_argument(
        "sizes must be a literal list of integers or tuples of integers "
        "(the server does not run your code to find them): " +
            why + " at '" + std::string(text_.substr(pos_, 20)) + "'",
        "test_input_code");
  }

  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }

  // Skips whitespace, newlines and comments.
  void skip() {
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == '#') {
        while (pos_ < text_.size() && text_[pos_] != '\n')
          ++pos_;
      } else if (c == '\\' || std::isspace(static_cast<unsigned char>(c)) != 0) {
        ++pos_;
      } else {
        return;
      }
    }
  }

  bool take(std::string_view op) {
    skip();
    if (text_.substr(pos_, op.size()) != op) return false;
    // '*' must not match the first character of '**', '/' needs '//'.
    if (op == "*" && text_.substr(pos_, 2) == "**") return false;
    pos_ += op.size();
    return true;
  }

  StatusOr<Value> parse_item() {
    KF_ASSIGN_OR_RETURN(Value v, shift());
    return v;
  }

  static StatusOr<int64_t> scalar(const Value& v, const LiteralParser& p) {
    if (v.tuple || v.items.size() != 1) return p.error("arithmetic on a tuple");
    return v.items[0];
  }

  StatusOr<Value> binary(StatusOr<Value> (LiteralParser::*next)(),
                         std::initializer_list<std::string_view> ops) {
    KF_ASSIGN_OR_RETURN(Value left, (this->*next)());
    while (true) {
      std::string_view op;
      for (std::string_view candidate : ops) {
        if (take(candidate)) {
          op = candidate;
          break;
        }
      }
      if (op.empty()) return left;
      KF_ASSIGN_OR_RETURN(Value right, (this->*next)());
      KF_ASSIGN_OR_RETURN(int64_t a, scalar(left, *this));
      KF_ASSIGN_OR_RETURN(int64_t b, scalar(right, *this));
      KF_ASSIGN_OR_RETURN(int64_t r, apply(op, a, b));
      left = Value{{r}, false};
    }
  }

  StatusOr<int64_t> apply(std::string_view op, int64_t a, int64_t b) const {
    int64_t r = 0;
    bool overflow = false;
    if (op == "+") {
      overflow = __builtin_add_overflow(a, b, &r);
    } else if (op == "-") {
      overflow = __builtin_sub_overflow(a, b, &r);
    } else if (op == "*") {
      overflow = __builtin_mul_overflow(a, b, &r);
    } else if (op == "//" || op == "%") {
      if (b == 0) return error("division by zero");
      if (a < 0 || b < 0) return error("negative operand of // or %");
      r = op == "//" ? a / b : a % b;
    } else if (op == "<<") {
      if (b < 0 || b > 62 || a < 0 || (a > 0 && a > (INT64_MAX >> b))) return error("bad shift");
      r = a << b;
    } else if (op == ">>") {
      if (b < 0 || a < 0) return error("bad shift");
      r = b > 62 ? 0 : a >> b;
    } else if (op == "**") {
      if (b < 0) return error("negative exponent");
      r = 1;
      for (int64_t i = 0; i < b && !overflow; ++i)
        overflow = __builtin_mul_overflow(r, a, &r);
    }
    if (overflow) return error("integer overflow");
    return r;
  }

  StatusOr<Value> shift() { return binary(&LiteralParser::additive, {"<<", ">>"}); }
  StatusOr<Value> additive() { return binary(&LiteralParser::multiplicative, {"+", "-"}); }
  StatusOr<Value> multiplicative() { return binary(&LiteralParser::unary, {"*", "//", "%"}); }

  StatusOr<Value> unary() {
    if (take("-")) {
      KF_ASSIGN_OR_RETURN(Value v, unary());
      KF_ASSIGN_OR_RETURN(int64_t a, scalar(v, *this));
      return Value{{-a}, false};
    }
    return power();
  }

  StatusOr<Value> power() {
    KF_ASSIGN_OR_RETURN(Value base, atom());
    if (!take("**")) return base;
    KF_ASSIGN_OR_RETURN(Value exponent, unary());
    KF_ASSIGN_OR_RETURN(int64_t a, scalar(base, *this));
    KF_ASSIGN_OR_RETURN(int64_t b, scalar(exponent, *this));
    KF_ASSIGN_OR_RETURN(int64_t r, apply("**", a, b));
    return Value{{r}, false};
  }

  StatusOr<Value> atom() {
    skip();
    const char c = peek();
    if (c == '(' || c == '[') {
      ++pos_;
      const char close = c == '(' ? ')' : ']';
      Value out;
      bool comma = false;
      while (true) {
        skip();
        if (peek() == close) {
          ++pos_;
          break;
        }
        KF_ASSIGN_OR_RETURN(Value v, shift());
        KF_ASSIGN_OR_RETURN(int64_t item, scalar(v, *this));
        out.items.push_back(item);
        skip();
        if (peek() == ',') {
          ++pos_;
          comma = true;
        } else if (peek() != close) {
          return error(std::string("expected ',' or '") + close + "'");
        }
      }
      if (out.items.empty()) return error("empty tuple");
      out.tuple = c == '[' || comma || out.items.size() > 1;
      return out;
    }
    if (std::isdigit(static_cast<unsigned char>(c)) == 0) return error("expected an integer");
    int64_t value = 0;
    while (pos_ < text_.size() &&
           (std::isdigit(static_cast<unsigned char>(text_[pos_])) != 0 || text_[pos_] == '_')) {
      if (text_[pos_] != '_' && (__builtin_mul_overflow(value, 10, &value) ||
                                 __builtin_add_overflow(value, text_[pos_] - '0', &value))) {
        return error("integer overflow");
      }
      ++pos_;
    }
    if (pos_ < text_.size() &&
        (std::isalpha(static_cast<unsigned char>(text_[pos_])) != 0 || text_[pos_] == '.')) {
      return error("only integer literals are allowed");
    }
    return Value{{value}, false};
  }

  std::string_view text_;
  size_t pos_ = 0;
};

// The text after `sizes =` (or `sizes: T =`) when a line at column 0 assigns `sizes`.
std::optional<std::string_view> sizes_assignment(std::string_view code) {
  size_t line = 0;
  while (line < code.size()) {
    size_t end = code.find('\n', line);
    if (end == std::string_view::npos) end = code.size();
    std::string_view text = code.substr(line, end - line);
    if (text.starts_with("sizes")) {
      size_t i = 5;
      while (i < text.size() && (text[i] == ' ' || text[i] == '\t'))
        ++i;
      if (i < text.size() && text[i] == ':') {  // an annotation: skip to '='
        i = text.find('=', i);
        if (i == std::string_view::npos) return std::nullopt;
      }
      if (i < text.size() && text[i] == '=' && (i + 1 >= text.size() || text[i + 1] != '=')) {
        return code.substr(line + i + 1);
      }
    }
    line = end + 1;
  }
  return std::nullopt;
}

}  // namespace

StatusOr<std::vector<InputCase>> input_cases(std::string_view test_input_code) {
  std::optional<std::string_view> rhs = sizes_assignment(test_input_code);
  if (!rhs) return std::vector<InputCase>{InputCase{-1, "args", {}}};
  LiteralParser parser(*rhs);
  KF_ASSIGN_OR_RETURN(std::vector<Value> values, parser.parse_sizes());
  if (values.empty()) {
    return invalid_argument("sizes is empty: list at least one size", "test_input_code");
  }
  if (values.size() > kMaxInputCases) {
    return invalid_argument("sizes has " + std::to_string(values.size()) + " entries; at most " +
                                std::to_string(kMaxInputCases) + " (each size is one job)",
                            "test_input_code");
  }
  std::vector<InputCase> out;
  for (size_t i = 0; i < values.size(); ++i) {
    InputCase c{static_cast<int>(i), "", values[i].items};
    for (size_t j = 0; j < c.dims.size(); ++j) {
      if (j > 0) c.label += "x";
      c.label += std::to_string(c.dims[j]);
    }
    out.push_back(std::move(c));
  }
  return out;
}

}  // namespace kforge::workbench
