#include "kforge/cuda/host_tensor.h"

#include <bit>
#include <cmath>
#include <cstring>
#include <limits>

namespace kforge::cuda {
namespace {

template <typename T>
T load(const std::vector<std::byte>& b, int64_t i) {
  T v;
  std::memcpy(&v, b.data() + static_cast<size_t>(i) * sizeof(T), sizeof(T));
  return v;
}

template <typename T>
void store(std::vector<std::byte>& b, int64_t i, T v) {
  std::memcpy(b.data() + static_cast<size_t>(i) * sizeof(T), &v, sizeof(T));
}

// double -> integer the way torch's .to(int) does for in-range values (truncation);
// out-of-range values saturate instead of being undefined behaviour.
template <typename T>
T to_int(double v) {
  if (std::isnan(v)) return 0;
  if (v <= static_cast<double>(std::numeric_limits<T>::min())) {
    return std::numeric_limits<T>::min();
  }
  if (v >= static_cast<double>(std::numeric_limits<T>::max())) {
    return std::numeric_limits<T>::max();
  }
  return static_cast<T>(v);
}

}  // namespace

uint16_t float_to_half(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t abs = x & 0x7FFFFFFFu;
  if (abs > 0x7F800000u) return static_cast<uint16_t>(sign | 0x7E00u);   // NaN
  if (abs >= 0x477FF000u) return static_cast<uint16_t>(sign | 0x7C00u);  // overflow -> inf
  if (abs < 0x38800000u) {  // subnormal half (or zero): round abs * 2^24 to an integer
    float scaled = std::bit_cast<float>(abs) * 16777216.0f;
    return static_cast<uint16_t>(sign | static_cast<uint32_t>(std::nearbyint(scaled)));
  }
  uint32_t mant_round = abs + 0x0FFFu + ((abs >> 13) & 1u);  // round to nearest even
  return static_cast<uint16_t>(sign | ((mant_round - 0x38000000u) >> 13));
}

float half_to_float(uint16_t h) {
  uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1Fu;
  uint32_t mant = h & 0x3FFu;
  if (exp == 0) {
    float v = static_cast<float>(mant) / 16777216.0f;  // mant * 2^-24
    return sign != 0 ? -v : v;
  }
  if (exp == 31) return std::bit_cast<float>(sign | 0x7F800000u | (mant << 13));
  return std::bit_cast<float>(sign | ((exp + 112) << 23) | (mant << 13));
}

uint16_t float_to_bfloat16(float f) {
  uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);
  x += 0x7FFFu + ((x >> 16) & 1u);
  return static_cast<uint16_t>(x >> 16);
}

float bfloat16_to_float(uint16_t b) {
  return std::bit_cast<float>(static_cast<uint32_t>(b) << 16);
}

HostTensor HostTensor::zeros(model::DType dtype, std::vector<int64_t> shape) {
  HostTensor t;
  t.dtype = dtype;
  t.shape = std::move(shape);
  t.bytes.assign(static_cast<size_t>(t.numel()) * t.element_size(), std::byte{0});
  return t;
}

int64_t HostTensor::numel() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

double HostTensor::get(int64_t i) const {
  switch (dtype) {
    case model::DType::kFloat16:
      return static_cast<double>(half_to_float(load<uint16_t>(bytes, i)));
    case model::DType::kBFloat16:
      return static_cast<double>(bfloat16_to_float(load<uint16_t>(bytes, i)));
    case model::DType::kFloat32:
      return static_cast<double>(load<float>(bytes, i));
    case model::DType::kFloat64:
      return load<double>(bytes, i);
    default:
      return static_cast<double>(get_int(i));
  }
}

void HostTensor::set(int64_t i, double v) {
  switch (dtype) {
    case model::DType::kFloat16:
      return store(bytes, i, float_to_half(static_cast<float>(v)));
    case model::DType::kBFloat16:
      return store(bytes, i, float_to_bfloat16(static_cast<float>(v)));
    case model::DType::kFloat32:
      return store(bytes, i, static_cast<float>(v));
    case model::DType::kFloat64:
      return store(bytes, i, v);
    case model::DType::kBool:
      return store(bytes, i, static_cast<uint8_t>(v != 0 ? 1 : 0));
    case model::DType::kInt8:
      return store(bytes, i, to_int<int8_t>(v));
    case model::DType::kInt16:
      return store(bytes, i, to_int<int16_t>(v));
    case model::DType::kInt32:
      return store(bytes, i, to_int<int32_t>(v));
    case model::DType::kInt64:
      return store(bytes, i, to_int<int64_t>(v));
  }
}

int64_t HostTensor::get_int(int64_t i) const {
  switch (dtype) {
    case model::DType::kBool:
      return load<uint8_t>(bytes, i);
    case model::DType::kInt8:
      return load<int8_t>(bytes, i);
    case model::DType::kInt16:
      return load<int16_t>(bytes, i);
    case model::DType::kInt32:
      return load<int32_t>(bytes, i);
    case model::DType::kInt64:
      return load<int64_t>(bytes, i);
    default:
      return static_cast<int64_t>(get(i));
  }
}

void HostTensor::set_int(int64_t i, int64_t v) {
  switch (dtype) {
    case model::DType::kBool:
      return store(bytes, i, static_cast<uint8_t>(v));
    case model::DType::kInt8:
      return store(bytes, i, static_cast<int8_t>(v));
    case model::DType::kInt16:
      return store(bytes, i, static_cast<int16_t>(v));
    case model::DType::kInt32:
      return store(bytes, i, static_cast<int32_t>(v));
    case model::DType::kInt64:
      return store(bytes, i, v);
    default:
      return set(i, static_cast<double>(v));
  }
}

void fill_poison(HostTensor& t, int variant) {
  const int64_t n = t.numel();
  if (t.dtype == model::DType::kBool) {
    for (int64_t i = 0; i < n; ++i)
      t.set_int(i, variant == 0 ? 1 : 0);
  } else if (model::is_floating(t.dtype)) {
    const double v = variant == 0 ? std::numeric_limits<double>::quiet_NaN() : -8573.0;
    for (int64_t i = 0; i < n; ++i)
      t.set(i, v);
  } else {
    std::memset(t.bytes.data(), variant == 0 ? 0x5A : 0x25, t.bytes.size());
  }
}

bool is_poison(const HostTensor& t, int64_t i, int variant) {
  if (t.dtype == model::DType::kBool) return t.get_int(i) == (variant == 0 ? 1 : 0);
  if (model::is_floating(t.dtype)) {
    const double v = t.get(i);
    if (variant == 0) return std::isnan(v);
    // -8573.0 as the dtype stores it (float16 and bfloat16 round it).
    HostTensor stored = HostTensor::zeros(t.dtype, {1});
    stored.set(0, -8573.0);
    return v == stored.get(0);
  }
  const size_t size = t.element_size();
  const std::byte pattern{static_cast<unsigned char>(variant == 0 ? 0x5A : 0x25)};
  for (size_t b = 0; b < size; ++b) {
    if (t.bytes[static_cast<size_t>(i) * size + b] != pattern) return false;
  }
  return true;
}

HostTensor poison_against(const HostTensor& expected) {
  HostTensor out = expected;
  const int64_t n = expected.numel();
  if (model::is_floating(expected.dtype)) {
    for (int64_t i = 0; i < n; ++i) {
      out.set(i, std::isnan(expected.get(i)) ? 0.0 : std::numeric_limits<double>::quiet_NaN());
    }
  } else if (expected.dtype == model::DType::kBool) {
    for (int64_t i = 0; i < n; ++i)
      out.set_int(i, expected.get_int(i) != 0 ? 0 : 1);
  } else {
    for (auto& b : out.bytes)
      b = ~b;
  }
  return out;
}

std::vector<int64_t> unravel_index(int64_t flat, const std::vector<int64_t>& shape) {
  std::vector<int64_t> index(shape.size(), 0);
  for (size_t k = shape.size(); k-- > 0;) {
    if (shape[k] == 0) continue;
    index[k] = flat % shape[k];
    flat /= shape[k];
  }
  return index;
}

}  // namespace kforge::cuda
