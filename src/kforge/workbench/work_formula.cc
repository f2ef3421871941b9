#include "kforge/workbench/work_formula.h"

#include <cctype>
#include <cstdlib>
#include <string>

namespace kforge::workbench {
namespace {

class FormulaParser {
 public:
  FormulaParser(std::string_view text, const std::vector<TensorShape>& tensors)
      : text_(text), tensors_(tensors) {}

  StatusOr<double> parse() {
    KF_ASSIGN_OR_RETURN(double v, sum());
    skip();
    if (pos_ != text_.size()) return error("unexpected text");
    return v;
  }

 private:
  Status error(const std::string& why) const {
    return invalid_argument("formula '" + std::string(text_) + "': " + why + " at offset " +
                            std::to_string(pos_));
  }
  void skip() {
    while (pos_ < text_.size() && std::isspace(static_cast<unsigned char>(text_[pos_])) != 0)
      ++pos_;
  }
  bool take(char c) {
    skip();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }

  StatusOr<double> sum() {
    KF_ASSIGN_OR_RETURN(double v, product());
    while (true) {
      if (take('+')) {
        KF_ASSIGN_OR_RETURN(double r, product());
        v += r;
      } else if (take('-')) {
        KF_ASSIGN_OR_RETURN(double r, product());
        v -= r;
      } else {
        return v;
      }
    }
  }

  StatusOr<double> product() {
    KF_ASSIGN_OR_RETURN(double v, factor());
    while (true) {
      if (take('*')) {
        KF_ASSIGN_OR_RETURN(double r, factor());
        v *= r;
      } else if (take('/')) {
        KF_ASSIGN_OR_RETURN(double r, factor());
        if (r == 0) return error("division by zero");
        v /= r;
      } else {
        return v;
      }
    }
  }

  StatusOr<double> factor() {
    if (take('-')) {
      KF_ASSIGN_OR_RETURN(double v, factor());
      return -v;
    }
    if (take('(')) {
      KF_ASSIGN_OR_RETURN(double v, sum());
      if (!take(')')) return error("expected ')'");
      return v;
    }
    skip();
    if (pos_ < text_.size() &&
        (std::isdigit(static_cast<unsigned char>(text_[pos_])) != 0 || text_[pos_] == '.')) {
      const std::string rest(text_.substr(pos_));
      char* end = nullptr;
      const double v = std::strtod(rest.c_str(), &end);
      pos_ += static_cast<size_t>(end - rest.c_str());
      return v;
    }
    size_t start = pos_;
    while (pos_ < text_.size() && std::isalpha(static_cast<unsigned char>(text_[pos_])) != 0)
      ++pos_;
    const std::string name(text_.substr(start, pos_ - start));
    if (name.empty()) return error("expected a number, '(' or a function");
    if (!take('(')) return error("expected '(' after " + name);
    std::vector<int64_t> args;
    do {
      KF_ASSIGN_OR_RETURN(double a, sum());
      args.push_back(static_cast<int64_t>(a));
    } while (take(','));
    if (!take(')')) return error("expected ')'");
    return call(name, args);
  }

  StatusOr<const TensorShape*> tensor(int64_t i) const {
    if (i < 0 || i >= static_cast<int64_t>(tensors_.size())) {
      return error("the call has " + std::to_string(tensors_.size()) +
                   " tensor argument(s), not an argument " + std::to_string(i));
    }
    return &tensors_[static_cast<size_t>(i)];
  }

  StatusOr<double> call(const std::string& name, const std::vector<int64_t>& args) const {
    const size_t want = name == "dim" ? 2 : 1;
    if (args.size() != want) return error(name + " takes " + std::to_string(want) + " argument(s)");
    KF_ASSIGN_OR_RETURN(const TensorShape* t, tensor(args[0]));
    double numel = 1;
    for (int64_t d : t->shape)
      numel *= static_cast<double>(d);
    if (name == "numel") return numel;
    if (name == "esize") return static_cast<double>(t->element_size);
    if (name == "bytes") return numel * static_cast<double>(t->element_size);
    if (name == "dim") {
      const auto rank = static_cast<int64_t>(t->shape.size());
      const int64_t j = args[1] < 0 ? args[1] + rank : args[1];
      if (j < 0 || j >= rank) {
        return error("tensor argument " + std::to_string(args[0]) + " has rank " +
                     std::to_string(rank) + ", no dimension " + std::to_string(args[1]));
      }
      return static_cast<double>(t->shape[static_cast<size_t>(j)]);
    }
    return error("unknown function " + name);
  }

  std::string_view text_;
  const std::vector<TensorShape>& tensors_;
  size_t pos_ = 0;
};

}  // namespace

int64_t dtype_size(std::string_view dtype) {
  if (dtype == "float64" || dtype == "int64" || dtype == "complex64") return 8;
  if (dtype == "float32" || dtype == "int32") return 4;
  if (dtype == "float16" || dtype == "bfloat16" || dtype == "int16") return 2;
  if (dtype == "int8" || dtype == "uint8" || dtype == "bool") return 1;
  if (dtype == "complex128") return 16;
  if (dtype.starts_with("float8")) return 1;
  return 0;
}

StatusOr<double> evaluate_formula(std::string_view formula,
                                  const std::vector<TensorShape>& tensors) {
  return FormulaParser(formula, tensors).parse();
}

}  // namespace kforge::workbench
