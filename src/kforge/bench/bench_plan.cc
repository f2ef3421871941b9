#include "kforge/bench/bench_plan.h"

#include <algorithm>
#include <set>

#include "kforge/bench/bench_jobs.h"
#include "kforge/common/files.h"

namespace kforge::bench {
namespace {

template <typename T>
bool contains(const T& range, std::string_view value) {
  return std::find(range.begin(), range.end(), value) != range.end();
}

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const auto& s : items)
    out += (out.empty() ? "" : ", ") + s;
  return out;
}

// The device to run on: the requested one if the service has it, else its first GPU, else cpu.
StatusOr<std::pair<std::string, Json>> pick_device(const std::string& requested,
                                                   const Json& health) {
  std::vector<std::string> names;
  std::map<std::string, Json> facts;  // an object per device, empty when health has none
  for (const auto& d : health.value("devices", Json::array())) {
    const std::string name = d.is_object() ? d.value("name", "") : "";
    if (name.empty()) continue;
    names.push_back(name);
    const Json f = d.value("facts", Json::object());
    facts[name] = f.is_object() ? f : Json::object();
  }
  auto facts_of = [&facts](const std::string& name) {
    auto it = facts.find(name);
    return it == facts.end() ? Json::object() : it->second;
  };
  if (!requested.empty()) {
    if (!names.empty() && !contains(names, requested)) {
      return invalid_argument(
          "unknown device '" + requested + "' (this kforge has: " + join(names) + ")", "device");
    }
    return std::pair{requested, facts_of(requested)};
  }
  for (const auto& name : names) {
    if (facts_of(name).value("kind", "") == "gpu") return std::pair{name, facts_of(name)};
  }
  const std::string name = contains(names, "cpu") || names.empty() ? "cpu" : names.front();
  return std::pair{name, facts_of(name)};
}

// <dir>/retries.json: {"v2_tiling": 1, ...}; absent is fine, malformed is an error.
Status read_retries(const std::filesystem::path& op_dir, std::map<std::string, int>& retries) {
  const auto path = op_dir / "retries.json";
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return Status::ok();
  KF_ASSIGN_OR_RETURN(std::string text, read_file(path));
  auto j = parse_json(text);
  if (!j.is_ok() || !j->is_object()) {
    return invalid_argument(path.string() + ": must be a JSON object {version: count}");
  }
  for (const auto& [name, count] : j->items()) {
    if (!is_version_name(name) || !count.is_number_integer() || count.get<int>() < 0) {
      return invalid_argument(path.string() + ": '" + name +
                              "' must be a version name with a non-negative integer count");
    }
    retries[name] = count.get<int>();
  }
  return Status::ok();
}

StatusOr<OpPlan> plan_op(const BenchOptions& o, const std::string& op) {
  OpPlan p;
  const auto library_dir = o.library / op;
  const auto own_dir = o.kernels_dir.empty() ? std::filesystem::path() : o.kernels_dir / op;
  std::error_code ec;
  if (!own_dir.empty() && !std::filesystem::is_directory(own_dir, ec)) {
    return invalid_argument("--kernels: " + own_dir.string() + " is not a directory (expected " +
                                "<dir>/<op>/v1_baseline.py .. v4_optimized.py)",
                            "kernels_dir");
  }
  const bool own_manifest =
      !own_dir.empty() && std::filesystem::is_regular_file(own_dir / "manifest.json", ec);
  if (!own_manifest && !std::filesystem::is_regular_file(library_dir / "manifest.json", ec)) {
    return invalid_argument("unknown op '" + op + "' (the kernel library " + o.library.string() +
                                " has: " + join(library_ops(o.library)) + ")",
                            "ops");
  }
  KF_ASSIGN_OR_RETURN(p.manifest, load_manifest(own_manifest ? own_dir : library_dir));
  p.manifest_path = (own_manifest ? own_dir : library_dir) / "manifest.json";
  p.dtype = o.dtype.empty() ? p.manifest.default_dtype : o.dtype;
  if (!contains(p.manifest.dtypes, p.dtype)) {
    return invalid_argument(
        "op '" + op + "' supports " + join(p.manifest.dtypes) + ", not " + p.dtype, "dtype");
  }
  if (auto it = o.inline_kernels.find(op); it != o.inline_kernels.end()) {
    p.kernels_origin = "inline";
    for (std::string_view name : kVersionNames) {
      auto src = it->second.find(std::string(name));
      if (src == it->second.end()) {
        KernelVersion v;
        v.name = std::string(name);
        v.origin = "inline";
        v.load_error = "not provided";
        p.versions.push_back(std::move(v));
      } else {
        p.versions.push_back(version_from_source(std::string(name), src->second, "inline"));
      }
    }
    p.tests.note = "versions given as sources: no op directory to hold tests/";
  } else if (!own_dir.empty()) {
    p.kernels_origin = o.kernels_dir.string();
    p.versions = load_versions(own_dir);
    KF_RETURN_IF_ERROR(read_retries(own_dir, p.retries));
    p.tests = ensure_op_tests(o.library, own_dir, p.manifest_path);
  } else {
    p.kernels_origin = "library";
    p.versions = load_versions(library_dir);
    p.tests = find_op_tests(library_dir);
  }
  if (auto it = o.retries.find(op); it != o.retries.end()) {
    for (const auto& [version, count] : it->second)
      p.retries[version] = count;
  }
  return p;
}

std::string label_of(const std::string& op, const std::string& what, const std::string& size) {
  return op + " " + what + (size.empty() ? "" : " " + size);
}

}  // namespace

bool is_version_name(std::string_view name) {
  return contains(kVersionNames, name);
}

Status validate_options(const BenchOptions& o) {
  if (o.ops.empty()) return invalid_argument("name at least one op", "ops");
  std::set<std::string> seen;
  for (size_t i = 0; i < o.ops.size(); ++i) {
    const std::string field = "ops[" + std::to_string(i) + "]";
    if (!is_op_name(o.ops[i])) {
      return invalid_argument("'" + o.ops[i] + "' is not an op name ([a-z][a-z0-9_]*)", field);
    }
    if (!seen.insert(o.ops[i]).second) return invalid_argument("'" + o.ops[i] + "' twice", field);
  }
  if (o.sizes.empty()) return invalid_argument("name at least one size", "sizes");
  if (!contains(kSizePresets, o.size_preset)) {
    return invalid_argument("'" + o.size_preset + "' is not default or seed", "size_preset");
  }
  seen.clear();
  for (size_t i = 0; i < o.sizes.size(); ++i) {
    const std::string field = "sizes[" + std::to_string(i) + "]";
    if (!contains(kSizeNames, o.sizes[i])) {
      return invalid_argument("'" + o.sizes[i] + "' is not small, medium or large", field);
    }
    if (!seen.insert(o.sizes[i]).second) {
      return invalid_argument("'" + o.sizes[i] + "' twice", field);
    }
  }
  if (o.runs < 1 || o.runs > 1000) return invalid_argument("must be 1 to 1000", "runs");
  if (o.correct_trials < 1 || o.correct_trials > 100) {
    return invalid_argument("must be 1 to 100", "correct_trials");
  }
  if (!(o.job_timeout_s >= 1 && o.job_timeout_s <= 3600)) {
    return invalid_argument("must be 1 to 3600 seconds", "job_timeout_s");
  }
  if (!o.dtype.empty() && !contains(kBenchDTypes, o.dtype)) {
    return invalid_argument("'" + o.dtype + "' is not float32, float16 or bfloat16", "dtype");
  }
  if (o.library.empty()) return invalid_argument("the kernel library is not set", "library");
  if (!o.kernels_dir.empty() && !o.inline_kernels.empty()) {
    return invalid_argument("give kernels as a directory or as sources, not both", "kernels");
  }
  for (const auto& [op, versions] : o.inline_kernels) {
    if (!contains(o.ops, op)) {
      return invalid_argument("op '" + op + "' is not in ops", "kernels." + op);
    }
    for (const auto& [name, source] : versions) {
      if (!is_version_name(name)) {
        std::string field = "kernels." + op;
        field.append(".").append(name);
        return invalid_argument(
            "'" + name + "' is not v1_baseline, v2_tiling, v3_coalesced or v4_optimized",
            std::move(field));
      }
    }
  }
  return Status::ok();
}

StatusOr<BenchPlan> plan_bench(const BenchOptions& o, const Json& health) {
  KF_RETURN_IF_ERROR(validate_options(o));
  BenchPlan plan;
  plan.options = o;
  KF_ASSIGN_OR_RETURN(auto device, pick_device(o.device, health));
  plan.device = device.first;
  plan.device_facts = device.second;
  plan.interpreter = plan.device == "cpu";
  plan.profile = plan.interpreter && o.size_preset == "default" ? "cpu" : "gpu";

  JobSettings& settings = plan.settings;
  settings.device = plan.device;
  settings.interpreter = plan.interpreter;
  settings.runs = o.runs;
  settings.correct_trials = o.correct_trials;
  settings.timeout_s = o.job_timeout_s;
  if (plan.interpreter) {
    auto compat = read_file(o.library / "interpreter_compat.py");
    if (compat.is_ok()) settings.interpreter_compat = std::move(compat).value();
  }
  for (const auto& op : o.ops) {
    KF_ASSIGN_OR_RETURN(OpPlan p, plan_op(o, op));
    plan.ops.push_back(std::move(p));
  }

  const std::string& profile = plan.profile;
  if (o.peaks && contains(o.sizes, "large")) {
    bool copy = false;
    std::set<std::string> matmul_dtypes;
    for (const auto& p : plan.ops) {
      if (p.manifest.compute_bound()) {
        matmul_dtypes.insert(p.dtype);
      } else {
        copy = true;
      }
    }
    if (copy) {
      KF_ASSIGN_OR_RETURN(BenchJobSpec spec, copy_peak_job(settings));
      PlannedJob j;
      j.role = JobRole::kCopyPeak;
      j.bytes = spec.bytes;
      j.label = "peak: copy";
      j.dtype = "float32";
      j.request = std::move(spec.request);
      plan.jobs.push_back(std::move(j));
    }
    for (const auto& dtype : matmul_dtypes) {
      KF_ASSIGN_OR_RETURN(BenchJobSpec spec, matmul_peak_job(dtype, settings));
      PlannedJob j;
      j.role = JobRole::kMatmulPeak;
      j.flops = spec.flops;
      j.dtype = dtype;
      j.label = "peak: matmul " + dtype;
      j.request = std::move(spec.request);
      plan.jobs.push_back(std::move(j));
    }
  }
  for (int i = 0; i < static_cast<int>(plan.ops.size()); ++i) {
    const OpPlan& p = plan.ops[i];
    const OpManifest& m = p.manifest;
    auto add = [&](JobRole role, const std::string& what, const std::string& version,
                   const std::string& size, model::JobRequest request) {
      PlannedJob j;
      j.role = role;
      j.op = i;
      j.version = version;
      j.size = size;
      j.dtype = p.dtype;
      j.label = label_of(m.op, what, size);
      j.request = std::move(request);
      plan.jobs.push_back(std::move(j));
    };
    for (const auto& v : p.versions) {
      KF_ASSIGN_OR_RETURN(auto jobs, version_jobs(plan, i, v));
      for (auto& j : jobs)
        plan.jobs.push_back(std::move(j));
    }
    for (const auto& size : o.sizes) {
      KF_ASSIGN_OR_RETURN(auto r,
                          eager_request(m, m.sizes.at(profile).at(size), p.dtype, settings));
      add(JobRole::kTorch, "torch", "", size, std::move(r));
    }
    if (!o.torch_compile) continue;
    for (const auto& size : o.sizes) {
      KF_ASSIGN_OR_RETURN(auto r,
                          compile_request(m, m.sizes.at(profile).at(size), p.dtype, settings));
      add(JobRole::kTorchCompile, "torch.compile", "", size, std::move(r));
    }
  }
  return plan;
}

StatusOr<std::vector<PlannedJob>> version_jobs(const BenchPlan& plan, int op,
                                               const KernelVersion& v) {
  std::vector<PlannedJob> jobs;
  if (v.source.empty()) return jobs;  // reported from its load_error
  const OpPlan& p = plan.ops.at(op);
  const OpManifest& m = p.manifest;
  for (const auto& size : plan.options.sizes) {
    PlannedJob j;
    j.role = JobRole::kVersion;
    j.op = op;
    j.version = v.name;
    j.size = size;
    j.dtype = p.dtype;
    j.label = label_of(m.op, v.name, size);
    KF_ASSIGN_OR_RETURN(j.request, version_request(m, m.sizes.at(plan.profile).at(size), p.dtype, v,
                                                   plan.settings));
    jobs.push_back(std::move(j));
  }
  return jobs;
}

}  // namespace kforge::bench
