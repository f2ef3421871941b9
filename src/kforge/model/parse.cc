#include "kforge/model/parse.h"

#include <zlib.h>

#include <cmath>
#include <limits>
#include <set>

#include "kforge/common/base64.h"
#include "kforge/model/cuda_kernel_names.h"
#include "kforge/model/cuda_options.h"

namespace kforge::model {
namespace {

Status field_error(const JsonPath& path, std::string message) {
  return invalid_argument(std::move(message), path.display());
}

Status expect_object(const Json& j, const JsonPath& path) {
  if (!j.is_object()) {
    return field_error(path, "must be an object, got " + std::string(json_type_name(j)));
  }
  return Status::ok();
}

// Returns the member or nullptr when absent or null (null means "not given").
const Json* member(const Json& obj, std::string_view key) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

StatusOr<std::string> read_string(const Json& obj, std::string_view key, const JsonPath& path,
                                  bool required) {
  const Json* v = member(obj, key);
  if (v == nullptr) {
    if (required) return field_error(path.key(key), "is required");
    return std::string();
  }
  if (!v->is_string()) {
    return field_error(path.key(key), "must be a string, got " + std::string(json_type_name(*v)));
  }
  return v->get<std::string>();
}

StatusOr<std::optional<double>> read_number(const Json& obj, std::string_view key,
                                            const JsonPath& path, double min, double max) {
  const Json* v = member(obj, key);
  if (v == nullptr) return std::optional<double>();
  if (!v->is_number()) {
    return field_error(path.key(key), "must be a number, got " + std::string(json_type_name(*v)));
  }
  double d = v->get<double>();
  if (!std::isfinite(d) || d < min || d > max) {
    return field_error(path.key(key), "must be between " + Json(min).dump() + " and " +
                                          Json(max).dump() + ", got " + v->dump());
  }
  return std::optional<double>(d);
}

StatusOr<std::optional<int64_t>> read_int(const Json& obj, std::string_view key,
                                          const JsonPath& path, int64_t min, int64_t max) {
  const Json* v = member(obj, key);
  if (v == nullptr) return std::optional<int64_t>();
  int64_t value = 0;
  if (v->is_number_integer()) {
    if (v->is_number_unsigned() && v->get<uint64_t>() > static_cast<uint64_t>(max)) {
      return field_error(path.key(key), "must be at most " + std::to_string(max));
    }
    value = v->get<int64_t>();
  } else if (v->is_number_float() && std::floor(v->get<double>()) == v->get<double>() &&
             std::fabs(v->get<double>()) < 9e15) {
    value = static_cast<int64_t>(v->get<double>());  // 5.0 is accepted as 5
  } else {
    return field_error(path.key(key), "must be an integer, got " + std::string(json_type_name(*v)));
  }
  if (value < min || value > max) {
    return field_error(path.key(key), "must be between " + std::to_string(min) + " and " +
                                          std::to_string(max) + ", got " + std::to_string(value));
  }
  return std::optional<int64_t>(value);
}

// A non-negative integer of up to 64 bits (the full range of uint64_t); never wraps: -1 or
// 2^64 is an error naming the field.
StatusOr<std::optional<uint64_t>> read_uint64(const Json& obj, std::string_view key,
                                              const JsonPath& path) {
  const Json* v = member(obj, key);
  if (v == nullptr) return std::optional<uint64_t>();
  const std::string range =
      "must be an integer between 0 and " + std::to_string(std::numeric_limits<uint64_t>::max());
  if (v->is_number_unsigned()) return std::optional<uint64_t>(v->get<uint64_t>());
  if (v->is_number_integer()) {
    const int64_t i = v->get<int64_t>();
    if (i < 0) return field_error(path.key(key), range + ", got " + std::to_string(i));
    return std::optional<uint64_t>(static_cast<uint64_t>(i));
  }
  return field_error(
      path.key(key),
      range + ", got " + (v->is_number() ? v->dump() : std::string(json_type_name(*v))));
}

// A JSON integer that fits int64_t (a number_unsigned above INT64_MAX does not).
bool fits_int64(const Json& v) {
  return v.is_number_integer() &&
         (!v.is_number_unsigned() ||
          v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()));
}

StatusOr<std::optional<bool>> read_bool(const Json& obj, std::string_view key,
                                        const JsonPath& path) {
  const Json* v = member(obj, key);
  if (v == nullptr) return std::optional<bool>();
  if (!v->is_boolean()) {
    return field_error(path.key(key), "must be a boolean, got " + std::string(json_type_name(*v)));
  }
  return std::optional<bool>(v->get<bool>());
}

StatusOr<std::vector<int64_t>> read_shape(const Json& obj, std::string_view key,
                                          const JsonPath& path, const RequestLimits& limits) {
  const Json* v = member(obj, key);
  JsonPath p = path.key(key);
  if (v == nullptr) return field_error(p, "is required");
  if (!v->is_array()) return field_error(p, "must be a list of non-negative integers");
  if (v->size() > static_cast<size_t>(limits.max_tensor_rank)) {
    return field_error(p, "rank " + std::to_string(v->size()) + " exceeds the limit of " +
                              std::to_string(limits.max_tensor_rank));
  }
  std::vector<int64_t> shape;
  for (const auto& d : *v) {
    // fits_int64 first: 2^63 and above would read as negative through get<int64_t>.
    if (!fits_int64(d) || d.get<int64_t>() < 0) {
      return field_error(p, "must be a list of non-negative integers");
    }
    shape.push_back(d.get<int64_t>());
  }
  return shape;
}

template <typename E>
StatusOr<E> read_enum(const Json& obj, std::string_view key, const JsonPath& path, E fallback,
                      std::optional<E> (*from)(std::string_view), std::string_view allowed) {
  KF_ASSIGN_OR_RETURN(std::string s, read_string(obj, key, path, false));
  if (s.empty()) return fallback;
  auto e = from(s);
  if (!e) {
    return field_error(path.key(key),
                       "unknown value '" + s + "' (expected one of: " + std::string(allowed) + ")");
  }
  return *e;
}

constexpr std::string_view kDTypeNames =
    "float16, bfloat16, float32, float64, int8, int16, int32, int64, bool";

StatusOr<InitSpec> parse_init(const Json& j, const JsonPath& path) {
  KF_RETURN_IF_ERROR(expect_object(j, path));
  InitSpec init;
  KF_ASSIGN_OR_RETURN(init.kind,
                      read_enum<InitKind>(j, "kind", path, InitKind::kRandn, init_kind_from,
                                          "randn, uniform, zeros, ones, full, arange"));
  constexpr double kBig = 1e300;
  KF_ASSIGN_OR_RETURN(auto seed, read_int(j, "seed", path, std::numeric_limits<int64_t>::min(),
                                          std::numeric_limits<int64_t>::max()));
  init.seed = seed;
  KF_ASSIGN_OR_RETURN(auto mean, read_number(j, "mean", path, -kBig, kBig));
  KF_ASSIGN_OR_RETURN(auto stdv, read_number(j, "std", path, 0.0, kBig));
  KF_ASSIGN_OR_RETURN(auto low, read_number(j, "low", path, -kBig, kBig));
  KF_ASSIGN_OR_RETURN(auto high, read_number(j, "high", path, -kBig, kBig));
  KF_ASSIGN_OR_RETURN(auto fill, read_number(j, "fill_value", path, -kBig, kBig));
  KF_ASSIGN_OR_RETURN(auto start, read_number(j, "start", path, -kBig, kBig));
  KF_ASSIGN_OR_RETURN(auto step, read_number(j, "step", path, -kBig, kBig));
  init.mean = mean.value_or(0.0);
  init.std = stdv.value_or(1.0);
  init.low = low.value_or(0.0);
  init.high = high.value_or(1.0);
  init.start = start.value_or(0.0);
  init.step = step.value_or(1.0);
  if (init.kind == InitKind::kFull) {
    if (!fill) return field_error(path.key("fill_value"), "is required when kind is 'full'");
    init.fill_value = *fill;
  }
  if (init.kind == InitKind::kUniform && !(init.low < init.high)) {
    return field_error(path.key("high"), "must be greater than low for kind 'uniform'");
  }
  return init;
}

// shape x dtype in bytes, computed without overflow; an error naming `path` ("shape") when it
// exceeds `limit`. `what` names the limit in the message.
StatusOr<int64_t> bounded_nbytes(const std::vector<int64_t>& shape, DType dtype, int64_t limit,
                                 const JsonPath& path, std::string_view what) {
  const auto too_large = [&] {
    return field_error(path, std::string(what) + " is larger than the limit of " +
                                 std::to_string(limit) + " bytes");
  };
  const auto elem = static_cast<int64_t>(dtype_size(dtype));
  int64_t bytes = elem;
  for (int64_t d : shape) {
    if (d != 0 && bytes > limit / d) return too_large();
    bytes *= d;
  }
  if (bytes > limit) return too_large();
  return bytes;
}

StatusOr<std::string> inflate_zlib(const std::string& compressed, size_t expected,
                                   const JsonPath& path) {
  std::string out(expected, '\0');
  uLongf out_len = static_cast<uLongf>(expected);
  int rc = uncompress(reinterpret_cast<Bytef*>(out.data()), &out_len,
                      reinterpret_cast<const Bytef*>(compressed.data()),
                      static_cast<uLong>(compressed.size()));
  if (rc == Z_BUF_ERROR) {
    return field_error(path, "decompressed data is larger than shape x dtype (" +
                                 std::to_string(expected) + " bytes)");
  }
  if (rc != Z_OK)
    return field_error(path, "is not valid zlib data (zlib error " + std::to_string(rc) + ")");
  out.resize(out_len);
  return out;
}

StatusOr<TensorData> parse_tensor_data(const Json& j, const JsonPath& path,
                                       const RequestLimits& limits) {
  KF_RETURN_IF_ERROR(expect_object(j, path));
  TensorData data;
  KF_ASSIGN_OR_RETURN(data.data_b64, read_string(j, "data_b64", path, true));
  KF_ASSIGN_OR_RETURN(data.dtype,
                      read_enum<DType>(j, "dtype", path, DType::kFloat32, dtype_from, kDTypeNames));
  KF_ASSIGN_OR_RETURN(data.shape, read_shape(j, "shape", path, limits));
  KF_ASSIGN_OR_RETURN(data.compress, read_enum<Compression>(j, "compress", path, Compression::kNone,
                                                            compression_from, "none, zlib"));
  // Bounded before anything is decoded: zlib data is inflated into shape x dtype bytes.
  KF_ASSIGN_OR_RETURN(const int64_t nbytes,
                      bounded_nbytes(data.shape, data.dtype, limits.max_inline_data_bytes,
                                     path.key("shape"), "inline tensor data"));
  auto raw = base64_decode(data.data_b64);
  if (!raw) return field_error(path.key("data_b64"), raw.status().message());
  const auto expected = static_cast<size_t>(nbytes);
  std::string bytes = std::move(raw).value();
  if (data.compress == Compression::kZlib) {
    KF_ASSIGN_OR_RETURN(bytes, inflate_zlib(bytes, expected, path.key("data_b64")));
  }
  if (bytes.size() != expected) {
    return field_error(path.key("data_b64"), "holds " + std::to_string(bytes.size()) +
                                                 " bytes but shape x dtype needs " +
                                                 std::to_string(expected));
  }
  return data;
}

StatusOr<TensorSpec> parse_tensor_spec(const Json& j, const JsonPath& path,
                                       const RequestLimits& limits) {
  KF_RETURN_IF_ERROR(expect_object(j, path));
  TensorSpec spec;
  KF_ASSIGN_OR_RETURN(spec.shape, read_shape(j, "shape", path, limits));
  KF_ASSIGN_OR_RETURN(spec.dtype,
                      read_enum<DType>(j, "dtype", path, DType::kFloat32, dtype_from, kDTypeNames));
  KF_RETURN_IF_ERROR(
      bounded_nbytes(spec.shape, spec.dtype, limits.max_tensor_bytes, path.key("shape"), "tensor")
          .status());
  const Json* init = member(j, "init");
  const Json* data = member(j, "data");
  if (init != nullptr && data != nullptr) {
    return field_error(path, "'init' and 'data' are mutually exclusive");
  }
  if (init != nullptr) {
    KF_ASSIGN_OR_RETURN(InitSpec i, parse_init(*init, path.key("init")));
    if (i.kind == InitKind::kRandn || i.kind == InitKind::kUniform) {
      if (!is_floating(spec.dtype) && i.kind == InitKind::kRandn) {
        return field_error(path.key("init").key("kind"), "'randn' needs a floating dtype, got " +
                                                             std::string(to_string(spec.dtype)));
      }
    }
    spec.init = i;
  }
  if (data != nullptr) {
    KF_ASSIGN_OR_RETURN(TensorData d, parse_tensor_data(*data, path.key("data"), limits));
    if (d.shape != spec.shape) {
      return field_error(path.key("data").key("shape"), "must equal tensor_spec.shape");
    }
    if (d.dtype != spec.dtype) {
      return field_error(path.key("data").key("dtype"), "must equal tensor_spec.dtype");
    }
    spec.data = std::move(d);
  }
  return spec;
}

bool is_identifier(const std::string& s) {
  if (s.empty() || s.size() > 128) return false;
  if (!(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_')) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_')) return false;
  }
  return true;
}

// A `cuda` kernel's name is an NVRTC name expression: a qualified name, maybe a template
// instance ("ops::scale<128>"). It is never passed to a shell or a file path.
bool is_name_expression(const std::string& s) {
  if (s.empty() || s.size() > 256) return false;
  if (!(std::isalpha(static_cast<unsigned char>(s[0])) || s[0] == '_' || s[0] == ':')) return false;
  for (char c : s) {
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '_' ||
          std::string_view(":<>, *&()").find(c) != std::string_view::npos)) {
      return false;
    }
  }
  return true;
}

StatusOr<ArgSpec> parse_arg(const Json& j, const JsonPath& path, const RequestLimits& limits) {
  KF_RETURN_IF_ERROR(expect_object(j, path));
  ArgSpec arg;
  KF_ASSIGN_OR_RETURN(arg.name, read_string(j, "name", path, true));
  if (!is_identifier(arg.name)) {
    return field_error(path.key("name"), "must be a Python identifier, got '" + arg.name + "'");
  }
  KF_ASSIGN_OR_RETURN(arg.type, read_enum<ArgType>(j, "type", path, ArgType::kTensor, arg_type_from,
                                                   "tensor, int, float, str, bool"));
  KF_ASSIGN_OR_RETURN(arg.role, read_enum<ArgRole>(j, "role", path, ArgRole::kInput, arg_role_from,
                                                   "input, output, inout"));
  KF_ASSIGN_OR_RETURN(auto is_meta, read_bool(j, "is_meta", path));
  arg.is_meta = is_meta.value_or(false);
  const Json* value = member(j, "value");
  if (arg.type == ArgType::kTensor) {
    const Json* ts = member(j, "tensor_spec");
    if (ts == nullptr) return field_error(path.key("tensor_spec"), "is required for a tensor arg");
    KF_ASSIGN_OR_RETURN(TensorSpec spec, parse_tensor_spec(*ts, path.key("tensor_spec"), limits));
    arg.tensor_spec = std::move(spec);
    if (arg.is_meta) return field_error(path.key("is_meta"), "a tensor cannot be a constexpr");
    return arg;
  }
  if (arg.role != ArgRole::kInput) {
    return field_error(path.key("role"), "a scalar arg can only have role 'input'");
  }
  if (value == nullptr) return field_error(path.key("value"), "is required for a scalar arg");
  bool ok = false;
  switch (arg.type) {
    case ArgType::kInt:
      if (value->is_number_integer() && !fits_int64(*value)) {
        return field_error(path.key("value"),
                           "must be an integer between " +
                               std::to_string(std::numeric_limits<int64_t>::min()) + " and " +
                               std::to_string(std::numeric_limits<int64_t>::max()) + ", got " +
                               value->dump());
      }
      ok = value->is_number_integer();
      break;
    case ArgType::kFloat:
      ok = value->is_number();
      break;
    case ArgType::kStr:
      ok = value->is_string();
      break;
    case ArgType::kBool:
      ok = value->is_boolean();
      break;
    case ArgType::kTensor:
      break;
  }
  if (!ok) {
    return field_error(path.key("value"), "must be a " + std::string(to_string(arg.type)) +
                                              ", got " + std::string(json_type_name(*value)));
  }
  arg.value = *value;
  return arg;
}

StatusOr<std::optional<Dim3>> parse_dim3(const Json& obj, std::string_view key,
                                         const JsonPath& path, int64_t max) {
  const Json* v = member(obj, key);
  if (v == nullptr) return std::optional<Dim3>();
  JsonPath p = path.key(key);
  Dim3 d;
  if (v->is_array()) {  // [x, y?, z?] is accepted as a convenience
    if (v->empty() || v->size() > 3) return field_error(p, "must have 1 to 3 dimensions");
    for (size_t i = 0; i < v->size(); ++i) {
      const Json& e = (*v)[i];
      if (!fits_int64(e) || e.get<int64_t>() < 1 || e.get<int64_t>() > max) {
        return field_error(p.index(i), "must be an integer between 1 and " + std::to_string(max));
      }
      (i == 0 ? d.x : i == 1 ? d.y : d.z) = e.get<int64_t>();
    }
    return std::optional<Dim3>(d);
  }
  KF_RETURN_IF_ERROR(expect_object(*v, p));
  KF_ASSIGN_OR_RETURN(auto x, read_int(*v, "x", p, 1, max));
  KF_ASSIGN_OR_RETURN(auto y, read_int(*v, "y", p, 1, max));
  KF_ASSIGN_OR_RETURN(auto z, read_int(*v, "z", p, 1, max));
  d.x = x.value_or(1);
  d.y = y.value_or(1);
  d.z = z.value_or(1);
  return std::optional<Dim3>(d);
}

StatusOr<LaunchConfig> parse_launch(const Json& j, const JsonPath& path) {
  KF_RETURN_IF_ERROR(expect_object(j, path));
  LaunchConfig launch;
  KF_ASSIGN_OR_RETURN(launch.grid, parse_dim3(j, "grid", path, int64_t{2147483647}));
  KF_ASSIGN_OR_RETURN(launch.block, parse_dim3(j, "block", path, 1024));
  if (launch.block && launch.block->x * launch.block->y * launch.block->z > 1024) {
    return field_error(path.key("block"), "must have at most 1024 threads in total");
  }
  KF_ASSIGN_OR_RETURN(auto smem, read_int(j, "shared_mem_bytes", path, 0, int64_t{1} << 20));
  launch.shared_mem_bytes = smem;
  KF_ASSIGN_OR_RETURN(auto warps, read_int(j, "num_warps", path, 1, 64));
  if (warps && (*warps & (*warps - 1)) != 0) {
    return field_error(path.key("num_warps"), "must be a power of two");
  }
  if (warps) launch.num_warps = static_cast<int>(*warps);
  KF_ASSIGN_OR_RETURN(auto stages, read_int(j, "num_stages", path, 1, 16));
  if (stages) launch.num_stages = static_cast<int>(*stages);
  return launch;
}

StatusOr<TimingOptions> parse_timing(const Json& body, TimingOptions timing,
                                     const RequestLimits& limits) {
  JsonPath root;
  KF_ASSIGN_OR_RETURN(auto trials, read_int(body, "num_trials", root, 1, limits.max_trials));
  if (trials) timing.max_trials = static_cast<int>(*trials);
  KF_ASSIGN_OR_RETURN(auto warmup, read_int(body, "num_warmup", root, 0, 100000));
  if (warmup) timing.warmup_calls = static_cast<int>(*warmup);
  const Json* t = member(body, "timing");
  if (t == nullptr) {
    timing.min_trials = std::min(timing.min_trials, timing.max_trials);
    return timing;
  }
  JsonPath p = root.key("timing");
  KF_RETURN_IF_ERROR(expect_object(*t, p));
  KF_ASSIGN_OR_RETURN(auto max_trials, read_int(*t, "max_trials", p, 1, limits.max_trials));
  if (max_trials) timing.max_trials = static_cast<int>(*max_trials);
  KF_ASSIGN_OR_RETURN(auto min_trials, read_int(*t, "min_trials", p, 1, limits.max_trials));
  if (min_trials) timing.min_trials = static_cast<int>(*min_trials);
  KF_ASSIGN_OR_RETURN(auto warmup_calls, read_int(*t, "warmup_calls", p, 0, 100000));
  if (warmup_calls) timing.warmup_calls = static_cast<int>(*warmup_calls);
  KF_ASSIGN_OR_RETURN(auto warmup_ms, read_number(*t, "warmup_ms", p, 0.0, 600000.0));
  if (warmup_ms) timing.warmup_ms = *warmup_ms;
  KF_ASSIGN_OR_RETURN(auto budget_ms, read_number(*t, "budget_ms", p, 0.0, 3600000.0));
  if (budget_ms) timing.budget_ms = *budget_ms;
  KF_ASSIGN_OR_RETURN(auto rse, read_number(*t, "rse_target", p, 0.0, 1.0));
  if (rse) timing.rse_target = *rse;
  KF_ASSIGN_OR_RETURN(auto graph, read_bool(*t, "cuda_graph", p));
  if (graph) timing.cuda_graph = *graph;
  KF_ASSIGN_OR_RETURN(auto flush, read_bool(*t, "l2_flush", p));
  if (flush) timing.l2_flush = *flush;
  if (min_trials && max_trials && *min_trials > *max_trials) {
    return field_error(p.key("min_trials"), "must not exceed max_trials");
  }
  timing.min_trials = std::min(timing.min_trials, timing.max_trials);
  return timing;
}

// Fields shared by /evaluate and /compare.
Status parse_common(const Json& body, const RequestLimits& limits, JobRequest& req) {
  JsonPath root;
  KF_ASSIGN_OR_RETURN(req.timing, parse_timing(body, req.timing, limits));
  KF_ASSIGN_OR_RETURN(auto correct,
                      read_int(body, "num_correct_trials", root, 1, limits.max_correct_trials));
  if (correct) req.num_correct_trials = static_cast<int>(*correct);
  KF_ASSIGN_OR_RETURN(
      auto timeout, read_number(body, "timeout", root, limits.min_timeout_s, limits.max_timeout_s));
  if (timeout) req.timeout_s = *timeout;
  KF_ASSIGN_OR_RETURN(req.device, read_string(body, "device", root, false));
  KF_ASSIGN_OR_RETURN(req.atol, read_number(body, "atol", root, 0.0, 1e300));
  KF_ASSIGN_OR_RETURN(req.rtol, read_number(body, "rtol", root, 0.0, 1e300));
  KF_ASSIGN_OR_RETURN(auto measure, read_bool(body, "measure_performance", root));
  if (measure) req.measure_performance = *measure;
  KF_ASSIGN_OR_RETURN(req.enable_device_metrics, read_bool(body, "enable_device_metrics", root));
  KF_ASSIGN_OR_RETURN(req.seed, read_uint64(body, "seed", root));
  return Status::ok();
}

std::string describe_inputs(const IOContract& io) {
  std::string out = "[";
  for (const ArgSpec* a : io.input_tensors()) {
    if (out.size() > 1) out += ", ";
    out += a->name + ":" + std::string(to_string(a->tensor_spec->dtype)) +
           Json(a->tensor_spec->shape).dump();
  }
  return out + "]";
}

// A `cuda` kernel is launched by kforge itself: it needs its name, launch dimensions and
// arguments a C function can take, and only allow-listed NVRTC options.
Status check_cuda_rules(const KernelCode& k, const JsonPath& p) {
  if (k.entry_point().empty()) {
    return field_error(p.key("metadata").key("kernel_name"),
                       "is required for kernel_type 'cuda' (the __global__ function to launch)");
  }
  const LaunchConfig launch = k.io && k.io->launch ? *k.io->launch : LaunchConfig{};
  if (!launch.grid || !launch.block) {
    return field_error(p.key("io").key("launch").key(launch.grid ? "block" : "grid"),
                       "is required for kernel_type 'cuda' ({x, y, z} or [x, y, z])");
  }
  for (size_t i = 0; k.io && i < k.io->args.size(); ++i) {
    if (k.io->args[i].type == ArgType::kStr) {
      return field_error(p.key("io").key("args").index(i).key("type"),
                         "a cuda kernel cannot take a 'str' argument");
    }
  }
  return parse_cuda_compile_options(k.metadata, p.key("metadata")).status();
}

Status check_kernel_rules(const KernelCode& k, std::string_view field) {
  JsonPath p(std::string{field});
  switch (k.kernel_type) {
    case KernelType::kTriton:
    case KernelType::kCuda:
      if (!k.io || k.io->args.empty()) {
        return field_error(p.key("io"), "is required for kernel_type '" +
                                            std::string(to_string(k.kernel_type)) +
                                            "' (the kernel's arguments must be declared)");
      }
      break;
    case KernelType::kMultiKernel:
      if (!k.io || k.io->args.empty()) {
        return field_error(p.key("io"), "is required for kernel_type 'multi_kernel'");
      }
      if (k.entry_point().empty()) {
        return field_error(p.key("metadata").key("entry_point"),
                           "is required for kernel_type 'multi_kernel'");
      }
      break;
    case KernelType::kTorch:
    case KernelType::kTorchCuda:
      break;
  }
  if (k.kernel_type == KernelType::kCuda) KF_RETURN_IF_ERROR(check_cuda_rules(k, p));
  if (k.io && !k.io->args.empty()) {
    // A Triton or multi_kernel wrapper may return its outputs; a CUDA kernel cannot.
    if (k.io->output_tensors().empty() && k.kernel_type == KernelType::kCuda) {
      return field_error(p.key("io").key("args"),
                         "must declare at least one tensor with role 'output' or 'inout'");
    }
  }
  return Status::ok();
}

// The names a torch / torch_cuda kernel may give its callable (the old server's targeting).
constexpr const char* kTorchTargetKeys[] = {"function_name", "class_name", "method_name"};

// Checks the metadata fields kforge reads and brings old spellings to kforge's:
// compiler_options (the old server's) becomes compile_options.
Status normalize_metadata(KernelCode& k, const JsonPath& path) {
  Json& meta = k.metadata;
  // The roofline's work per call (jobs/roofline.h).
  for (const char* key : {"bytes_moved", "flops"}) {
    auto it = meta.find(key);
    if (it != meta.end() && !it->is_null() && (!it->is_number() || it->get<double>() < 0)) {
      return field_error(path.key(key), "must be a number >= 0");
    }
  }
  if (auto it = meta.find("flops_dtype"); it != meta.end() && !it->is_null()) {
    static const std::set<std::string> kFlopsDtypes = {"fp32", "tf32", "fp16", "bf16"};
    if (!it->is_string() || !kFlopsDtypes.contains(it->get<std::string>())) {
      return field_error(path.key("flops_dtype"), "must be one of fp32, tf32, fp16, bf16");
    }
  }
  for (const char* key : {"entry_point", "kernel_name"}) {
    auto it = meta.find(key);
    if (it == meta.end() || it->is_null()) continue;
    if (!it->is_string()) return field_error(path.key(key), "must be a string");
    const std::string name = it->get<std::string>();
    const bool ok =
        k.kernel_type == KernelType::kCuda ? is_name_expression(name) : is_identifier(name);
    if (!ok) {
      return field_error(path.key(key), std::string("must be ") +
                                            (k.kernel_type == KernelType::kCuda
                                                 ? "a C++ name (\"scale\", \"ops::scale<128>\")"
                                                 : "an identifier") +
                                            ", got '" + name + "'");
    }
  }
  if (auto old = meta.find("compiler_options"); old != meta.end()) {
    auto current = meta.find("compile_options");
    if (current != meta.end() && !current->is_null() && *current != *old) {
      return field_error(path.key("compiler_options"),
                         "is the old spelling of compile_options; give only one of them");
    }
    Json value = *old;
    meta.erase("compiler_options");
    if (!value.is_null()) meta["compile_options"] = std::move(value);
  }
  bool any_target = false;
  for (const char* key : kTorchTargetKeys) {
    auto it = meta.find(key);
    if (it == meta.end() || it->is_null()) continue;
    any_target = true;
    if (!it->is_string() || !is_identifier(it->get<std::string>())) {
      return field_error(path.key(key), "must be a Python identifier, got " + it->dump());
    }
  }
  if (!any_target) return Status::ok();
  if (k.kernel_type != KernelType::kTorch && k.kernel_type != KernelType::kTorchCuda) {
    const char* key = meta.contains("function_name") ? "function_name"
                      : meta.contains("class_name")  ? "class_name"
                                                     : "method_name";
    return field_error(path.key(key),
                       "applies to torch and torch_cuda kernels; a " +
                           std::string(to_string(k.kernel_type)) +
                           " kernel names its entry point with metadata.kernel_name");
  }
  const bool function = meta.contains("function_name") && !meta["function_name"].is_null();
  for (const char* key : {"class_name", "method_name"}) {
    if (function && meta.contains(key) && !meta[key].is_null()) {
      return field_error(
          path.key(key),
          "cannot be given with function_name (which names a module-level function)");
    }
  }
  return Status::ok();
}

}  // namespace

StatusOr<IOContract> parse_io_contract(const Json& j, const JsonPath& path,
                                       const RequestLimits& limits) {
  KF_RETURN_IF_ERROR(expect_object(j, path));
  IOContract io;
  const Json* args = member(j, "args");
  if (args == nullptr) return field_error(path.key("args"), "is required");
  if (!args->is_array()) return field_error(path.key("args"), "must be a list");
  if (args->size() > limits.max_args) {
    return field_error(path.key("args"),
                       "has more than " + std::to_string(limits.max_args) + " args");
  }
  std::set<std::string> names;
  for (size_t i = 0; i < args->size(); ++i) {
    KF_ASSIGN_OR_RETURN(ArgSpec a, parse_arg((*args)[i], path.key("args").index(i), limits));
    if (!names.insert(a.name).second) {
      return field_error(path.key("args").index(i).key("name"),
                         "duplicate arg name '" + a.name + "'");
    }
    io.args.push_back(std::move(a));
  }
  if (const Json* launch = member(j, "launch")) {
    KF_ASSIGN_OR_RETURN(LaunchConfig l, parse_launch(*launch, path.key("launch")));
    io.launch = l;
  }
  return io;
}

StatusOr<KernelCode> parse_kernel_code(const Json& j, const JsonPath& path,
                                       const RequestLimits& limits) {
  KF_RETURN_IF_ERROR(expect_object(j, path));
  KernelCode k;
  KF_ASSIGN_OR_RETURN(k.source_code, read_string(j, "source_code", path, true));
  if (k.source_code.find_first_not_of(" \t\r\n") == std::string::npos) {
    return field_error(path.key("source_code"), "must not be empty");
  }
  if (!member(j, "kernel_type")) return field_error(path.key("kernel_type"), "is required");
  KF_ASSIGN_OR_RETURN(
      k.kernel_type,
      read_enum<KernelType>(j, "kernel_type", path, KernelType::kTorch, kernel_type_from,
                            "torch, torch_cuda, triton, cuda, multi_kernel"));
  if (const Json* io = member(j, "io")) {
    KF_ASSIGN_OR_RETURN(IOContract c, parse_io_contract(*io, path.key("io"), limits));
    k.io = std::move(c);
  }
  if (const Json* meta = member(j, "metadata")) {
    if (!meta->is_object()) return field_error(path.key("metadata"), "must be an object");
    k.metadata = *meta;
    KF_RETURN_IF_ERROR(normalize_metadata(k, path.key("metadata")));
  }
  if (k.kernel_type == KernelType::kCuda && k.entry_point().empty()) {
    // As the kernel evaluation server did: a source with one __global__ function needs no name.
    auto only = single_cuda_kernel(k.source_code);
    if (!only.is_ok())
      return field_error(path.key("metadata").key("kernel_name"), only.status().message());
    k.metadata["kernel_name"] = *only;
  }
  return k;
}

Status check_request_consistency(const JobRequest& request, std::string_view kernel_field,
                                 std::string_view reference_field) {
  KF_RETURN_IF_ERROR(check_kernel_rules(request.kernel, kernel_field));
  if (!request.reference) return Status::ok();
  KF_RETURN_IF_ERROR(check_kernel_rules(*request.reference, reference_field));
  const auto& cand = request.kernel;
  const auto& ref = *request.reference;
  if (!cand.io && !ref.io) {
    // Both take inputs from get_inputs(): only Python kernel types can provide them.
    if (cand.kernel_type == KernelType::kCuda) {
      return field_error(JsonPath(std::string(kernel_field)).key("io"), "is required");
    }
    return Status::ok();
  }
  if (cand.io && ref.io) {
    auto ci = cand.io->input_tensors();
    auto ri = ref.io->input_tensors();
    bool same = ci.size() == ri.size();
    for (size_t i = 0; same && i < ci.size(); ++i) {
      same = ci[i]->tensor_spec->shape == ri[i]->tensor_spec->shape &&
             ci[i]->tensor_spec->dtype == ri[i]->tensor_spec->dtype;
    }
    if (!same) {
      return invalid_argument("the declared inputs disagree: " + std::string(reference_field) +
                                  ".io has " + describe_inputs(*ref.io) + " but " +
                                  std::string(kernel_field) + ".io has " +
                                  describe_inputs(*cand.io),
                              std::string(kernel_field) + ".io.args");
    }
  }
  return Status::ok();
}

StatusOr<JobRequest> parse_evaluate_request(const Json& body, const RequestLimits& limits) {
  KF_RETURN_IF_ERROR(expect_object(body, JsonPath()));
  JobRequest req;
  req.kind = JobKind::kEvaluate;
  const Json* kernel = member(body, "kernel");
  if (kernel == nullptr) return field_error(JsonPath("kernel"), "is required");
  KF_ASSIGN_OR_RETURN(req.kernel, parse_kernel_code(*kernel, JsonPath("kernel"), limits));
  if (const Json* ref = member(body, "reference_kernel")) {
    KF_ASSIGN_OR_RETURN(KernelCode r,
                        parse_kernel_code(*ref, JsonPath("reference_kernel"), limits));
    req.reference = std::move(r);
    req.kind = JobKind::kCompare;
  }
  KF_RETURN_IF_ERROR(parse_common(body, limits, req));
  KF_RETURN_IF_ERROR(check_request_consistency(req, "kernel", "reference_kernel"));
  return req;
}

namespace {

// The legacy body of POST / and /compare, {ref_code, custom_code} (KernelBench Model and
// ModelNew sources), as the kernel evaluation server read it: a torch reference, a
// torch_cuda candidate, num_trials 100 and timeout 30 s unless given.
StatusOr<Json> from_legacy_body(const Json& body) {
  const Json* ref = member(body, "ref_code");
  const Json* custom = member(body, "custom_code");
  if (ref == nullptr || custom == nullptr) {
    return field_error(JsonPath(ref == nullptr ? "ref_code" : "custom_code"),
                       "is required (the legacy body has both ref_code and custom_code)");
  }
  Json out = body;
  out.erase("ref_code");
  out.erase("custom_code");
  out["ref_kernel"] = Json{{"source_code", *ref}, {"kernel_type", "torch"}};
  out["custom_kernel"] = Json{{"source_code", *custom}, {"kernel_type", "torch_cuda"}};
  if (member(out, "timeout") == nullptr) out["timeout"] = 30;
  return out;
}

// A field of the converted legacy body named as the client sent it.
Status in_legacy_terms(const Status& status) {
  std::string field = status.field_path();
  for (const auto& [from, to] :
       {std::pair<std::string, std::string>{"ref_kernel.source_code", "ref_code"},
        {"custom_kernel.source_code", "custom_code"}}) {
    if (field == from) field = to;
  }
  return Status(status.code(), status.message(), field);
}

}  // namespace

StatusOr<JobRequest> parse_compare_request(const Json& body, const RequestLimits& limits) {
  KF_RETURN_IF_ERROR(expect_object(body, JsonPath()));
  const bool legacy =
      member(body, "ref_kernel") == nullptr && member(body, "custom_kernel") == nullptr &&
      (member(body, "ref_code") != nullptr || member(body, "custom_code") != nullptr);
  if (legacy) {
    KF_ASSIGN_OR_RETURN(Json converted, from_legacy_body(body));
    auto request = parse_compare_request(converted, limits);
    if (!request.is_ok()) return in_legacy_terms(request.status());
    return request;
  }
  JobRequest req;
  req.kind = JobKind::kCompare;
  const Json* ref = member(body, "ref_kernel");
  if (ref == nullptr) return field_error(JsonPath("ref_kernel"), "is required");
  const Json* custom = member(body, "custom_kernel");
  if (custom == nullptr) return field_error(JsonPath("custom_kernel"), "is required");
  KF_ASSIGN_OR_RETURN(KernelCode r, parse_kernel_code(*ref, JsonPath("ref_kernel"), limits));
  req.reference = std::move(r);
  KF_ASSIGN_OR_RETURN(req.kernel, parse_kernel_code(*custom, JsonPath("custom_kernel"), limits));
  KF_RETURN_IF_ERROR(parse_common(body, limits, req));
  KF_RETURN_IF_ERROR(check_request_consistency(req, "custom_kernel", "ref_kernel"));
  return req;
}

}  // namespace kforge::model
