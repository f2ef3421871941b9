#include "kforge/model/parse.h"

#include <zlib.h>

#include <algorithm>
#include <limits>
#include <memory>
#include <set>

#include "kforge/common/base64.h"
#include "kforge/model/cuda_kernel_names.h"
#include "kforge/model/json_reader.h"
#include "kforge/model/kernel_rules.h"

namespace kforge::model {

using reader::expect_object;
using reader::field_error;
using reader::fits_int64;
using reader::member;
using reader::read_bool;
using reader::read_enum;
using reader::read_int;
using reader::read_nonempty_string;
using reader::read_number;
using reader::read_shape;
using reader::read_string;
using reader::read_uint64;

namespace {

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
                                       const RequestLimits& limits, InlineData inline_data) {
  KF_RETURN_IF_ERROR(expect_object(j, path));
  TensorData data;
  KF_ASSIGN_OR_RETURN(data.data_b64, read_string(j, "data_b64", path, true));
  KF_ASSIGN_OR_RETURN(data.dtype,
                      read_enum<DType>(j, "dtype", path, DType::kFloat32, dtype_from, kDTypeNames));
  KF_ASSIGN_OR_RETURN(data.shape, read_shape(j, "shape", path, limits.max_tensor_rank));
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
  // Kept where the tensors are built from these bytes (cuda/host_inputs.h): never decoded
  // again. Elsewhere (the server) dropped now: a request's inflated tensors are never all
  // held at once.
  if (inline_data == InlineData::kKeep) {
    data.bytes = std::make_shared<const std::string>(std::move(bytes));
  }
  return data;
}

StatusOr<TensorSpec> parse_tensor_spec(const Json& j, const JsonPath& path,
                                       const RequestLimits& limits, InlineData inline_data) {
  KF_RETURN_IF_ERROR(expect_object(j, path));
  TensorSpec spec;
  KF_ASSIGN_OR_RETURN(spec.shape, read_shape(j, "shape", path, limits.max_tensor_rank));
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
    KF_ASSIGN_OR_RETURN(TensorData d,
                        parse_tensor_data(*data, path.key("data"), limits, inline_data));
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

StatusOr<ArgSpec> parse_arg(const Json& j, const JsonPath& path, const RequestLimits& limits,
                            InlineData inline_data) {
  KF_RETURN_IF_ERROR(expect_object(j, path));
  ArgSpec arg;
  KF_ASSIGN_OR_RETURN(arg.name, read_nonempty_string(j, "name", path));
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
    KF_ASSIGN_OR_RETURN(TensorSpec spec,
                        parse_tensor_spec(*ts, path.key("tensor_spec"), limits, inline_data));
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
  return parse_timing_object(*t, root.key("timing"), timing, limits);
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

}  // namespace

StatusOr<TimingOptions> parse_timing_object(const Json& t, const JsonPath& p, TimingOptions timing,
                                            const RequestLimits& limits) {
  KF_RETURN_IF_ERROR(expect_object(t, p));
  KF_ASSIGN_OR_RETURN(auto max_trials, read_int(t, "max_trials", p, 1, limits.max_trials));
  if (max_trials) timing.max_trials = static_cast<int>(*max_trials);
  KF_ASSIGN_OR_RETURN(auto min_trials, read_int(t, "min_trials", p, 1, limits.max_trials));
  if (min_trials) timing.min_trials = static_cast<int>(*min_trials);
  KF_ASSIGN_OR_RETURN(auto warmup_calls, read_int(t, "warmup_calls", p, 0, 100000));
  if (warmup_calls) timing.warmup_calls = static_cast<int>(*warmup_calls);
  KF_ASSIGN_OR_RETURN(auto warmup_ms, read_number(t, "warmup_ms", p, 0.0, 600000.0));
  if (warmup_ms) timing.warmup_ms = *warmup_ms;
  KF_ASSIGN_OR_RETURN(auto budget_ms, read_number(t, "budget_ms", p, 0.0, 3600000.0));
  if (budget_ms) timing.budget_ms = *budget_ms;
  KF_ASSIGN_OR_RETURN(auto rse, read_number(t, "rse_target", p, 0.0, 1.0));
  if (rse) timing.rse_target = *rse;
  KF_ASSIGN_OR_RETURN(auto graph, read_bool(t, "cuda_graph", p));
  if (graph) timing.cuda_graph = *graph;
  KF_ASSIGN_OR_RETURN(auto flush, read_bool(t, "l2_flush", p));
  if (flush) timing.l2_flush = *flush;
  if (min_trials && max_trials && *min_trials > *max_trials) {
    return field_error(p.key("min_trials"), "must not exceed max_trials");
  }
  timing.min_trials = std::min(timing.min_trials, timing.max_trials);
  return timing;
}

StatusOr<IOContract> parse_io_contract(const Json& j, const JsonPath& path,
                                       const RequestLimits& limits, InlineData inline_data) {
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
    KF_ASSIGN_OR_RETURN(ArgSpec a,
                        parse_arg((*args)[i], path.key("args").index(i), limits, inline_data));
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
                                       const RequestLimits& limits, InlineData inline_data) {
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
    KF_ASSIGN_OR_RETURN(IOContract c, parse_io_contract(*io, path.key("io"), limits, inline_data));
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
