#include "kforge/bench/bench_jobs.h"

#include "kforge/model/parse.h"

namespace kforge::bench {
namespace {

constexpr const char* kEntryPoint = "kforge_entry";

std::string joined_names(const OpManifest& m, bool tensors_only) {
  std::string out;
  for (const auto& a : m.args) {
    if (tensors_only && !a.is_tensor()) continue;
    if (!out.empty()) out += ", ";
    out += a.name;
  }
  return out;
}

Json timing_json(const JobSettings& s) {
  // Exactly `runs` timed trials (the skill's "N runs"), each with the engine's protocol.
  return Json{{"min_trials", s.runs}, {"max_trials", s.runs}, {"budget_ms", 3600000.0}};
}

Json common_fields(const JobSettings& s) {
  return Json{{"num_correct_trials", s.correct_trials},
              {"timeout", s.timeout_s},
              {"device", s.device},
              {"timing", timing_json(s)}};
}

Json torch_kernel(std::string source, const std::string& name, Json io = nullptr) {
  Json k = {{"source_code", std::move(source)},
            {"kernel_type", "torch"},
            {"metadata", Json{{"kernel_name", name}}}};
  if (!io.is_null()) k["io"] = std::move(io);
  return k;
}

StatusOr<model::JobRequest> parse_evaluate(const Json& body) {
  return model::parse_evaluate_request(body, model::RequestLimits{});
}

StatusOr<model::JobRequest> parse_compare(const Json& body) {
  return model::parse_compare_request(body, model::RequestLimits{});
}

Json tolerance_fields(const OpManifest& m, const std::string& dtype, Json body) {
  auto it = m.tolerance.find(dtype);
  if (it != m.tolerance.end()) {
    body["atol"] = it->second.atol;
    body["rtol"] = it->second.rtol;
  }
  return body;
}

// A torch module for a probe: forward(<tensors>) returns `expression`.
std::string probe_source(const std::string& doc, const std::string& params,
                         const std::string& expression) {
  return "\"\"\"kforge bench: " + doc +
         "\"\"\"\n\nimport torch\n\n\nclass Model(torch.nn.Module):\n" + "    def forward(self, " +
         params + "):\n        return " + expression + "\n";
}

Json tensor_arg(const std::string& name, const std::vector<int64_t>& shape,
                const std::string& dtype) {
  return Json{
      {"name", name},
      {"type", "tensor"},
      {"tensor_spec", Json{{"shape", shape}, {"dtype", dtype}, {"init", {{"kind", "randn"}}}}}};
}

}  // namespace

std::string python_literal(const Json& value) {
  if (value.is_boolean()) return value.get<bool>() ? "True" : "False";
  if (value.is_null()) return "None";
  return value.dump();  // numbers and strings: JSON's spelling is valid Python
}

std::string torch_reference_source(const OpManifest& m, bool with_compiled) {
  const std::string tensors = joined_names(m, true);
  std::string src = "\"\"\"kforge bench: torch reference of " + m.op + " (" + m.title +
                    "), from kernels/" + m.op + "/manifest.json.\"\"\"\n\n" +
                    "import torch\nimport torch.nn.functional as F\n\n\n" + "def reference(" +
                    tensors + "):\n";
  for (const auto& a : m.args) {
    if (!a.is_tensor()) src += "    " + a.name + " = " + python_literal(a.value) + "\n";
  }
  src += "    return " + m.reference + "\n\n\n";
  src += "class Model(torch.nn.Module):\n    def forward(self, " + tensors +
         "):\n        return reference(" + tensors + ")\n";
  if (with_compiled) {
    // A jailed job runs as a uid without a passwd entry: inductor names its default cache
    // directory after getpass.getuser(), which then raises, so the baseline names both.
    src +=
        "\n\ndef _inductor_env():\n"
        "    \"\"\"Lets torch.compile run as a uid without a passwd entry (a jailed job).\"\"\"\n"
        "    import getpass\n    import os\n    import tempfile\n\n"
        "    try:\n        getpass.getuser()\n    except (KeyError, OSError):\n"
        "        os.environ[\"USER\"] = \"kforge-job\"\n"
        "    home = os.environ.get(\"HOME\") or tempfile.gettempdir()\n"
        "    os.environ.setdefault(\"TORCHINDUCTOR_CACHE_DIR\", "
        "os.path.join(home, \".cache\", \"torchinductor\"))\n"
        "\n\nclass ModelNew(torch.nn.Module):\n"
        "    \"\"\"torch.compile(reference): the torch.compile baseline.\"\"\"\n\n"
        "    def __init__(self):\n        super().__init__()\n        _inductor_env()\n"
        "        self.compiled = torch.compile(reference)\n\n"
        "    def forward(self, " +
        tensors + "):\n        return self.compiled(" + tensors + ")\n";
  }
  return src;
}

// The version's source, then kforge's additions, each after a `# ---- kforge ... ----` line:
// the worker runs what follows the first of them as kforge's code, not as lines of the version's
// file (python/kforge_worker/candidate/loaders.py).
std::string candidate_source(const OpManifest& m, const KernelVersion& v, const JobSettings& s) {
  std::string src = v.source;
  if (!src.empty() && src.back() != '\n') src += '\n';
  if (s.interpreter && !s.interpreter_compat.empty()) {
    src += "\n\n# ---- kforge bench: kernels/interpreter_compat.py (cpu device) ----\n";
    src += s.interpreter_compat;
    if (src.back() != '\n') src += '\n';
  }
  src += "\n\n# ---- kforge bench: entry point, from kernels/" + m.op +
         "/manifest.json \"call\" ----\ndef " + kEntryPoint + "(" + joined_names(m, false) +
         "):\n    return " + m.call + "\n";
  return src;
}

Json io_contract_json(const OpManifest& m, const SizeSpec& size, const std::string& dtype,
                      bool with_scalars) {
  Json args = Json::array();
  for (const auto& a : m.args) {
    if (a.is_tensor()) {
      Json arg = tensor_arg(a.name, size.shapes.at(a.name), dtype);
      arg["tensor_spec"]["init"] = a.init;
      args.push_back(std::move(arg));
    } else if (with_scalars) {
      args.push_back(Json{{"name", a.name}, {"type", a.type}, {"value", a.value}});
    }
  }
  return Json{{"args", std::move(args)}};
}

StatusOr<model::JobRequest> version_request(const OpManifest& m, const SizeSpec& size,
                                            const std::string& dtype, const KernelVersion& v,
                                            const JobSettings& s) {
  Json body = common_fields(s);
  body["ref_kernel"] = torch_kernel(torch_reference_source(m, false), m.op + "_torch");
  body["custom_kernel"] =
      Json{{"source_code", candidate_source(m, v, s)},
           {"kernel_type", "multi_kernel"},
           {"io", io_contract_json(m, size, dtype, true)},
           {"metadata", Json{{"entry_point", kEntryPoint}, {"kernel_name", m.op + "_" + v.name}}}};
  return parse_compare(tolerance_fields(m, dtype, std::move(body)));
}

StatusOr<model::JobRequest> eager_request(const OpManifest& m, const SizeSpec& size,
                                          const std::string& dtype, const JobSettings& s) {
  Json body = common_fields(s);
  body["kernel"] = torch_kernel(torch_reference_source(m, false), m.op + "_torch",
                                io_contract_json(m, size, dtype, false));
  return parse_evaluate(tolerance_fields(m, dtype, std::move(body)));
}

StatusOr<model::JobRequest> compile_request(const OpManifest& m, const SizeSpec& size,
                                            const std::string& dtype, const JobSettings& s) {
  const std::string source = torch_reference_source(m, true);
  Json body = common_fields(s);
  body["ref_kernel"] = torch_kernel(source, m.op + "_torch");
  body["custom_kernel"] =
      torch_kernel(source, m.op + "_torch_compile", io_contract_json(m, size, dtype, false));
  return parse_compare(tolerance_fields(m, dtype, std::move(body)));
}

StatusOr<BenchJobSpec> copy_peak_job(const JobSettings& s) {
  const int64_t n = s.interpreter ? (int64_t{16} << 20) : (int64_t{256} << 20);  // float32
  Json body = common_fields(s);
  body["kernel"] = torch_kernel(
      probe_source("device-to-device copy (the measured bandwidth peak)", "x", "x.clone()"),
      "peak_copy", Json{{"args", Json::array({tensor_arg("x", {n}, "float32")})}});
  BenchJobSpec job;
  KF_ASSIGN_OR_RETURN(job.request, parse_evaluate(body));
  job.bytes = 2 * n * 4;
  return job;
}

StatusOr<BenchJobSpec> matmul_peak_job(const std::string& dtype, const JobSettings& s) {
  const int64_t n = s.interpreter ? 512 : 8192;
  Json body = common_fields(s);
  body["kernel"] = torch_kernel(
      probe_source("matmul (the measured FLOP/s peak)", "a, b", "torch.matmul(a, b)"),
      "peak_matmul",
      Json{
          {"args", Json::array({tensor_arg("a", {n, n}, dtype), tensor_arg("b", {n, n}, dtype)})}});
  // Sums of n products: compare the two runs of each trial loosely (they are the same call).
  body["atol"] = 1e-2;
  body["rtol"] = 1e-2;
  BenchJobSpec job;
  KF_ASSIGN_OR_RETURN(job.request, parse_evaluate(body));
  job.flops = 2 * n * n * n;
  return job;
}

}  // namespace kforge::bench
