#include "kforge/model/cuda_options.h"

#include <array>
#include <cctype>
#include <sstream>
#include <string_view>

namespace kforge::model {
namespace {

constexpr size_t kMaxOptions = 64;
constexpr size_t kMaxOptionLength = 512;

bool is_identifier(std::string_view s) {
  if (s.empty() || !(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  }
  return true;
}

bool printable(std::string_view s) {
  for (char c : s) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) return false;
  }
  return true;
}

// "--name=value" or "-name=value" -> value of `name`, if the option is spelled that way.
std::optional<std::string_view> value_of(std::string_view opt, std::string_view name) {
  for (std::string_view dashes : {"--", "-"}) {
    if (opt.size() > dashes.size() + name.size() && opt.starts_with(dashes) &&
        opt.substr(dashes.size(), name.size()) == name && opt[dashes.size() + name.size()] == '=') {
      return opt.substr(dashes.size() + name.size() + 1);
    }
  }
  return std::nullopt;
}

bool is_flag(std::string_view opt, std::string_view name) {
  return opt == std::string("-") + std::string(name) ||
         opt == std::string("--") + std::string(name);
}

bool allowed_ptxas_value(std::string_view v) {
  constexpr std::array<std::string_view, 9> kValues = {"-O0",
                                                       "-O1",
                                                       "-O2",
                                                       "-O3",
                                                       "-v",
                                                       "--verbose",
                                                       "--warn-on-spills",
                                                       "--warn-on-local-memory-usage",
                                                       "-warn-spills"};
  for (auto allowed : kValues) {
    if (v == allowed) return true;
  }
  return false;
}

// Why an option is refused, with advice where there is some.
std::string refusal(std::string_view opt) {
  std::string quoted = "'" + std::string(opt) + "'";
  if (opt.starts_with("-arch") || opt.starts_with("--gpu-architecture") ||
      opt.starts_with("-gencode") || opt.starts_with("--gpu-code")) {
    return quoted + " is not allowed: kforge compiles for the device's own architecture";
  }
  if (opt.starts_with("-I") || opt.starts_with("--include-path") ||
      opt.starts_with("--pre-include") || opt.starts_with("-include")) {
    return quoted +
           " is not allowed: kernels cannot read files; the CUDA toolkit headers are already "
           "on the include path";
  }
  return quoted + " is not an allowed NVRTC option; allowed: " + allowed_cuda_compile_options();
}

// The normalised form of one option, or why it is refused. `next` is the following token
// (for two-token forms such as "-Xptxas -O3" and "-D NAME"); `used_next` says it was taken.
StatusOr<std::string> normalise(std::string_view opt, const std::string* next, bool& used_next,
                                const JsonPath& path) {
  used_next = false;
  if (opt.size() == 3 && opt[0] == '-' && opt[1] == 'O' && opt[2] >= '0' && opt[2] <= '3') {
    return "--ptxas-options=-O" + std::string(1, opt[2]);
  }
  if (is_flag(opt, "use_fast_math")) return std::string("--use_fast_math");
  if (is_flag(opt, "lineinfo") || is_flag(opt, "generate-line-info")) {
    return std::string("-lineinfo");
  }
  if (is_flag(opt, "extra-device-vectorization")) {
    return std::string("--extra-device-vectorization");
  }
  if (is_flag(opt, "restrict")) return std::string("--restrict");
  if (opt == "-w" || opt == "--disable-warnings") return std::string("-w");
  if (is_flag(opt, "default-device") || opt == "--device-as-default-execution-space") {
    return std::string("-default-device");
  }
  if (auto v = value_of(opt, "std")) {
    if (*v == "c++11" || *v == "c++14" || *v == "c++17" || *v == "c++20") {
      return "-std=" + std::string(*v);
    }
    return invalid_argument("'" + std::string(opt) + "': -std must be c++11, c++14, c++17 or c++20",
                            path.str());
  }
  for (std::string_view name : {"ftz", "prec-div", "prec-sqrt", "fmad"}) {
    if (auto v = value_of(opt, name)) {
      if (*v == "true" || *v == "false") return "--" + std::string(name) + "=" + std::string(*v);
      return invalid_argument("'" + std::string(opt) + "': must be true or false", path.str());
    }
  }
  if (auto v = value_of(opt, "dopt")) {
    if (*v == "on" || *v == "off") return "--dopt=" + std::string(*v);
    return invalid_argument("'" + std::string(opt) + "': must be on or off", path.str());
  }
  if (auto v = value_of(opt, "maxrregcount")) {
    int n = 0;
    std::istringstream in{std::string(*v)};
    if (!(in >> n) || !in.eof() || n < 1 || n > 255) {
      return invalid_argument("'" + std::string(opt) + "': must be an integer in 1..255",
                              path.str());
    }
    return "--maxrregcount=" + std::to_string(n);
  }
  std::optional<std::string> ptxas;
  if (auto v = value_of(opt, "ptxas-options")) ptxas = std::string(*v);
  if (auto v = value_of(opt, "Xptxas")) ptxas = std::string(*v);
  if (!ptxas && opt == "-Xptxas" && next != nullptr) {
    ptxas = *next;
    used_next = true;
  }
  if (ptxas) {
    if (allowed_ptxas_value(*ptxas)) return "--ptxas-options=" + *ptxas;
    return invalid_argument("'" + *ptxas +
                                "' is not an allowed ptxas option (allowed: -O0..-O3, -v, "
                                "--warn-on-spills, --warn-on-local-memory-usage)",
                            path.str());
  }
  // -DNAME[=value], --define-macro=NAME[=value], "-D NAME[=value]"; -UNAME likewise.
  for (auto [short_form, long_form, out] :
       {std::array<std::string_view, 3>{"-D", "--define-macro=", "-D"},
        std::array<std::string_view, 3>{"-U", "--undefine-macro=", "-U"}}) {
    std::string body;
    if (opt.starts_with(long_form)) {
      body = opt.substr(long_form.size());
    } else if (opt == short_form && next != nullptr) {
      body = *next;
      used_next = true;
    } else if (opt.starts_with(short_form) && opt.size() > 2) {
      body = opt.substr(2);
    } else {
      continue;
    }
    auto eq = body.find('=');
    std::string_view name = std::string_view(body).substr(0, eq);
    if (!is_identifier(name)) {
      return invalid_argument("'" + std::string(opt) + "': the macro name must be an identifier",
                              path.str());
    }
    if (out == "-U" && eq != std::string::npos) {
      return invalid_argument("'" + std::string(opt) + "': -U takes no value", path.str());
    }
    return std::string(out) + body;
  }
  return invalid_argument(refusal(opt), path.str());
}

}  // namespace

std::string allowed_cuda_compile_options() {
  return "-O0..-O3, --use_fast_math, -lineinfo, -std=c++11|14|17|20, -D<name>[=value], "
         "-U<name>, --ftz=, --prec-div=, --prec-sqrt=, --fmad= (true|false), "
         "--maxrregcount=N, --extra-device-vectorization, --restrict, -w, -default-device, "
         "--dopt=on|off, --ptxas-options=(-O0..-O3|-v|--warn-on-spills|"
         "--warn-on-local-memory-usage)";
}

StatusOr<std::vector<std::string>> parse_cuda_compile_options(const Json& metadata,
                                                              const JsonPath& metadata_path) {
  std::vector<std::string> out;
  if (!metadata.is_object()) return out;
  auto it = metadata.find("compile_options");
  if (it == metadata.end() || it->is_null()) return out;
  const JsonPath path = metadata_path.key("compile_options");
  std::vector<std::string> tokens;
  if (it->is_string()) {
    std::istringstream in(it->get<std::string>());
    for (std::string t; in >> t;)
      tokens.push_back(t);
  } else if (it->is_array()) {
    for (size_t i = 0; i < it->size(); ++i) {
      if (!(*it)[i].is_string()) {
        return invalid_argument("must be a string", path.index(i).str());
      }
      tokens.push_back((*it)[i].get<std::string>());
    }
  } else {
    return invalid_argument("must be a list of strings (or one string of options)", path.str());
  }
  if (tokens.size() > kMaxOptions) {
    return invalid_argument("has more than " + std::to_string(kMaxOptions) + " options",
                            path.str());
  }
  for (size_t i = 0; i < tokens.size(); ++i) {
    const JsonPath item = it->is_array() ? path.index(i) : path;
    const std::string& t = tokens[i];
    if (t.empty()) return invalid_argument("must not be empty", item.str());
    if (t.size() > kMaxOptionLength || !printable(t)) {
      return invalid_argument(
          "options must be 1 to " + std::to_string(kMaxOptionLength) + " printable characters",
          item.str());
    }
    bool used_next = false;
    const std::string* next = i + 1 < tokens.size() ? &tokens[i + 1] : nullptr;
    KF_ASSIGN_OR_RETURN(std::string normalised, normalise(t, next, used_next, item));
    out.push_back(std::move(normalised));
    if (used_next) ++i;
  }
  return out;
}

}  // namespace kforge::model
