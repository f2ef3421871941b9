#include "kforge/jobs/roofline.h"

namespace kforge::jobs {
namespace {

std::optional<double> metadata_number(const model::KernelCode* k, const char* key) {
  if (k == nullptr || !k->metadata.is_object()) return std::nullopt;
  auto it = k->metadata.find(key);
  if (it == k->metadata.end() || !it->is_number()) return std::nullopt;
  return it->get<double>();
}

std::string peak_dtype_of(model::DType t) {
  switch (t) {
    case model::DType::kFloat16:
      return "fp16";
    case model::DType::kBFloat16:
      return "bf16";
    case model::DType::kFloat32:
      return "fp32";
    default:
      return "";
  }
}

Json number_or_null(std::optional<double> v) {
  return v ? Json(*v) : Json(nullptr);
}

}  // namespace

KernelWork work_of(const model::KernelCode& kernel, const model::KernelCode* other,
                   const Json& reported_inputs) {
  KernelWork w;
  if (auto b = metadata_number(&kernel, "bytes_moved")) {
    w.bytes = b;
  } else if (auto ob = metadata_number(other, "bytes_moved")) {
    w.bytes = ob;
  }
  if (w.bytes) w.bytes_source = "metadata.bytes_moved";
  if (auto f = metadata_number(&kernel, "flops")) {
    w.flops = f;
  } else if (auto of = metadata_number(other, "flops")) {
    w.flops = of;
  }
  if (w.flops) w.flops_source = "metadata.flops";
  for (const model::KernelCode* k : {&kernel, other}) {
    if (k == nullptr || !k->metadata.is_object()) continue;
    auto it = k->metadata.find("flops_dtype");
    if (it != k->metadata.end() && it->is_string()) {
      w.flops_dtype = it->get<std::string>();
      break;
    }
  }

  double io_bytes = 0;
  std::string first_dtype;
  if (kernel.io && !kernel.io->args.empty()) {
    for (const auto& a : kernel.io->args) {
      if (a.type != model::ArgType::kTensor || !a.tensor_spec) continue;
      const double n = static_cast<double>(a.tensor_spec->nbytes());
      io_bytes += a.role == model::ArgRole::kInout ? 2 * n : n;
      if (first_dtype.empty()) first_dtype = peak_dtype_of(a.tensor_spec->dtype);
    }
    if (!w.bytes) {
      w.bytes = io_bytes;
      w.bytes_source = "io_contract_lower_bound";
    }
  } else if (reported_inputs.is_array()) {
    double bytes = 0;
    bool any = false;
    for (const auto& in : reported_inputs) {
      if (!in.is_object() || !in.contains("shape") || !in.contains("dtype") ||
          !in["dtype"].is_string()) {
        continue;
      }
      const auto dtype = model::dtype_from(in["dtype"].get<std::string>());
      if (!dtype || !in["shape"].is_array()) continue;
      double numel = 1;
      for (const auto& d : in["shape"])
        numel *= d.is_number() ? d.get<double>() : 0.0;
      bytes += numel * static_cast<double>(model::dtype_size(*dtype));
      any = true;
      if (first_dtype.empty()) first_dtype = peak_dtype_of(*dtype);
    }
    if (!w.bytes && any) {
      w.bytes = bytes;
      w.bytes_source = "inputs_lower_bound";
    }
  }
  if (w.flops_dtype.empty()) w.flops_dtype = first_dtype;
  return w;
}

Json roofline_not_measured(const std::string& reason) {
  return Json{{"measured", false}, {"reason", reason}};
}

Json roofline(const KernelWork& work, std::optional<double> time_ms, const Json& peaks) {
  if (!time_ms || *time_ms <= 0) return roofline_not_measured("the kernel was not timed");
  if (!peaks.is_object() || !peaks.contains("bandwidth_gb_s")) {
    return roofline_not_measured("the device's peaks are not measured");
  }
  const double seconds = *time_ms * 1e-3;
  std::optional<double> gb_s;
  std::optional<double> tflop_s;
  if (work.bytes) gb_s = *work.bytes / seconds / 1e9;
  if (work.flops) tflop_s = *work.flops / seconds / 1e12;
  const double peak_gb_s = peaks.value("bandwidth_gb_s", 0.0);
  std::optional<double> peak_tflop_s;
  const Json flop_s = peaks.value("flop_s", Json::object());
  if (!work.flops_dtype.empty() && flop_s.is_object() && flop_s.contains(work.flops_dtype) &&
      flop_s[work.flops_dtype].is_number()) {
    peak_tflop_s = flop_s[work.flops_dtype].get<double>() / 1e12;
  }
  std::optional<double> pct_bw;
  std::optional<double> pct_flops;
  if (gb_s && peak_gb_s > 0) pct_bw = 100.0 * *gb_s / peak_gb_s;
  if (tflop_s && peak_tflop_s && *peak_tflop_s > 0) pct_flops = 100.0 * *tflop_s / *peak_tflop_s;
  return Json{
      {"measured", true},
      {"time_ms", *time_ms},
      {"bytes_moved", number_or_null(work.bytes)},
      {"bytes_source", work.bytes ? Json(work.bytes_source) : Json(nullptr)},
      {"flops", number_or_null(work.flops)},
      {"flops_source", work.flops ? Json(work.flops_source) : Json(nullptr)},
      {"achieved_gb_s", number_or_null(gb_s)},
      {"achieved_tflop_s", number_or_null(tflop_s)},
      {"peak_gb_s", peak_gb_s},
      {"peak_tflop_s", number_or_null(peak_tflop_s)},
      {"peak_flops_dtype", work.flops_dtype.empty() ? Json(nullptr) : Json(work.flops_dtype)},
      {"pct_of_peak_bandwidth", number_or_null(pct_bw)},
      {"pct_of_peak_flops", number_or_null(pct_flops)}};
}

}  // namespace kforge::jobs
