#include "kforge/bench/bench_request.h"

namespace kforge::bench {
namespace {

constexpr size_t kMaxSourceBytes = size_t{1} << 20;  // per version

// A list given as a JSON array of strings or one comma-separated string.
StatusOr<std::vector<std::string>> names(const Json& v, const std::string& field) {
  std::vector<std::string> out;
  if (v.is_string()) {
    const std::string s = v.get<std::string>();
    size_t start = 0;
    while (start <= s.size()) {
      size_t comma = s.find(',', start);
      std::string item =
          s.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
      item.erase(0, item.find_first_not_of(' '));
      item.erase(item.find_last_not_of(' ') + 1);
      if (!item.empty()) out.push_back(item);
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    return out;
  }
  if (!v.is_array()) return invalid_argument("must be a list of names or a comma list", field);
  for (size_t i = 0; i < v.size(); ++i) {
    if (!v[i].is_string()) {
      return invalid_argument("must be a string", field + "[" + std::to_string(i) + "]");
    }
    if (v[i].get_ref<const std::string&>().empty()) {
      return invalid_argument("must not be empty", field + "[" + std::to_string(i) + "]");
    }
    out.push_back(v[i].get<std::string>());
  }
  return out;
}

StatusOr<int> integer(const Json& v, const std::string& field) {
  if (!v.is_number_integer()) return invalid_argument("must be an integer", field);
  const auto n = v.get<int64_t>();
  if (n < INT32_MIN || n > INT32_MAX) return invalid_argument("is out of range", field);
  return static_cast<int>(n);
}

// A string that must not be empty: a field given is a value (leave it out for the default).
StatusOr<std::string> text(const Json& v, const std::string& field) {
  if (!v.is_string()) return invalid_argument("must be a string", field);
  if (v.get_ref<const std::string&>().empty()) return invalid_argument("must not be empty", field);
  return v.get<std::string>();
}

StatusOr<std::filesystem::path> local_path(const Json& v, const std::string& field,
                                           const BenchPolicy& policy) {
  if (!policy.allow_local_paths) {
    return invalid_argument(
        "is not accepted by a server (it would name a path on the server's machine); send "
        "the kernels as sources in 'kernels' and read the logs from the answer's 'files'",
        field);
  }
  KF_ASSIGN_OR_RETURN(std::string s, text(v, field));
  return std::filesystem::path(s);
}

// "parent.name", the field path of a member.
std::string dotted(std::string parent, std::string_view name) {
  parent += '.';
  parent += name;
  return parent;
}

Status read_sources(const Json& v, BenchOptions& o) {
  if (!v.is_object())
    return invalid_argument("must be an object {op: {version: source}}", "kernels");
  for (const auto& [op, versions] : v.items()) {
    const std::string field = "kernels." + op;
    if (!versions.is_object())
      return invalid_argument("must be an object {version: source}", field);
    for (const auto& [name, source] : versions.items()) {
      if (!source.is_string()) return invalid_argument("must be a string", dotted(field, name));
      if (source.get_ref<const std::string&>().find_first_not_of(" \t\r\n") == std::string::npos) {
        return invalid_argument("must not be empty", dotted(field, name));
      }
      if (source.get_ref<const std::string&>().size() > kMaxSourceBytes) {
        return invalid_argument("is larger than 1 MiB", dotted(field, name));
      }
      o.inline_kernels[op][name] = source.get<std::string>();
    }
  }
  return Status::ok();
}

Status read_retries(const Json& v, BenchOptions& o) {
  if (!v.is_object())
    return invalid_argument("must be an object {op: {version: count}}", "retries");
  for (const auto& [op, versions] : v.items()) {
    if (!versions.is_object()) return invalid_argument("must be an object", "retries." + op);
    for (const auto& [name, count] : versions.items()) {
      const std::string field = dotted("retries." + op, name);
      if (!is_version_name(name)) return invalid_argument("is not a version name", field);
      KF_ASSIGN_OR_RETURN(int n, integer(count, field));
      if (n < 0 || n > 100) return invalid_argument("must be 0 to 100", field);
      o.retries[op][name] = n;
    }
  }
  return Status::ok();
}

}  // namespace

StatusOr<BenchRequest> parse_bench_request(const Json& body, const BenchPolicy& policy) {
  if (!body.is_object()) return invalid_argument("must be an object", "<root>");
  BenchRequest r;
  BenchOptions& o = r.options;
  o.kforge_version = policy.kforge_version;
  static const std::vector<std::string> kKnown = {
      "ops",           "sizes",    "size_preset",   "runs",        "device",
      "dtype",         "log_lang", "kernels",       "retries",     "correct_trials",
      "job_timeout_s", "peaks",    "torch_compile", "kernels_dir", "out_dir"};
  for (const auto& [key, value] : body.items()) {
    if (key == "regenerate_cmd" || key == "regenerate_tries" || key == "regenerate_timeout_s") {
      return invalid_argument(
          "is not accepted here (it would run a command on the server's machine); run the "
          "regeneration loop with `kforge bench --kernels DIR --regenerate-cmd CMD`",
          key);
    }
    if (std::find(kKnown.begin(), kKnown.end(), key) == kKnown.end()) {
      return invalid_argument(
          "unknown field (known: ops, sizes, size_preset, runs, device, dtype, log_lang, "
          "kernels, retries, correct_trials, job_timeout_s, peaks, "
          "torch_compile" +
              std::string(policy.allow_local_paths ? ", kernels_dir, out_dir" : "") + ")",
          key);
    }
    if (value.is_null()) continue;
    if (key == "ops") {
      KF_ASSIGN_OR_RETURN(o.ops, names(value, key));
    } else if (key == "sizes") {
      KF_ASSIGN_OR_RETURN(o.sizes, names(value, key));
    } else if (key == "size_preset") {
      KF_ASSIGN_OR_RETURN(o.size_preset, text(value, key));
    } else if (key == "runs") {
      KF_ASSIGN_OR_RETURN(o.runs, integer(value, key));
    } else if (key == "correct_trials") {
      KF_ASSIGN_OR_RETURN(o.correct_trials, integer(value, key));
    } else if (key == "job_timeout_s") {
      if (!value.is_number()) return invalid_argument("must be a number", key);
      o.job_timeout_s = value.get<double>();
    } else if (key == "device") {
      KF_ASSIGN_OR_RETURN(o.device, text(value, key));
    } else if (key == "dtype") {
      KF_ASSIGN_OR_RETURN(o.dtype, text(value, key));
    } else if (key == "log_lang") {
      KF_ASSIGN_OR_RETURN(std::string lang, text(value, key));
      KF_ASSIGN_OR_RETURN(r.lang, parse_log_lang(lang, key));
    } else if (key == "peaks") {
      if (!value.is_boolean()) return invalid_argument("must be a boolean", key);
      o.peaks = value.get<bool>();
    } else if (key == "torch_compile") {
      if (!value.is_boolean()) return invalid_argument("must be a boolean", key);
      o.torch_compile = value.get<bool>();
    } else if (key == "kernels") {
      KF_RETURN_IF_ERROR(read_sources(value, o));
    } else if (key == "retries") {
      KF_RETURN_IF_ERROR(read_retries(value, o));
    } else if (key == "kernels_dir") {
      KF_ASSIGN_OR_RETURN(o.kernels_dir, local_path(value, key, policy));
    } else if (key == "out_dir") {
      KF_ASSIGN_OR_RETURN(r.out_dir, local_path(value, key, policy));
    }
  }
  if (!body.contains("ops")) return invalid_argument("is required", "ops");
  o.library = policy.library;
  if (o.library.empty()) {
    KF_ASSIGN_OR_RETURN(o.library, find_kernel_library());
  }
  KF_RETURN_IF_ERROR(validate_options(o));
  return r;
}

StatusOr<Json> bench_answer(const Json& report, const BenchRequest& request) {
  KF_ASSIGN_OR_RETURN(auto files, render_bench_files(report, request.lang));
  Json answer = {{"report", report}, {"files", Json::object()}};
  for (const auto& [name, content] : files) {
    if (name != "bench.json") answer["files"][name] = content;
  }
  if (!request.out_dir.empty()) {
    KF_RETURN_IF_ERROR(write_bench_files(files, request.out_dir));
    answer["out_dir"] = std::filesystem::absolute(request.out_dir).string();
  }
  return answer;
}

Json bench_request_schema(bool allow_local_paths) {
  // A list of names, or one comma-separated string (anyOf, not a multi-type "type": strict
  // MCP clients reject ["array", "string"]).
  const Json names_schema = {
      {"anyOf", Json::array({Json{{"type", "array"}, {"items", {{"type", "string"}}}},
                             Json{{"type", "string"}}})}};
  auto list_of_names = [&names_schema](const char* description) {
    Json schema = names_schema;
    schema["description"] = description;
    return schema;
  };
  Json props = {
      {"ops", list_of_names("Ops of the kernel library to benchmark, in order (e.g. "
                            "[\"softmax\", \"layer_norm\"] or \"softmax,layer_norm\"): add, "
                            "softmax, gelu, layer_norm, mha")},
      {"sizes", list_of_names("Any of small, medium, large (default all three)")},
      {"size_preset",
       {{"type", "string"},
        {"enum", {"default", "seed"}},
        {"description",
         "Which sizes small/medium/large are: default = the device's (interpreter-sized "
         "16x64, 32x128, 64x256 on cpu; 256x256, 1024x1024, 4096x4096 on a GPU), seed = "
         "256x256, 1024x1024, 4096x4096 on any device (slow in the cpu interpreter)"}}},
      {"runs",
       {{"type", "integer"},
        {"minimum", 1},
        {"maximum", 1000},
        {"description", "Timed runs per kernel and size (default 10)"}}},
      {"device", {{"type", "string"}, {"description", "cpu or cuda:N (default: the first GPU)"}}},
      {"dtype",
       {{"type", "string"},
        {"enum", {"float32", "float16", "bfloat16"}},
        {"description", "Input dtype (default: each op's, float16 for mha, float32 otherwise)"}}},
      {"log_lang",
       {{"type", "string"},
        {"enum", {"en", "ko"}},
        {"description", "Language of the logs' headings (default en)"}}},
      {"kernels",
       {{"type", "object"},
        {"description",
         "Your own versions as Python sources, {op: {\"v1_baseline\": source, ...}} (each "
         "defines the op's triton_<op> wrapper); a version left out is reported as not "
         "provided"},
        {"additionalProperties",
         {{"type", "object"}, {"additionalProperties", {{"type", "string"}}}}}}},
      {"retries",
       {{"type", "object"},
        {"description", "Regenerations per version, for the logs: {op: {version: count}}"},
        {"additionalProperties",
         {{"type", "object"}, {"additionalProperties", {{"type", "integer"}, {"minimum", 0}}}}}}},
      {"correct_trials", {{"type", "integer"}, {"minimum", 1}, {"maximum", 100}}},
      {"job_timeout_s", {{"type", "number"}, {"minimum", 1}, {"maximum", 3600}}},
      {"peaks",
       {{"type", "boolean"},
        {"description",
         "Measure copy bandwidth / matmul FLOP/s for Phase 4 (default "
         "true)"}}},
      {"torch_compile",
       {{"type", "boolean"},
        {"description",
         "Time the torch.compile baseline too (default true; "
         "compiling takes long on the cpu device)"}}}};
  if (allow_local_paths) {
    props["kernels_dir"] = {{"type", "string"},
                            {"description",
                             "A directory laid out like kernels/: <dir>/<op>/v1_baseline.py .. "
                             "v4_optimized.py (optional manifest.json, retries.json)"}};
    props["out_dir"] = {{"type", "string"},
                        {"description", "Also write the logs, charts and bench.json here"}};
  }
  return Json{{"type", "object"},
              {"properties", props},
              {"required", {"ops"}},
              {"additionalProperties", false}};
}

}  // namespace kforge::bench
