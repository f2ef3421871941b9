// Value types describing a kernel and its inputs (the IOContract). No I/O here.
//
// Wire names follow the kernel-evaluation-server contract (docs/compatibility.md §1): KernelCode,
// IOContract, ArgSpec, TensorSpec. Parsing and validation live in parse.h; conversion
// back to JSON (for the worker and for storage) in serialize.h.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kforge/common/json.h"

namespace kforge::model {

enum class KernelType { kTorch, kTorchCuda, kTriton, kCuda, kMultiKernel };
enum class DType { kFloat16, kBFloat16, kFloat32, kFloat64, kInt8, kInt16, kInt32, kInt64, kBool };
enum class ArgType { kTensor, kInt, kFloat, kStr, kBool };
enum class ArgRole { kInput, kOutput, kInout };
enum class InitKind { kRandn, kUniform, kZeros, kOnes, kFull, kArange };
enum class Compression { kNone, kZlib };

std::string_view to_string(KernelType t);
std::string_view to_string(DType t);
std::string_view to_string(ArgType t);
std::string_view to_string(ArgRole r);
std::string_view to_string(InitKind k);
std::string_view to_string(Compression c);

std::optional<KernelType> kernel_type_from(std::string_view s);
std::optional<DType> dtype_from(std::string_view s);
std::optional<ArgType> arg_type_from(std::string_view s);
std::optional<ArgRole> arg_role_from(std::string_view s);
std::optional<InitKind> init_kind_from(std::string_view s);
std::optional<Compression> compression_from(std::string_view s);

// Every name each vocabulary accepts, in the order the enum declares them: what schemas,
// enums of the MCP tools and /health list (tests/protocol/vocabulary.json holds the same
// lists; the protocol vector tests of both languages check theirs against it).
std::vector<std::string_view> kernel_type_names();
std::vector<std::string_view> dtype_names();
std::vector<std::string_view> arg_type_names();
std::vector<std::string_view> arg_role_names();
std::vector<std::string_view> init_kind_names();

// Bytes per element.
size_t dtype_size(DType t);
bool is_floating(DType t);

struct InitSpec {
  InitKind kind = InitKind::kRandn;
  std::optional<int64_t> seed;  // mixed with the server's secret seed, never used alone
  double mean = 0.0;
  double std = 1.0;
  double low = 0.0;
  double high = 1.0;
  double fill_value = 0.0;
  double start = 0.0;
  double step = 1.0;
};

// Literal tensor contents (base64, optionally zlib-compressed, little-endian).
struct TensorData {
  std::string data_b64;  // as sent: what serialize.h writes back
  DType dtype = DType::kFloat32;
  std::vector<int64_t> shape;
  Compression compress = Compression::kNone;
  // The contents decoded (and inflated): shape x dtype bytes, little-endian. The parser
  // decodes `data_b64` once to check it and, where the tensors are built from it
  // (parse.h InlineData::kKeep: the native worker's job spec, cuda/host_inputs.h), keeps
  // the bytes here, so nothing decodes it a second time; null elsewhere (the server).
  // Shared: copies of a request do not copy the data.
  std::shared_ptr<const std::string> bytes;
};

struct TensorSpec {
  std::vector<int64_t> shape;
  DType dtype = DType::kFloat32;
  std::optional<InitSpec> init;  // exclusive with data; neither means randn
  std::optional<TensorData> data;

  int64_t numel() const;
  int64_t nbytes() const { return numel() * static_cast<int64_t>(dtype_size(dtype)); }
};

struct ArgSpec {
  std::string name;
  ArgType type = ArgType::kTensor;
  Json value;  // scalar value for non-tensor args (null when absent)
  std::optional<TensorSpec> tensor_spec;
  ArgRole role = ArgRole::kInput;
  bool is_meta = false;  // Triton constexpr: passed as keyword, never a tensor
};

struct Dim3 {
  int64_t x = 1;
  int64_t y = 1;
  int64_t z = 1;
};

struct LaunchConfig {
  std::optional<Dim3> grid;
  std::optional<Dim3> block;                // CUDA only
  std::optional<int64_t> shared_mem_bytes;  // CUDA dynamic shared memory
  std::optional<int> num_warps;             // Triton only
  std::optional<int> num_stages;            // Triton only
};

struct IOContract {
  std::vector<ArgSpec> args;
  std::optional<LaunchConfig> launch;

  // Tensor arguments the kernel reads (role input or inout, not meta), in declared order.
  std::vector<const ArgSpec*> input_tensors() const;
  // Tensor arguments the kernel writes (role output or inout), in declared order.
  std::vector<const ArgSpec*> output_tensors() const;
};

struct KernelCode {
  std::string source_code;
  KernelType kernel_type = KernelType::kTorch;
  std::optional<IOContract> io;
  Json metadata = Json::object();  // entry_point, kernel_name, ... (free-form superset)

  // metadata.entry_point, else metadata.kernel_name, else empty.
  std::string entry_point() const;
};

}  // namespace kforge::model
