#include "kforge/cuda_worker/correctness.h"

#include <algorithm>

namespace kforge::cuda_worker {
namespace {

using cuda::HostTensor;

struct Trial {
  CorrectnessContext& ctx;
  CorrectnessDetails& details;
  int index;

  std::string label() const {
    return "trial " + std::to_string(index + 1) + "/" +
           std::to_string(ctx.job.request.num_correct_trials);
  }

  // Fails the trial as a mismatch (a wrong or dishonest output).
  bool reject(const std::string& message, const char* check = nullptr) {
    if (check != nullptr) ctx.result.add_check(check, false, message);
    ctx.result.fail(model::ErrorKind::kMismatch, label() + ": " + message);
    details.per_trial.push_back(TrialResult{index, false, 0, 0, 0, message});
    return false;
  }

  // One run of `kernel` (run_once), its time charged to `phase` ("reference" | "candidate").
  StatusOr<std::vector<HostTensor>> run(JobKernel& kernel, const std::vector<HostTensor>& tensors,
                                        const char* phase) {
    PhaseClock::Scope scope(ctx.result.phases, phase);
    return run_once(ctx.device, kernel, tensors);
  }

  bool runtime_error(const std::string& who, const Status& s) {
    ctx.result.fail(model::ErrorKind::kRuntime, who + " failed in " + label() + ": " + s.message());
    return false;
  }

  // Adds the comparisons to the details; false (with a validation error) if any failed.
  bool record(const std::vector<cuda::TensorComparison>& comparisons, const std::string& prefix) {
    TrialResult trial{index, true, 0, 0, 0, ""};
    std::string failed;
    for (const auto& c : comparisons) {
      trial.max_abs_error = std::max(trial.max_abs_error, c.max_abs_error);
      trial.max_rel_error = std::max(trial.max_rel_error, c.max_rel_error);
      trial.mismatch_count += c.mismatch_count;
      details.numel += c.numel;
      if (!details.atol) {
        details.atol = c.tolerance.atol;
        details.rtol = c.tolerance.rtol;
      }
      if (!details.first_mismatch && c.first_mismatch) {
        details.first_mismatch =
            FirstMismatch{index, c.name, c.first_mismatch->index, c.first_mismatch->expected,
                          c.first_mismatch->actual};
      }
      if (!c.passed) {
        trial.passed = false;
        failed += (failed.empty() ? "" : "; ") + c.describe();
      }
    }
    details.max_abs_error = std::max(details.max_abs_error, trial.max_abs_error);
    details.max_rel_error = std::max(details.max_rel_error, trial.max_rel_error);
    details.mismatch_count += trial.mismatch_count;
    if (!trial.passed) {
      trial.message = prefix + failed;
      ctx.result.fail(model::ErrorKind::kMismatch, label() + ", " + trial.message);
    }
    details.per_trial.push_back(trial);
    return trial.passed;
  }

  bool inputs_unchanged(const JobKernel& kernel, const std::vector<HostTensor>& before,
                        const std::vector<HostTensor>& after) {
    const auto names = kernel.tensor_names();
    for (size_t pos : kernel.input_positions()) {
      if (!cuda::same_bits(before[pos], after[pos])) {
        return reject("the kernel modified its input '" + names[pos] +
                          "'; inputs must stay unchanged (write to an output, or declare the "
                          "argument 'inout')",
                      "inputs_unchanged");
      }
    }
    return true;
  }
};

std::vector<HostTensor> tensors_of(const std::vector<cuda::HostArg>& args) {
  std::vector<HostTensor> out;
  out.reserve(args.size());
  for (const auto& a : args)
    out.push_back(a.data);
  return out;
}

cuda::Tolerance tolerance_for(const NativeJob& job, model::DType dtype) {
  return cuda::resolve_tolerance(dtype, job.request.atol, job.request.rtol);
}

bool evaluate_trial(Trial& t, const std::vector<cuda::HostArg>& inputs) {
  JobKernel& kernel = t.ctx.candidate;
  const std::vector<HostTensor> pristine = tensors_of(inputs);
  const auto written = kernel.written_positions();
  const auto names = kernel.tensor_names();
  std::vector<std::vector<HostTensor>> runs;
  for (int variant : {0, 1}) {
    std::vector<HostTensor> tensors = pristine;
    for (size_t pos : written) {
      if (inputs[pos].spec->role == model::ArgRole::kOutput)
        cuda::fill_poison(tensors[pos], variant);
    }
    auto after = t.run(kernel, tensors, "candidate");
    if (!after.is_ok()) return t.runtime_error("the kernel", after.status());
    if (!t.inputs_unchanged(kernel, pristine, *after)) return false;
    runs.push_back(std::move(after).value());
  }
  for (size_t pos : written) {
    if (inputs[pos].spec->role != model::ArgRole::kOutput) continue;
    const HostTensor& a = runs[0][pos];
    const HostTensor& b = runs[1][pos];
    int64_t count = 0;
    int64_t first = -1;
    for (int64_t i = 0; i < a.numel(); ++i) {
      if (cuda::is_poison(a, i, 0) && cuda::is_poison(b, i, 1)) {
        if (first < 0) first = i;
        ++count;
      }
    }
    if (count > 0) {
      return t.reject("output '" + names[pos] + "': " + std::to_string(count) + " of " +
                          std::to_string(a.numel()) +
                          " elements were never written (they kept the poison value in two "
                          "runs; first at " +
                          Json(cuda::unravel_index(first, a.shape)).dump() + ")",
                      "outputs_fully_written");
    }
  }
  std::vector<cuda::TensorComparison> comparisons;
  comparisons.reserve(written.size());
  for (size_t pos : written) {
    comparisons.push_back(cuda::compare_host_tensors(names[pos], runs[0][pos], runs[1][pos],
                                                     tolerance_for(t.ctx.job, runs[0][pos].dtype)));
  }
  if (!t.record(comparisons, "a second run on identical inputs disagrees: ")) {
    t.ctx.result.add_check("deterministic", false, "two runs on identical inputs disagree");
    return false;
  }
  return true;
}

bool compare_trial(Trial& t, const std::vector<cuda::HostArg>& inputs) {
  JobKernel& cand = t.ctx.candidate;
  JobKernel& ref = *t.ctx.reference;
  auto ref_tensors = bind_reference_tensors(ref.io(), inputs);
  if (!ref_tensors.is_ok()) {
    t.ctx.result.fail(
        model::ErrorKind::kRuntime,
        "cannot pass the inputs to the reference kernel: " + ref_tensors.status().message());
    return false;
  }
  auto ref_after = t.run(ref, *ref_tensors, "reference");
  if (!ref_after.is_ok()) return t.runtime_error("the reference kernel", ref_after.status());
  std::vector<HostTensor> expected;
  for (size_t pos : ref.written_positions())
    expected.push_back((*ref_after)[pos]);

  const std::vector<HostTensor> pristine = tensors_of(inputs);
  std::vector<HostTensor> tensors = pristine;
  const auto written = cand.written_positions();
  for (size_t k = 0; k < written.size(); ++k) {
    size_t pos = written[k];
    if (inputs[pos].spec->role != model::ArgRole::kOutput) continue;
    if (k < expected.size() && expected[k].dtype == tensors[pos].dtype &&
        expected[k].shape == tensors[pos].shape) {
      tensors[pos] = cuda::poison_against(expected[k]);
    } else {
      cuda::fill_poison(tensors[pos], 0);
    }
  }
  auto after = t.run(cand, tensors, "candidate");
  if (!after.is_ok()) return t.runtime_error("the kernel", after.status());
  if (written.size() != expected.size()) {
    return t.reject("the kernel writes " + std::to_string(written.size()) +
                    " output(s), the reference " + std::to_string(expected.size()));
  }
  const auto names = cand.tensor_names();
  std::vector<cuda::TensorComparison> comparisons;
  for (size_t k = 0; k < written.size(); ++k) {
    const HostTensor& got = (*after)[written[k]];
    const HostTensor& want = expected[k];
    if (got.dtype != want.dtype) {
      return t.reject("output '" + names[written[k]] + "': dtype mismatch: expected " +
                      std::string(model::to_string(want.dtype)) + ", got " +
                      std::string(model::to_string(got.dtype)));
    }
    if (got.shape != want.shape) {
      return t.reject("output '" + names[written[k]] + "': shape mismatch: expected " +
                      Json(want.shape).dump() + ", got " + Json(got.shape).dump());
    }
    comparisons.push_back(cuda::compare_host_tensors(names[written[k]], want, got,
                                                     tolerance_for(t.ctx.job, want.dtype)));
  }
  if (!t.record(comparisons, "")) return false;
  return t.inputs_unchanged(cand, pristine, *after);
}

}  // namespace

StatusOr<std::vector<HostTensor>> bind_reference_tensors(
    const model::IOContract& reference_io, const std::vector<cuda::HostArg>& defining) {
  std::vector<const cuda::HostArg*> sources;
  for (const auto& a : defining) {
    if (a.spec->role != model::ArgRole::kOutput) sources.push_back(&a);
  }
  size_t next = 0;
  std::vector<HostTensor> out;
  for (const auto& arg : reference_io.args) {
    if (arg.type != model::ArgType::kTensor) continue;
    if (arg.role == model::ArgRole::kOutput) {
      out.push_back(HostTensor::zeros(arg.tensor_spec->dtype, arg.tensor_spec->shape));
      continue;
    }
    if (next >= sources.size()) {
      return invalid_argument("argument '" + arg.name +
                              "': the reference declares more input tensors than the "
                              "candidate's IOContract provides");
    }
    const HostTensor& src = sources[next++]->data;
    if (src.dtype != arg.tensor_spec->dtype || src.shape != arg.tensor_spec->shape) {
      return invalid_argument("argument '" + arg.name + "': the reference declares " +
                              std::string(model::to_string(arg.tensor_spec->dtype)) +
                              Json(arg.tensor_spec->shape).dump() + " but the input is " +
                              std::string(model::to_string(src.dtype)) + Json(src.shape).dump());
    }
    out.push_back(src);
  }
  return out;
}

Json describe_inputs(const model::IOContract& io) {
  Json out = Json::array();
  for (const auto& a : io.args) {
    Json e = {{"name", a.name}, {"role", model::to_string(a.role)}};
    if (a.type == model::ArgType::kTensor) {
      const auto& ts = *a.tensor_spec;
      e["dtype"] = model::to_string(ts.dtype);
      e["shape"] = ts.shape;
      if (a.role != model::ArgRole::kOutput) {
        e["init"] = ts.data   ? "data"
                    : ts.init ? std::string(model::to_string(ts.init->kind))
                              : std::string("default");
      }
    } else {
      e["type"] = model::to_string(a.type);
      e["value"] = a.value;
      if (a.is_meta) e["is_meta"] = true;
    }
    out.push_back(e);
  }
  return out;
}

bool run_correctness(CorrectnessContext& ctx) {
  ctx.result.correctness_details = CorrectnessDetails{};
  CorrectnessDetails& details = *ctx.result.correctness_details;
  details.trials = ctx.job.request.num_correct_trials;
  for (int index = 0; index < details.trials; ++index) {
    Trial trial{ctx, details, index};
    auto inputs = [&] {
      PhaseClock::Scope phase(ctx.result.phases, "inputs");
      return cuda::make_host_inputs(ctx.candidate.io(), *ctx.job.request.seed, index);
    }();
    if (!inputs.is_ok()) {
      ctx.result.fail(model::ErrorKind::kRuntime, "could not build the inputs of " + trial.label() +
                                                      ": " + inputs.status().message());
      return false;
    }
    // Everything of a trial but its kernels' runs is the worker's comparing and checking.
    PhaseClock::Scope phase(ctx.result.phases, "compare");
    bool passed =
        ctx.reference != nullptr ? compare_trial(trial, *inputs) : evaluate_trial(trial, *inputs);
    if (!passed) return false;
    ++details.trials_passed;
  }
  std::vector<const char*> passed = {"inputs_unchanged"};
  if (ctx.reference != nullptr) {
    passed.push_back("outputs_are_own");
  } else {
    passed.insert(passed.end(), {"outputs_dense", "outputs_fully_written", "deterministic"});
  }
  for (const char* name : passed)
    ctx.result.add_check(name, true);
  return true;
}

}  // namespace kforge::cuda_worker
