#include "kforge/model/serialize.h"

namespace kforge::model {
namespace {

Json dim3_json(const Dim3& d) {
  return Json{{"x", d.x}, {"y", d.y}, {"z", d.z}};
}

Json init_json(const InitSpec& init) {
  Json j = {{"kind", to_string(init.kind)}};
  if (init.seed) j["seed"] = *init.seed;
  switch (init.kind) {
    case InitKind::kRandn:
      j["mean"] = init.mean;
      j["std"] = init.std;
      break;
    case InitKind::kUniform:
      j["low"] = init.low;
      j["high"] = init.high;
      break;
    case InitKind::kFull:
      j["fill_value"] = init.fill_value;
      break;
    case InitKind::kArange:
      j["start"] = init.start;
      j["step"] = init.step;
      break;
    case InitKind::kZeros:
    case InitKind::kOnes:
      break;
  }
  return j;
}

}  // namespace

Json to_json(const TensorSpec& spec) {
  Json j = {{"shape", spec.shape}, {"dtype", to_string(spec.dtype)}};
  if (spec.init) j["init"] = init_json(*spec.init);
  if (spec.data) {
    j["data"] = Json{{"data_b64", spec.data->data_b64},
                     {"dtype", to_string(spec.data->dtype)},
                     {"shape", spec.data->shape},
                     {"compress", to_string(spec.data->compress)}};
  }
  return j;
}

Json to_json(const ArgSpec& arg) {
  Json j = {{"name", arg.name},
            {"type", to_string(arg.type)},
            {"role", to_string(arg.role)},
            {"is_meta", arg.is_meta}};
  if (arg.tensor_spec) j["tensor_spec"] = to_json(*arg.tensor_spec);
  if (!arg.value.is_null()) j["value"] = arg.value;
  return j;
}

Json to_json(const IOContract& io) {
  Json args = Json::array();
  for (const auto& a : io.args)
    args.push_back(to_json(a));
  Json j = {{"args", std::move(args)}};
  if (io.launch) {
    Json l = Json::object();
    if (io.launch->grid) l["grid"] = dim3_json(*io.launch->grid);
    if (io.launch->block) l["block"] = dim3_json(*io.launch->block);
    if (io.launch->shared_mem_bytes) l["shared_mem_bytes"] = *io.launch->shared_mem_bytes;
    if (io.launch->num_warps) l["num_warps"] = *io.launch->num_warps;
    if (io.launch->num_stages) l["num_stages"] = *io.launch->num_stages;
    j["launch"] = std::move(l);
  }
  return j;
}

Json to_json(const KernelCode& kernel) {
  Json j = {{"source_code", kernel.source_code},
            {"kernel_type", to_string(kernel.kernel_type)},
            {"metadata", kernel.metadata}};
  if (kernel.io) j["io"] = to_json(*kernel.io);
  return j;
}

Json to_json(const TimingOptions& t) {
  return Json{{"max_trials", t.max_trials},     {"min_trials", t.min_trials},
              {"warmup_calls", t.warmup_calls}, {"warmup_ms", t.warmup_ms},
              {"budget_ms", t.budget_ms},       {"rse_target", t.rse_target},
              {"cuda_graph", t.cuda_graph},     {"l2_flush", t.l2_flush}};
}

Json to_request_json(const JobRequest& r) {
  Json j = Json::object();
  if (r.kind == JobKind::kCompare && r.reference) {
    j["ref_kernel"] = to_json(*r.reference);
    j["custom_kernel"] = to_json(r.kernel);
  } else {
    j["kernel"] = to_json(r.kernel);
  }
  j["num_trials"] = r.timing.max_trials;
  j["num_warmup"] = r.timing.warmup_calls;
  j["timing"] = to_json(r.timing);
  j["num_correct_trials"] = r.num_correct_trials;
  j["measure_performance"] = r.measure_performance;
  j["timeout"] = r.timeout_s;
  if (!r.device.empty()) j["device"] = r.device;
  if (r.atol) j["atol"] = *r.atol;
  if (r.rtol) j["rtol"] = *r.rtol;
  if (r.seed) j["seed"] = *r.seed;
  if (r.enable_device_metrics) j["enable_device_metrics"] = *r.enable_device_metrics;
  if (r.batch)
    j["batch"] = {{"id", r.batch->id}, {"index", r.batch->index}, {"size", r.batch->size}};
  return j;
}

}  // namespace kforge::model
