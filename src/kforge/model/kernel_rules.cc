#include "kforge/model/kernel_rules.h"

#include <cctype>
#include <set>

#include "kforge/model/cuda_options.h"
#include "kforge/model/json_reader.h"

namespace kforge::model {

using reader::field_error;

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

namespace {

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

// The names a torch / torch_cuda kernel may give its callable (the old server's targeting).
constexpr const char* kTorchTargetKeys[] = {"function_name", "class_name", "method_name"};

// A kernel type that is launched with declared arguments came without them. The message names
// `io_contract`, as the kernel evaluation server's did ("Triton kernels require io_contract to
// be specified"), so its clients recognise it.
Status io_contract_required(const JsonPath& p, KernelType type) {
  const std::string name(to_string(type));
  const std::string display = type == KernelType::kTriton ? "Triton"
                              : type == KernelType::kCuda ? "CUDA"
                                                          : name;
  return field_error(p.key("io"), "is required for kernel_type '" + name + "': " + display +
                                      " kernels require io_contract to be specified (the "
                                      "IOContract that declares the kernel's arguments)");
}

}  // namespace

Status check_kernel_rules(const KernelCode& k, std::string_view field) {
  JsonPath p(std::string{field});
  switch (k.kernel_type) {
    case KernelType::kTriton:
    case KernelType::kCuda:
      if (!k.io || k.io->args.empty()) return io_contract_required(p, k.kernel_type);
      break;
    case KernelType::kMultiKernel:
      if (!k.io || k.io->args.empty()) return io_contract_required(p, k.kernel_type);
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
    if (it->is_string() && it->get_ref<const std::string&>().empty()) {
      return field_error(path.key("flops_dtype"),
                         "must not be empty (expected one of: fp32, tf32, fp16, bf16)");
    }
    if (!it->is_string() || !kFlopsDtypes.contains(it->get<std::string>())) {
      return field_error(path.key("flops_dtype"), "must be one of fp32, tf32, fp16, bf16");
    }
  }
  for (const char* key : {"entry_point", "kernel_name"}) {
    auto it = meta.find(key);
    if (it == meta.end() || it->is_null()) continue;
    if (!it->is_string()) return field_error(path.key(key), "must be a string");
    const std::string name = it->get<std::string>();
    if (name.empty()) return field_error(path.key(key), "must not be empty");
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
    if (it->is_string() && it->get_ref<const std::string&>().empty()) {
      return field_error(path.key(key), "must not be empty");
    }
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

}  // namespace kforge::model
