#include "kforge/model/kernel_spec.h"

#include <array>
#include <utility>
#include <vector>

namespace kforge::model {
namespace {

template <typename E, size_t N>
std::optional<E> lookup(const std::array<std::pair<std::string_view, E>, N>& table,
                        std::string_view s) {
  for (const auto& [name, value] : table) {
    if (name == s) return value;
  }
  return std::nullopt;
}

template <typename E, size_t N>
std::vector<std::string_view> names_in(const std::array<std::pair<std::string_view, E>, N>& table) {
  std::vector<std::string_view> out;
  out.reserve(N);
  for (const auto& entry : table)
    out.push_back(entry.first);
  return out;
}

template <typename E, size_t N>
std::string_view name_of(const std::array<std::pair<std::string_view, E>, N>& table, E e) {
  for (const auto& [name, value] : table) {
    if (value == e) return name;
  }
  return "unknown";
}

constexpr std::array<std::pair<std::string_view, KernelType>, 5> kKernelTypes{{
    {"torch", KernelType::kTorch},
    {"torch_cuda", KernelType::kTorchCuda},
    {"triton", KernelType::kTriton},
    {"cuda", KernelType::kCuda},
    {"multi_kernel", KernelType::kMultiKernel},
}};

constexpr std::array<std::pair<std::string_view, DType>, 9> kDTypes{{
    {"float16", DType::kFloat16},
    {"bfloat16", DType::kBFloat16},
    {"float32", DType::kFloat32},
    {"float64", DType::kFloat64},
    {"int8", DType::kInt8},
    {"int16", DType::kInt16},
    {"int32", DType::kInt32},
    {"int64", DType::kInt64},
    {"bool", DType::kBool},
}};

constexpr std::array<std::pair<std::string_view, ArgType>, 5> kArgTypes{{
    {"tensor", ArgType::kTensor},
    {"int", ArgType::kInt},
    {"float", ArgType::kFloat},
    {"str", ArgType::kStr},
    {"bool", ArgType::kBool},
}};

constexpr std::array<std::pair<std::string_view, ArgRole>, 3> kRoles{{
    {"input", ArgRole::kInput},
    {"output", ArgRole::kOutput},
    {"inout", ArgRole::kInout},
}};

constexpr std::array<std::pair<std::string_view, InitKind>, 6> kInitKinds{{
    {"randn", InitKind::kRandn},
    {"uniform", InitKind::kUniform},
    {"zeros", InitKind::kZeros},
    {"ones", InitKind::kOnes},
    {"full", InitKind::kFull},
    {"arange", InitKind::kArange},
}};

constexpr std::array<std::pair<std::string_view, Compression>, 2> kCompressions{{
    {"none", Compression::kNone},
    {"zlib", Compression::kZlib},
}};

}  // namespace

std::string_view to_string(KernelType t) {
  return name_of(kKernelTypes, t);
}
std::string_view to_string(DType t) {
  return name_of(kDTypes, t);
}
std::string_view to_string(ArgType t) {
  return name_of(kArgTypes, t);
}
std::string_view to_string(ArgRole r) {
  return name_of(kRoles, r);
}
std::string_view to_string(InitKind k) {
  return name_of(kInitKinds, k);
}
std::string_view to_string(Compression c) {
  return name_of(kCompressions, c);
}

std::optional<KernelType> kernel_type_from(std::string_view s) {
  return lookup(kKernelTypes, s);
}
std::optional<DType> dtype_from(std::string_view s) {
  // Accept the torch spellings ("torch.float32") and common aliases too.
  if (s.starts_with("torch.")) s.remove_prefix(6);
  if (s == "half" || s == "fp16") return DType::kFloat16;
  if (s == "bf16") return DType::kBFloat16;
  if (s == "float" || s == "fp32") return DType::kFloat32;
  if (s == "double" || s == "fp64") return DType::kFloat64;
  if (s == "long") return DType::kInt64;
  if (s == "int") return DType::kInt32;
  return lookup(kDTypes, s);
}
std::optional<ArgType> arg_type_from(std::string_view s) {
  return lookup(kArgTypes, s);
}
std::optional<ArgRole> arg_role_from(std::string_view s) {
  return lookup(kRoles, s);
}
std::optional<InitKind> init_kind_from(std::string_view s) {
  return lookup(kInitKinds, s);
}
std::optional<Compression> compression_from(std::string_view s) {
  return lookup(kCompressions, s);
}

std::vector<std::string_view> kernel_type_names() {
  return names_in(kKernelTypes);
}
std::vector<std::string_view> dtype_names() {
  return names_in(kDTypes);
}
std::vector<std::string_view> arg_type_names() {
  return names_in(kArgTypes);
}
std::vector<std::string_view> arg_role_names() {
  return names_in(kRoles);
}
std::vector<std::string_view> init_kind_names() {
  return names_in(kInitKinds);
}

size_t dtype_size(DType t) {
  switch (t) {
    case DType::kFloat16:
    case DType::kBFloat16:
    case DType::kInt16:
      return 2;
    case DType::kFloat32:
    case DType::kInt32:
      return 4;
    case DType::kFloat64:
    case DType::kInt64:
      return 8;
    case DType::kInt8:
    case DType::kBool:
      return 1;
  }
  return 1;
}

bool is_floating(DType t) {
  return t == DType::kFloat16 || t == DType::kBFloat16 || t == DType::kFloat32 ||
         t == DType::kFloat64;
}

int64_t TensorSpec::numel() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

std::vector<const ArgSpec*> IOContract::input_tensors() const {
  std::vector<const ArgSpec*> out;
  for (const auto& a : args) {
    if (a.type == ArgType::kTensor && !a.is_meta &&
        (a.role == ArgRole::kInput || a.role == ArgRole::kInout)) {
      out.push_back(&a);
    }
  }
  return out;
}

std::vector<const ArgSpec*> IOContract::output_tensors() const {
  std::vector<const ArgSpec*> out;
  for (const auto& a : args) {
    if (a.type == ArgType::kTensor && (a.role == ArgRole::kOutput || a.role == ArgRole::kInout)) {
      out.push_back(&a);
    }
  }
  return out;
}

std::string KernelCode::entry_point() const {
  for (const char* key : {"entry_point", "kernel_name"}) {
    auto it = metadata.find(key);
    if (it != metadata.end() && it->is_string() && !it->get<std::string>().empty()) {
      return it->get<std::string>();
    }
  }
  return {};
}

}  // namespace kforge::model
