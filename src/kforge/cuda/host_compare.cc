#include "kforge/cuda/host_compare.h"

#include <cmath>
#include <cstdio>
#include <limits>

namespace kforge::cuda {

Tolerance resolve_tolerance(model::DType dtype, std::optional<double> atol,
                            std::optional<double> rtol) {
  if (dtype == model::DType::kBool) return {0.0, 0.0};
  double def = 0.0;
  switch (dtype) {
    case model::DType::kFloat16:
    case model::DType::kBFloat16:
    case model::DType::kFloat32:
      def = 1e-2;  // the kernel evaluation server's and KernelBench's default
      break;
    case model::DType::kFloat64:
      def = 1e-6;
      break;
    default:
      def = 0.0;
  }
  return {atol.value_or(def), rtol.value_or(def)};
}

std::string format_number(double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.6g", v);
  return buf;
}

std::string TensorComparison::describe() const {
  if (passed) {
    return "output '" + name + "': all " + std::to_string(numel) + " elements match";
  }
  std::string text = "output '" + name + "': " + std::to_string(mismatch_count) + " of " +
                     std::to_string(numel) + " elements differ (max abs error " +
                     format_number(max_abs_error) + ", max rel error " +
                     format_number(max_rel_error);
  if (first_mismatch) {
    text += "; first at " + Json(first_mismatch->index).dump() + ": expected " +
            format_number(first_mismatch->expected) + ", got " +
            format_number(first_mismatch->actual);
  }
  return text + "; atol=" + format_number(tolerance.atol) +
         ", rtol=" + format_number(tolerance.rtol) + ")";
}

TensorComparison compare_host_tensors(const std::string& name, const HostTensor& expected,
                                      const HostTensor& actual, Tolerance tolerance) {
  TensorComparison c;
  c.name = name;
  c.tolerance = tolerance;
  c.numel = expected.numel();
  const bool exact_ints =
      !model::is_floating(expected.dtype) && tolerance.atol == 0.0 && tolerance.rtol == 0.0;
  bool non_finite_mismatch = false;
  int64_t first = -1;
  for (int64_t i = 0; i < c.numel; ++i) {
    bool close = false;
    if (exact_ints) {
      close = expected.get_int(i) == actual.get_int(i);
      double diff = std::fabs(static_cast<double>(expected.get_int(i) - actual.get_int(i)));
      c.max_abs_error = std::max(c.max_abs_error, diff);
      if (expected.get_int(i) != 0) {
        c.max_rel_error =
            std::max(c.max_rel_error, diff / std::fabs(static_cast<double>(expected.get_int(i))));
      }
    } else {
      const double a = actual.get(i);
      const double b = expected.get(i);
      if (std::isfinite(a) && std::isfinite(b)) {
        const double diff = std::fabs(a - b);
        close = diff <= tolerance.atol + tolerance.rtol * std::fabs(b);
        c.max_abs_error = std::max(c.max_abs_error, diff);
        if (b != 0) c.max_rel_error = std::max(c.max_rel_error, diff / std::fabs(b));
      } else {
        close = (a == b) || (std::isnan(a) && std::isnan(b));
        if (!close) non_finite_mismatch = true;
      }
    }
    if (!close) {
      ++c.mismatch_count;
      if (first < 0) first = i;
    }
  }
  c.passed = c.mismatch_count == 0;
  if (non_finite_mismatch) {
    c.max_abs_error = c.max_rel_error = std::numeric_limits<double>::infinity();
  }
  if (first >= 0) {
    c.first_mismatch = ElementMismatch{unravel_index(first, expected.shape), expected.get(first),
                                       actual.get(first)};
  }
  return c;
}

bool same_bits(const HostTensor& a, const HostTensor& b) {
  return a.dtype == b.dtype && a.shape == b.shape && a.bytes == b.bytes;
}

}  // namespace kforge::cuda
