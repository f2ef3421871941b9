#include "kforge/frontends/mcp/kernel_tool_args.h"

#include <utility>

#include "kforge/model/parse.h"

namespace kforge::frontends::mcp {
namespace {

using Renames = std::vector<std::pair<std::string_view, std::string_view>>;

const Renames& renames(KernelTool tool) {
  static const Renames evaluate = {
      {"kernel.source_code", "kernel_source"},
      {"kernel.kernel_type", "kernel_type"},
      {"kernel.io", "io_contract"},
      {"kernel.metadata", "metadata"},
      {"reference_kernel.source_code", "reference_kernel_source"},
      {"reference_kernel.kernel_type", "reference_kernel_type"},
      {"reference_kernel.io", "reference_kernel_io"},
      {"reference_kernel.metadata", "reference_kernel_metadata"},
  };
  static const Renames compare = {
      {"ref_kernel.source_code", "ref_kernel_source"},
      {"ref_kernel.kernel_type", "ref_kernel_type"},
      {"ref_kernel.io", "ref_kernel_io"},
      {"ref_kernel.metadata", "ref_kernel_metadata"},
      {"custom_kernel.source_code", "custom_kernel_source"},
      {"custom_kernel.kernel_type", "custom_kernel_type"},
      {"custom_kernel.io", "custom_kernel_io"},
      {"custom_kernel.metadata", "custom_kernel_metadata"},
  };
  return tool == KernelTool::kCompare ? compare : evaluate;
}

bool is_identifier_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// Replaces whole-token occurrences of each REST path prefix in `text`.
std::string rename_in_text(KernelTool tool, std::string text) {
  for (const auto& [from, to] : renames(tool)) {
    size_t pos = 0;
    while ((pos = text.find(from, pos)) != std::string::npos) {
      size_t end = pos + from.size();
      bool starts = pos == 0 || (!is_identifier_char(text[pos - 1]) && text[pos - 1] != '.');
      bool ends = end == text.size() || !is_identifier_char(text[end]);
      if (starts && ends) {
        text.replace(pos, from.size(), to);
        pos += to.size();
      } else {
        pos = end;
      }
    }
  }
  return text;
}

void copy_if_present(const Json& from, Json& to, const char* key, const char* as = nullptr) {
  auto it = from.find(key);
  if (it != from.end() && !it->is_null()) to[as != nullptr ? as : key] = *it;
}

Json kernel_code(const Json& args, const char* source, const char* type, const char* io,
                 const char* metadata, const char* default_type = nullptr) {
  Json k = Json::object();
  copy_if_present(args, k, source, "source_code");
  if (default_type != nullptr) k["kernel_type"] = default_type;
  copy_if_present(args, k, type, "kernel_type");
  copy_if_present(args, k, io, "io");
  copy_if_present(args, k, metadata, "metadata");
  return k;
}

// Copies a KernelCode object's members to the flat argument names `prefix` + source, ...
void flatten_kernel(const Json& kernel, Json& out, const char* source, const char* type,
                    const char* io, const char* metadata) {
  if (!kernel.is_object()) {
    out[source] = kernel;  // not an object: let validation name it
    return;
  }
  copy_if_present(kernel, out, "source_code", source);
  copy_if_present(kernel, out, "kernel_type", type);
  copy_if_present(kernel, out, "io", io);
  copy_if_present(kernel, out, "metadata", metadata);
}

// A REST body (EvaluationRequest / CompareRequest) as flat tool arguments.
Json flatten_rest_body(const Json& body) {
  Json out = Json::object();
  for (auto it = body.begin(); it != body.end(); ++it) {
    const std::string& key = it.key();
    if (key == "kernel") {
      flatten_kernel(*it, out, "kernel_source", "kernel_type", "io_contract", "metadata");
    } else if (key == "reference_kernel") {
      flatten_kernel(*it, out, "reference_kernel_source", "reference_kernel_type",
                     "reference_kernel_io", "reference_kernel_metadata");
    } else if (key == "ref_kernel") {
      flatten_kernel(*it, out, "ref_kernel_source", "ref_kernel_type", "ref_kernel_io",
                     "ref_kernel_metadata");
    } else if (key == "custom_kernel") {
      flatten_kernel(*it, out, "custom_kernel_source", "custom_kernel_type", "custom_kernel_io",
                     "custom_kernel_metadata");
    } else {
      out[key] = *it;
    }
  }
  return out;
}

}  // namespace

// Removes null members of objects, at every depth (array elements are kept).
void drop_nulls(Json& value) {
  if (value.is_object()) {
    for (auto it = value.begin(); it != value.end();) {
      if (it->is_null()) {
        it = value.erase(it);
      } else {
        drop_nulls(*it);
        ++it;
      }
    }
  } else if (value.is_array()) {
    for (auto& e : value)
      drop_nulls(e);
  }
}

Json normalize_arguments(Json arguments) {
  drop_nulls(arguments);
  if (!arguments.is_object() || arguments.size() != 1) return arguments;
  auto request = arguments.find("request");
  if (request == arguments.end() || !request->is_object()) return arguments;
  Json inner = *request;
  for (const char* key : {"kernel", "reference_kernel", "ref_kernel", "custom_kernel"}) {
    if (inner.contains(key)) return flatten_rest_body(inner);
  }
  return inner;
}

std::string argument_path(KernelTool tool, std::string_view rest_path) {
  for (const auto& [from, to] : renames(tool)) {
    if (rest_path.substr(0, from.size()) != from) continue;
    if (rest_path.size() == from.size() || rest_path[from.size()] == '.' ||
        rest_path[from.size()] == '[') {
      return std::string(to) + std::string(rest_path.substr(from.size()));
    }
  }
  return std::string(rest_path);
}

Status in_argument_terms(KernelTool tool, const Status& status) {
  if (status.is_ok()) return status;
  return Status(status.code(), rename_in_text(tool, status.message()),
                argument_path(tool, status.field_path()));
}

StatusOr<Json> rest_body_from_arguments(KernelTool tool, const Json& args,
                                        std::vector<std::string>& /*warnings*/) {
  Json body = Json::object();
  if (tool == KernelTool::kCompare) {
    body["ref_kernel"] = kernel_code(args, "ref_kernel_source", "ref_kernel_type", "ref_kernel_io",
                                     "ref_kernel_metadata");
    body["custom_kernel"] = kernel_code(args, "custom_kernel_source", "custom_kernel_type",
                                        "custom_kernel_io", "custom_kernel_metadata");
  } else {
    body["kernel"] = kernel_code(args, "kernel_source", "kernel_type", "io_contract", "metadata");
    if (args.contains("reference_kernel_source")) {
      body["reference_kernel"] =
          kernel_code(args, "reference_kernel_source", "reference_kernel_type",
                      "reference_kernel_io", "reference_kernel_metadata", "torch");
    } else {
      for (const char* key :
           {"reference_kernel_type", "reference_kernel_io", "reference_kernel_metadata"}) {
        if (args.contains(key)) {
          return invalid_argument(
              "is given but reference_kernel_source is not: pass the reference's source too", key);
        }
      }
    }
  }
  for (const char* key : {"num_trials", "num_warmup", "timeout", "atol", "rtol", "device",
                          "num_correct_trials", "timing", "enable_device_metrics"}) {
    copy_if_present(args, body, key);
  }
  if (tool == KernelTool::kValidate) {
    body["measure_performance"] = false;
    if (!body.contains("timeout")) body["timeout"] = kDefaultValidateTimeoutS;
  } else {
    if (!body.contains("num_trials")) body["num_trials"] = kDefaultNumTrials;
    if (!body.contains("num_warmup")) body["num_warmup"] = kDefaultNumWarmup;
    if (!body.contains("timeout")) body["timeout"] = kDefaultTimeoutS;
  }
  return body;
}

StatusOr<model::JobRequest> job_request_from_arguments(KernelTool tool, const Json& arguments,
                                                       const model::RequestLimits& limits,
                                                       std::vector<std::string>& warnings) {
  KF_ASSIGN_OR_RETURN(Json body, rest_body_from_arguments(tool, arguments, warnings));
  auto request = tool == KernelTool::kCompare ? model::parse_compare_request(body, limits)
                                              : model::parse_evaluate_request(body, limits);
  if (!request.is_ok()) return in_argument_terms(tool, request.status());
  return request;
}

}  // namespace kforge::frontends::mcp
