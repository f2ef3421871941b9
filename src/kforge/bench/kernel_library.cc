#include "kforge/bench/kernel_library.h"

#include <algorithm>
#include <cstdlib>

#include "kforge/common/files.h"

namespace kforge::bench {
namespace {

bool is_identifier(std::string_view s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0])) != 0) return false;
  return std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_';
  });
}

template <typename T>
bool contains(const T& range, std::string_view value) {
  return std::find(range.begin(), range.end(), value) != range.end();
}

// Reads manifests with the origin and JSON path of every problem.
class ManifestReader {
 public:
  explicit ManifestReader(std::string origin) : origin_(std::move(origin)) {}

  Status error(const JsonPath& path, const std::string& message) const {
    return invalid_argument(origin_ + ": " + path.display() + ": " + message, path.str());
  }

  StatusOr<const Json*> member(const Json& object, const JsonPath& path, const char* key,
                               bool required = true) const {
    auto it = object.find(key);
    if (it == object.end() || it->is_null()) {
      if (required) return error(path.key(key), "is required");
      return static_cast<const Json*>(nullptr);
    }
    return &*it;
  }

  StatusOr<std::string> text(const Json& object, const JsonPath& path, const char* key,
                             bool one_line = false) const {
    KF_ASSIGN_OR_RETURN(const Json* v, member(object, path, key));
    if (!v->is_string() || v->get<std::string>().empty()) {
      return error(path.key(key), "must be a non-empty string");
    }
    std::string s = v->get<std::string>();
    if (one_line && s.find_first_of("\r\n") != std::string::npos) {
      return error(path.key(key), "must be one line (a Python expression)");
    }
    return s;
  }

  StatusOr<const Json*> object(const Json& parent, const JsonPath& path, const char* key) const {
    KF_ASSIGN_OR_RETURN(const Json* v, member(parent, path, key));
    if (!v->is_object()) return error(path.key(key), "must be an object");
    return v;
  }

  StatusOr<int64_t> count(const Json& parent, const JsonPath& path, const char* key) const {
    KF_ASSIGN_OR_RETURN(const Json* v, member(parent, path, key));
    if (!v->is_number_integer() || v->get<int64_t>() < 0) {
      return error(path.key(key), "must be a non-negative integer");
    }
    return v->get<int64_t>();
  }

  StatusOr<ManifestArg> arg(const Json& j, const JsonPath& path) const {
    if (!j.is_object()) return error(path, "must be an object");
    ManifestArg a;
    KF_ASSIGN_OR_RETURN(a.name, text(j, path, "name"));
    if (!is_identifier(a.name)) return error(path.key("name"), "must be a Python identifier");
    KF_ASSIGN_OR_RETURN(a.type, text(j, path, "type"));
    static constexpr std::array<std::string_view, 5> kTypes = {"tensor", "int", "float", "str",
                                                               "bool"};
    if (!contains(kTypes, a.type)) {
      return error(path.key("type"), "must be one of tensor, int, float, str, bool");
    }
    if (a.is_tensor()) {
      KF_ASSIGN_OR_RETURN(const Json* init, member(j, path, "init", false));
      a.init = init != nullptr ? *init : Json{{"kind", "randn"}};
      if (!a.init.is_object()) return error(path.key("init"), "must be an object");
    } else {
      KF_ASSIGN_OR_RETURN(const Json* value, member(j, path, "value"));
      a.value = *value;
    }
    return a;
  }

  StatusOr<SizeSpec> size(const Json& j, const JsonPath& path,
                          const std::vector<ManifestArg>& args) const {
    if (!j.is_object()) return error(path, "must be an object");
    SizeSpec s;
    KF_ASSIGN_OR_RETURN(s.label, text(j, path, "label"));
    KF_ASSIGN_OR_RETURN(const Json* shapes, object(j, path, "shapes"));
    for (const auto& a : args) {
      if (!a.is_tensor()) continue;
      const JsonPath p = path.key("shapes").key(a.name);
      auto it = shapes->find(a.name);
      if (it == shapes->end()) return error(p, "is required (one shape per tensor argument)");
      if (!it->is_array() || it->empty()) return error(p, "must be a list of positive integers");
      std::vector<int64_t> shape;
      for (const auto& d : *it) {
        if (!d.is_number_integer() || d.get<int64_t>() <= 0) {
          return error(p, "must be a list of positive integers");
        }
        shape.push_back(d.get<int64_t>());
      }
      s.shapes[a.name] = std::move(shape);
    }
    KF_ASSIGN_OR_RETURN(s.elements_moved, count(j, path, "elements_moved"));
    KF_ASSIGN_OR_RETURN(s.flops, count(j, path, "flops"));
    return s;
  }

 private:
  std::string origin_;
};

// The docstring's first two lines, when the file starts with a triple-quoted docstring.
std::vector<std::string> docstring_head(std::string_view source) {
  size_t pos = source.find_first_not_of(" \t\r\n");
  if (pos == std::string_view::npos) return {};
  for (std::string_view quote : {std::string_view("\"\"\""), std::string_view("'''")}) {
    if (source.substr(pos, 3) != quote) continue;
    size_t end = source.find(quote, pos + 3);
    std::string_view body = source.substr(
        pos + 3, end == std::string_view::npos ? std::string_view::npos : end - pos - 3);
    std::vector<std::string> lines;
    while (lines.size() < 2 && !body.empty()) {
      size_t nl = body.find('\n');
      lines.emplace_back(body.substr(0, nl));
      body = nl == std::string_view::npos ? std::string_view() : body.substr(nl + 1);
    }
    return lines;
  }
  return {};
}

std::string trim(std::string_view s) {
  size_t b = s.find_first_not_of(" \t\r");
  if (b == std::string_view::npos) return {};
  size_t e = s.find_last_not_of(" \t\r");
  return std::string(s.substr(b, e - b + 1));
}

}  // namespace

bool is_op_name(std::string_view name) {
  if (name.empty() || name.size() > 64 || name[0] < 'a' || name[0] > 'z') return false;
  return std::all_of(name.begin(), name.end(), [](char c) {
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
  });
}

StatusOr<OpManifest> parse_manifest(const Json& j, const std::string& origin) {
  ManifestReader r(origin);
  const JsonPath root;
  if (!j.is_object()) return r.error(root, "must be an object");
  OpManifest m;
  KF_ASSIGN_OR_RETURN(m.op, r.text(j, root, "op"));
  if (!is_op_name(m.op)) return r.error(root.key("op"), "must match [a-z][a-z0-9_]*");
  KF_ASSIGN_OR_RETURN(m.title, r.text(j, root, "title"));
  KF_ASSIGN_OR_RETURN(m.wrapper, r.text(j, root, "wrapper"));
  if (!is_identifier(m.wrapper)) return r.error(root.key("wrapper"), "must be an identifier");
  KF_ASSIGN_OR_RETURN(const Json* phase1, r.object(j, root, "phase1"));
  for (const char* key : {"definition", "inputs_outputs", "complexity", "bound_reason"}) {
    KF_RETURN_IF_ERROR(r.text(*phase1, root.key("phase1"), key).status());
  }
  KF_ASSIGN_OR_RETURN(std::string bound, r.text(*phase1, root.key("phase1"), "bound"));
  if (bound != "memory" && bound != "compute") {
    return r.error(root.key("phase1").key("bound"), "must be 'memory' or 'compute'");
  }
  m.phase1 = *phase1;
  KF_ASSIGN_OR_RETURN(m.reference, r.text(j, root, "reference", true));
  KF_ASSIGN_OR_RETURN(m.call, r.text(j, root, "call", true));

  KF_ASSIGN_OR_RETURN(const Json* args, r.member(j, root, "args"));
  if (!args->is_array() || args->empty()) return r.error(root.key("args"), "must be a list");
  for (size_t i = 0; i < args->size(); ++i) {
    KF_ASSIGN_OR_RETURN(ManifestArg a, r.arg((*args)[i], root.key("args").index(i)));
    for (const auto& seen : m.args) {
      if (seen.name == a.name) return r.error(root.key("args").index(i), "duplicate name");
    }
    m.args.push_back(std::move(a));
  }
  if (std::none_of(m.args.begin(), m.args.end(), [](const auto& a) { return a.is_tensor(); })) {
    return r.error(root.key("args"), "needs at least one tensor argument");
  }

  KF_ASSIGN_OR_RETURN(const Json* dtypes, r.member(j, root, "dtypes"));
  if (!dtypes->is_array() || dtypes->empty()) return r.error(root.key("dtypes"), "must be a list");
  KF_ASSIGN_OR_RETURN(const Json* tolerance, r.object(j, root, "tolerance"));
  for (size_t i = 0; i < dtypes->size(); ++i) {
    const Json& d = (*dtypes)[i];
    if (!d.is_string() || !contains(kBenchDTypes, d.get<std::string>())) {
      return r.error(root.key("dtypes").index(i), "must be float32, float16 or bfloat16");
    }
    const std::string name = d.get<std::string>();
    const JsonPath tp = root.key("tolerance").key(name);
    KF_ASSIGN_OR_RETURN(const Json* tol, r.object(*tolerance, root.key("tolerance"), name.c_str()));
    Tolerance t;
    for (auto [key, out] : {std::pair{"atol", &t.atol}, std::pair{"rtol", &t.rtol}}) {
      auto it = tol->find(key);
      if (it == tol->end() || !it->is_number() || it->get<double>() < 0) {
        return r.error(tp.key(key), "must be a non-negative number");
      }
      *out = it->get<double>();
    }
    m.dtypes.push_back(name);
    m.tolerance[name] = t;
  }
  KF_ASSIGN_OR_RETURN(m.default_dtype, r.text(j, root, "default_dtype"));
  if (!contains(m.dtypes, m.default_dtype)) {
    return r.error(root.key("default_dtype"), "must be one of dtypes");
  }

  KF_ASSIGN_OR_RETURN(const Json* sizes, r.object(j, root, "sizes"));
  for (std::string_view profile : kSizeProfiles) {
    const std::string pname(profile);
    KF_ASSIGN_OR_RETURN(const Json* by_size, r.object(*sizes, root.key("sizes"), pname.c_str()));
    for (std::string_view size : kSizeNames) {
      const std::string sname(size);
      const JsonPath sp = root.key("sizes").key(pname);
      KF_ASSIGN_OR_RETURN(const Json* spec, r.member(*by_size, sp, sname.c_str()));
      KF_ASSIGN_OR_RETURN(m.sizes[pname][sname], r.size(*spec, sp.key(sname), m.args));
    }
  }
  return m;
}

StatusOr<OpManifest> load_manifest(const std::filesystem::path& op_dir) {
  const auto path = op_dir / "manifest.json";
  KF_ASSIGN_OR_RETURN(std::string text, read_file(path));
  auto j = parse_json(text);
  if (!j.is_ok()) return invalid_argument(path.string() + ": " + j.status().message());
  KF_ASSIGN_OR_RETURN(OpManifest m, parse_manifest(*j, path.string()));
  if (m.op != op_dir.filename().string()) {
    return invalid_argument(path.string() + ": op '" + m.op + "' must equal its directory name '" +
                            op_dir.filename().string() + "'");
  }
  return m;
}

void read_summaries(KernelVersion& version) {
  std::vector<std::string> head = docstring_head(version.source);
  if (!head.empty()) {
    std::string first = trim(head[0]);
    for (std::string_view sep : {" — ", " - ", ": "}) {
      const std::string prefix = version.name + std::string(sep);
      if (first.starts_with(prefix)) {
        first = first.substr(prefix.size());
        break;
      }
    }
    if (!first.empty() && first.back() == '.') first.pop_back();
    version.summary_en = first;
  }
  if (head.size() > 1) {
    std::string second = trim(head[1]);
    if (second.starts_with("ko:")) version.summary_ko = trim(second.substr(3));
  }
}

KernelVersion version_from_source(std::string name, std::string source, std::string origin) {
  KernelVersion v;
  v.name = std::move(name);
  v.origin = std::move(origin);
  v.source = std::move(source);
  if (v.source.find_first_not_of(" \t\r\n") == std::string::npos) {
    v.source.clear();
    v.load_error = "the source is empty";
  }
  read_summaries(v);
  return v;
}

std::vector<KernelVersion> load_versions(const std::filesystem::path& op_dir) {
  std::vector<KernelVersion> versions;
  for (std::string_view name : kVersionNames) {
    const auto path = op_dir / (std::string(name) + ".py");
    auto text = read_file(path);
    if (!text.is_ok()) {
      KernelVersion v;
      v.name = std::string(name);
      v.origin = path.string();
      v.load_error = text.status().message();
      versions.push_back(std::move(v));
      continue;
    }
    versions.push_back(
        version_from_source(std::string(name), std::move(text).value(), path.string()));
  }
  return versions;
}

std::vector<std::string> library_ops(const std::filesystem::path& library) {
  std::vector<std::string> ops;
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(library, ec)) {
    const std::string name = entry.path().filename().string();
    if (is_op_name(name) && std::filesystem::is_regular_file(entry.path() / "manifest.json", ec)) {
      ops.push_back(name);
    }
  }
  std::sort(ops.begin(), ops.end());
  return ops;
}

Json OpTests::to_json() const {
  Json j = {{"dir", dir.empty() ? Json() : Json(dir.string())}, {"files", files}};
  if (!note.empty()) j["note"] = note;
  return j;
}

OpTests find_op_tests(const std::filesystem::path& op_dir) {
  OpTests t;
  std::error_code ec;
  if (!std::filesystem::is_directory(op_dir / "tests", ec)) {
    t.note = "the op has no tests/ directory";
    return t;
  }
  t.dir = std::filesystem::absolute(op_dir / "tests");
  for (std::string_view name : kOpTestFiles) {
    t.files[std::string(name)] =
        std::filesystem::is_regular_file(t.dir / name, ec) ? "kept" : "missing";
  }
  return t;
}

OpTests ensure_op_tests(const std::filesystem::path& library, const std::filesystem::path& op_dir,
                        const std::filesystem::path& manifest) {
  OpTests t;
  t.dir = std::filesystem::absolute(op_dir / "tests");
  std::error_code ec;
  std::vector<std::string> failed;
  for (std::string_view name : kOpTestFiles) {
    const std::string file(name);
    if (std::filesystem::is_regular_file(t.dir / file, ec)) {
      t.files[file] = "kept";
      continue;
    }
    auto text = read_file(library / "_scaffold" / "tests" / file);
    Status written = text.is_ok() ? make_dirs(t.dir) : text.status();
    if (written.is_ok()) written = write_file_atomic(t.dir / file, *text);
    t.files[file] = written.is_ok() ? "written" : "missing";
    if (!written.is_ok()) failed.push_back(written.to_string());
  }
  if (!std::filesystem::is_regular_file(op_dir / "manifest.json", ec)) {
    // A copy the tests read; rewritten every run, so it follows the library's manifest.
    auto text = read_file(manifest);
    Status copied = text.is_ok() ? make_dirs(t.dir) : text.status();
    if (copied.is_ok()) copied = write_file_atomic(t.dir / "manifest.json", *text);
    if (!copied.is_ok()) failed.push_back(copied.to_string());
  }
  for (const auto& why : failed)
    t.note += (t.note.empty() ? "" : "; ") + why;
  return t;
}

StatusOr<std::filesystem::path> find_kernel_library() {
  if (const char* p = std::getenv("KFORGE_KERNELS"); p != nullptr && *p != '\0') {  // NOLINT
    return std::filesystem::path(p);
  }
  KF_ASSIGN_OR_RETURN(auto exe, self_executable());
  for (auto dir = exe.parent_path(); !dir.empty() && dir != dir.root_path();
       dir = dir.parent_path()) {
    auto candidate = dir / "kernels";
    if (!library_ops(candidate).empty()) return candidate;
  }
  return not_found(
      "cannot find the kernel library (a kernels/ directory with <op>/manifest.json) "
      "above " +
      exe.string() + "; set KFORGE_KERNELS");
}

}  // namespace kforge::bench
