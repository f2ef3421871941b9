// Tensor contents on the host: little-endian bytes of a dtype, with element access as
// double, conversions for float16/bfloat16 (round to nearest even) and the poison values
// output buffers are filled with before a kernel runs (same values as the Python worker).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "kforge/model/kernel_spec.h"

namespace kforge::cuda {

struct HostTensor {
  model::DType dtype = model::DType::kFloat32;
  std::vector<int64_t> shape;
  std::vector<std::byte> bytes;

  static HostTensor zeros(model::DType dtype, std::vector<int64_t> shape);
  int64_t numel() const;
  size_t element_size() const { return model::dtype_size(dtype); }

  // Element i as a double (bool as 0/1); set() converts (rounding for float16/bfloat16,
  // truncation toward zero for integers, non-zero for bool).
  double get(int64_t i) const;
  void set(int64_t i, double value);
  // Raw integer value of element i (integer and bool dtypes).
  int64_t get_int(int64_t i) const;
  void set_int(int64_t i, int64_t value);
};

uint16_t float_to_half(float f);
float half_to_float(uint16_t h);
uint16_t float_to_bfloat16(float f);
float bfloat16_to_float(uint16_t b);

// Poison variant 0 or 1 (floats: NaN / -8573.0; integers: the byte patterns 0x5A / 0x25
// in every byte; bool: true / false). The two variants differ in every element, so an
// element that holds its variant's poison after two runs was never written.
void fill_poison(HostTensor& t, int variant);
bool is_poison(const HostTensor& t, int64_t i, int variant);

// A buffer that differs from `expected` at every element: NaN where a finite value (or an
// infinity) is expected, 0 where NaN is; bitwise NOT for integers and bool.
HostTensor poison_against(const HostTensor& expected);

// Row-major multi-index of flat element `flat`.
std::vector<int64_t> unravel_index(int64_t flat, const std::vector<int64_t>& shape);

}  // namespace kforge::cuda
