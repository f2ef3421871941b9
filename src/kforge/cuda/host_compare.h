// Output comparison on the host, with the Python worker's rules (check/compare.py):
// an element passes when |actual - expected| <= atol + rtol * |expected| (both finite), or
// both are NaN, or both are the same infinity; NaN is never a wildcard. Integer and bool
// outputs are exact unless the request overrides the tolerance (bool: always exact).
// Default tolerances: float16/bfloat16/float32 1e-2 (as the kernel evaluation server and
// KernelBench), float64 1e-6, integers 0.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kforge/common/json.h"
#include "kforge/cuda/host_tensor.h"

namespace kforge::cuda {

struct Tolerance {
  double atol = 0;
  double rtol = 0;
};

Tolerance resolve_tolerance(model::DType dtype, std::optional<double> atol,
                            std::optional<double> rtol);

struct ElementMismatch {
  std::vector<int64_t> index;
  double expected = 0;
  double actual = 0;
};

struct TensorComparison {
  std::string name;
  bool passed = false;
  Tolerance tolerance;
  int64_t numel = 0;
  int64_t mismatch_count = 0;
  double max_abs_error = 0;  // +inf when a mismatch involves NaN or an infinity
  double max_rel_error = 0;  // over elements whose expected value is non-zero
  std::optional<ElementMismatch> first_mismatch;

  // One actionable sentence for validation_error.
  std::string describe() const;
};

// `expected` and `actual` must have the same dtype and shape (the harness allocated both).
TensorComparison compare_host_tensors(const std::string& name, const HostTensor& expected,
                                      const HostTensor& actual, Tolerance tolerance);

// Bitwise equality (to detect mutated inputs).
bool same_bits(const HostTensor& a, const HostTensor& b);

// "1.5", "nan", "inf" formatting used in messages (%.6g).
std::string format_number(double v);

}  // namespace kforge::cuda
