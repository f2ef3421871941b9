#include "kforge/workbench/guidance.h"

#include <fmt/format.h>

#include <cmath>

namespace kforge::workbench {
namespace {

constexpr const char* kLevers =
    R"(General levers, one per version so the log shows what each bought:
- BLOCK_SIZE: a power of two (tl.arange needs one); 1024-4096 elements per program for
  elementwise ops, the whole row (triton.next_power_of_2(n_cols)) for row reductions up to
  ~32K, 64-128 tiles for matmul. Too small starves the memory system, too large spills.
- Coalescing: consecutive lanes should read consecutive addresses (offsets = pid * BLOCK +
  tl.arange(0, BLOCK) on the contiguous dimension); pass strides and index rows by stride.
- Masking: every load/store past the end needs mask= (and other= for loads feeding a max or
  sum: other=-float('inf') for max, 0.0 for sum).
- num_warps / num_stages: 4 warps for small blocks, 8-16 for blocks >= 4096 elements or big
  tiles; num_stages 2-4 pipelines loads in loops (matmul, attention).
- @triton.autotune over configs, keyed on the size arguments:
    @triton.autotune(configs=[triton.Config({"BLOCK_SIZE": b}, num_warps=w)
                              for b in (1024, 2048, 4096) for w in (4, 8)], key=["n_elements"])
    @triton.jit
    def kernel(x_ptr, out_ptr, n_elements, BLOCK_SIZE: tl.constexpr): ...
  (the launch then omits BLOCK_SIZE; use grid = lambda meta: (triton.cdiv(n, meta["BLOCK_SIZE"]),).
  On the cpu device the interpreter cannot autotune: keep one config there.))";

std::string op_plan(const Json& op, int version) {
  const Json techniques = op.value("optimizations", Json::array());
  std::string out = fmt::format("This op is {}-bound: {}\n", op.value("bound", "?"),
                                op.value("bound_reason", ""));
  if (version == 1) {
    out +=
        "v1 is the baseline: get it correct first (masks, dtype of the output, the exact "
        "math of the reference), no tuning.\n";
  }
  if (techniques.empty()) return out;
  // v2 takes the first technique, v3 the second, ... and later versions combine them.
  const size_t index = version >= 2 ? static_cast<size_t>(version - 2) : 0;
  if (version >= 2 && index < techniques.size()) {
    const Json& t = techniques[index];
    out += fmt::format("Suggested for v{}: {} — {}\n", version, t.value("name", ""),
                       t.value("description", ""));
  } else if (version >= 2) {
    out += fmt::format("Suggested for v{}: combine what worked so far and autotune it.\n", version);
  }
  if (version == 1 || index + 1 < techniques.size()) {
    const Json& t = techniques[version == 1 ? 0 : index + 1];
    out += fmt::format("Next version could try: {} — {}\n", t.value("name", ""),
                       t.value("description", ""));
  }
  return out;
}

// What the previous version's benchmark showed.
std::string last_benchmark(const Session& s, int version) {
  for (auto it = s.versions.rbegin(); it != s.versions.rend(); ++it) {
    if (it->number >= version || !it->results.contains("benchmark")) continue;
    const Json& b = it->results["benchmark"];
    std::string out = fmt::format("Last benchmark (v{}):", it->number);
    if (b.contains("speedup_geomean") && b["speedup_geomean"].is_number()) {
      out += fmt::format(" {:.3g}x vs torch (geometric mean over sizes)",
                         b["speedup_geomean"].get<double>());
    }
    if (b.contains("advice") && b["advice"].is_string()) {
      out += ". " + b["advice"].get<std::string>();
    }
    return out + "\n";
  }
  return "";
}

}  // namespace

std::string write_guidance(const Knowledge& knowledge, const Session& s, int version) {
  std::string out;
  if (const Json* op = knowledge.op(s.kernel_name); op != nullptr) {
    out += op_plan(*op, version);
  } else {
    out += fmt::format(
        "'{}' is not an op of get_torch_op_info, so no op-specific plan; the "
        "closest template (get_kernel_template) shows a tested structure.\n",
        s.kernel_name);
  }
  out += last_benchmark(s, version);
  out += kLevers;
  return out;
}

std::string benchmark_advice(const Json* op, const std::vector<CaseOutcome>& cases) {
  double log_sum = 0;
  int n = 0;
  double worst_pct = -1;
  double best_pct = -1;
  bool cpu = false;
  for (const auto& c : cases) {
    cpu = cpu || c.device == "cpu";
    if (c.speedup && *c.speedup > 0) {
      log_sum += std::log(*c.speedup);
      ++n;
    }
    const char* key = op != nullptr && op->value("bound", "") == "compute"
                          ? "pct_of_peak_flops"
                          : "pct_of_peak_bandwidth";
    if (c.roofline.is_object() && c.roofline.contains(key)) {
      const double p = c.roofline[key].get<double>();
      worst_pct = worst_pct < 0 ? p : std::min(worst_pct, p);
      best_pct = std::max(best_pct, p);
    }
  }
  if (cpu) {
    return "These are CPU timings of the Triton interpreter: they check that timing works and "
           "rank nothing; benchmark on a GPU device for real numbers.";
  }
  std::string out;
  if (n > 0) {
    const double geo = std::exp(log_sum / n);
    out += geo >= 1.0 ? fmt::format("The kernel is {:.3g}x faster than torch overall. ", geo)
                      : fmt::format("torch is {:.3g}x faster than the kernel overall. ", 1.0 / geo);
  }
  if (op != nullptr && worst_pct >= 0) {
    const bool memory = op->value("bound", "") != "compute";
    out += fmt::format("It reaches {:.0f}-{:.0f} % of the device's measured peak {}. ", worst_pct,
                       best_pct, memory ? "bandwidth" : "FLOP/s");
    if (worst_pct < 50) {
      out += memory ? "Far from the memory roofline: check coalescing (contiguous offsets "
                      "along the fastest dimension), make each program move more data (larger "
                      "BLOCK_SIZE, several rows per program), and read each input once."
                    : "Far from the compute roofline: use tl.dot on tiles of at least 64x64 "
                      "with fp32 accumulation, pipeline loads (num_stages 3-4) and group "
                      "programs for L2 reuse.";
    } else if (worst_pct < 80) {
      out +=
          "Close: the small sizes are usually launch-bound (fewer, bigger programs or "
          "autotuning per size help).";
    } else {
      out += "Near the roofline: little is left beyond autotuning.";
    }
  } else if (op != nullptr) {
    out +=
        "The device's peaks are not measured, so % of peak is unknown; compare the achieved "
        "GB/s or TFLOP/s between versions instead.";
  }
  return out;
}

}  // namespace kforge::workbench
