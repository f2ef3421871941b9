#include "kforge/cuda/kernel_args.h"

#include <cstring>
#include <limits>

namespace kforge::cuda {
namespace {

template <typename T>
void put(std::array<std::byte, 8>& slot, T value) {
  static_assert(sizeof(T) <= 8);
  std::memcpy(slot.data(), &value, sizeof(T));
}

std::string where(const model::ArgSpec& arg, size_t param) {
  return "argument '" + arg.name + "' (kernel parameter " + std::to_string(param) + ")";
}

Status marshal_int(const model::ArgSpec& arg, size_t param, std::optional<size_t> size,
                   std::array<std::byte, 8>& slot, MarshalledArg& out) {
  int64_t v = arg.value.get<int64_t>();
  size_t bytes = size.value_or(4);
  auto fits = [&](int64_t lo, int64_t hi) { return v >= lo && v <= hi; };
  switch (bytes) {
    case 1:
      if (!fits(INT8_MIN, UINT8_MAX)) break;
      put(slot, static_cast<int8_t>(v));
      out.c_type = "char";
      return Status::ok();
    case 2:
      if (!fits(INT16_MIN, UINT16_MAX)) break;
      put(slot, static_cast<int16_t>(v));
      out.c_type = "short";
      return Status::ok();
    case 4:
      if (!fits(INT32_MIN, UINT32_MAX)) break;
      put(slot, static_cast<int32_t>(v));
      out.c_type = "int";
      return Status::ok();
    case 8:
      put(slot, v);
      out.c_type = "long long";
      return Status::ok();
    default:
      return invalid_argument(where(arg, param) + ": the kernel's parameter has " +
                              std::to_string(bytes) + " bytes, which no int type has");
  }
  return invalid_argument(where(arg, param) + ": " + std::to_string(v) + " does not fit the " +
                          std::to_string(bytes) +
                          "-byte integer parameter (declare it long long in the kernel)");
}

}  // namespace

std::string_view c_pointer_type(model::DType dtype) {
  switch (dtype) {
    case model::DType::kFloat16:
      return "__half*";
    case model::DType::kBFloat16:
      return "__nv_bfloat16*";
    case model::DType::kFloat32:
      return "float*";
    case model::DType::kFloat64:
      return "double*";
    case model::DType::kInt8:
      return "signed char*";
    case model::DType::kInt16:
      return "short*";
    case model::DType::kInt32:
      return "int*";
    case model::DType::kInt64:
      return "long long*";
    case model::DType::kBool:
      return "bool*";
  }
  return "void*";
}

StatusOr<KernelArgs> marshal_kernel_args(const model::IOContract& io,
                                         std::span<const uint64_t> tensor_ptrs,
                                         const ParamSizes& param_sizes) {
  std::vector<const model::ArgSpec*> params;
  size_t tensors = 0;
  for (const auto& arg : io.args) {
    if (arg.is_meta) continue;
    params.push_back(&arg);
    if (arg.type == model::ArgType::kTensor) ++tensors;
  }
  if (tensors != tensor_ptrs.size()) {
    return internal_error("marshal_kernel_args: " + std::to_string(tensor_ptrs.size()) +
                          " device pointers for " + std::to_string(tensors) + " tensor arguments");
  }
  if (param_sizes && param_sizes->size() != params.size()) {
    std::string names;
    for (const auto* p : params)
      names += (names.empty() ? "" : ", ") + p->name;
    return invalid_argument("the kernel takes " + std::to_string(param_sizes->size()) +
                                " parameter(s) but io.args declares " +
                                std::to_string(params.size()) + " non-meta argument(s) (" + names +
                                "); they must match one to one, in order",
                            "io.args");
  }
  KernelArgs out;
  out.storage_.resize(params.size());
  out.described_.resize(params.size());
  size_t next_tensor = 0;
  for (size_t i = 0; i < params.size(); ++i) {
    const model::ArgSpec& arg = *params[i];
    std::optional<size_t> size;
    if (param_sizes) size = (*param_sizes)[i];
    MarshalledArg& d = out.described_[i];
    d.name = arg.name;
    auto& slot = out.storage_[i];
    slot.fill(std::byte{0});
    switch (arg.type) {
      case model::ArgType::kTensor:
        if (size && *size != 8) {
          return invalid_argument(where(arg, i) + " is a tensor, but the kernel's parameter has " +
                                  std::to_string(*size) + " bytes (expected a pointer, " +
                                  std::string(c_pointer_type(arg.tensor_spec->dtype)) + ")");
        }
        put(slot, tensor_ptrs[next_tensor++]);
        d.c_type = std::string(c_pointer_type(arg.tensor_spec->dtype));
        d.size = 8;
        break;
      case model::ArgType::kInt:
        KF_RETURN_IF_ERROR(marshal_int(arg, i, size, slot, d));
        d.size = size.value_or(4);
        break;
      case model::ArgType::kFloat: {
        double v = arg.value.get<double>();
        if (size.value_or(4) == 8) {
          put(slot, v);
          d.c_type = "double";
          d.size = 8;
        } else if (size.value_or(4) == 4) {
          put(slot, static_cast<float>(v));
          d.c_type = "float";
          d.size = 4;
        } else {
          return invalid_argument(where(arg, i) + " is a float, but the kernel's parameter has " +
                                  std::to_string(*size) + " bytes (expected float or double)");
        }
        break;
      }
      case model::ArgType::kBool: {
        bool v = arg.value.get<bool>();
        size_t bytes = size.value_or(1);
        if (bytes != 1 && bytes != 4) {
          return invalid_argument(where(arg, i) + " is a bool, but the kernel's parameter has " +
                                  std::to_string(bytes) + " bytes");
        }
        if (bytes == 1) {
          put(slot, static_cast<uint8_t>(v ? 1 : 0));
          d.c_type = "bool";
        } else {
          put(slot, static_cast<int32_t>(v ? 1 : 0));
          d.c_type = "int";
        }
        d.size = bytes;
        break;
      }
      case model::ArgType::kStr:
        return invalid_argument(where(arg, i) + ": a cuda kernel cannot take a 'str' argument");
    }
  }
  out.pointers_.reserve(params.size());
  for (auto& slot : out.storage_)
    out.pointers_.push_back(slot.data());
  return out;
}

StatusOr<LaunchDims> launch_dims(const model::IOContract& io) {
  if (!io.launch || !io.launch->grid || !io.launch->block) {
    return invalid_argument("io.launch.grid and io.launch.block are required for a cuda kernel",
                            "io.launch");
  }
  LaunchDims d;
  const model::Dim3& g = *io.launch->grid;
  const model::Dim3& b = *io.launch->block;
  auto dim = [](int64_t v) { return static_cast<unsigned>(v); };  // parse.cc bounds them
  d.grid = {dim(g.x), dim(g.y), dim(g.z)};
  d.block = {dim(b.x), dim(b.y), dim(b.z)};
  d.shared_mem_bytes = static_cast<unsigned>(io.launch->shared_mem_bytes.value_or(0));
  if (g.y > 65535 || g.z > 65535) {
    return invalid_argument("grid.y and grid.z must be at most 65535", "io.launch.grid");
  }
  if (b.z > 64) return invalid_argument("block.z must be at most 64", "io.launch.block");
  return d;
}

std::vector<std::string> meta_defines(const model::IOContract& io) {
  std::vector<std::string> out;
  for (const auto& arg : io.args) {
    if (!arg.is_meta) continue;
    std::string value;
    if (arg.value.is_boolean()) {
      value = arg.value.get<bool>() ? "1" : "0";
    } else if (arg.value.is_string()) {
      value = arg.value.get<std::string>();
    } else {
      value = arg.value.dump();
    }
    out.push_back("-D" + arg.name + "=" + value);
  }
  return out;
}

Status launch_with_contract(KernelLauncher& launcher, const model::IOContract& io,
                            std::span<const uint64_t> tensor_ptrs, const ParamSizes& param_sizes,
                            CUstream stream) {
  KF_ASSIGN_OR_RETURN(LaunchDims dims, launch_dims(io));
  KF_ASSIGN_OR_RETURN(KernelArgs args, marshal_kernel_args(io, tensor_ptrs, param_sizes));
  return launcher.launch(dims, args.params(), stream);
}

}  // namespace kforge::cuda
