#include "kforge/workbench/job_builder.h"

#include <algorithm>
#include <cctype>

#include "kforge/common/json.h"

namespace kforge::workbench {
namespace {

// What both sides share: the inputs from test_input_code and the kwargs marker.
constexpr const char* kInputsHarness = R"py(
def _kf_inputs():
    device = "cuda" if _kf_torch.cuda.is_available() else "cpu"
    scope = {"__name__": "test_input_code", "torch": _kf_torch, "DEVICE": device}
    exec(compile(_KF_TEST_INPUT_CODE, "test_input_code", "exec"), scope)
    if _KF_CASE >= 0:
        make = scope.get("make_inputs")
        if not callable(make):
            raise NameError(
                "test_input_code defines sizes but no function make_inputs(size) returning "
                "args or (args, kwargs) for one size"
            )
        made = make(scope["sizes"][_KF_CASE])
        if isinstance(made, tuple) and len(made) == 2 and isinstance(made[1], dict):
            args, kwargs = made
        else:
            args, kwargs = made, {}
    else:
        if "args" not in scope:
            raise NameError(
                "test_input_code must define args (the list of positional arguments) and may "
                "define kwargs (a dict); or sizes = [...] and make_inputs(size)"
            )
        args, kwargs = scope["args"], scope.get("kwargs") or {}
    if not isinstance(args, (list, tuple)):
        raise TypeError(f"args must be a list or tuple, got {type(args).__name__}")
    if not isinstance(kwargs, dict) or not all(isinstance(k, str) for k in kwargs):
        raise TypeError("kwargs must be a dict with string keys")
    return list(args), dict(kwargs)


def get_inputs():
    args, kwargs = _kf_inputs()
    if kwargs:
        return args + [{"__kforge_kwargs__": kwargs}]
    return args


def get_init_inputs():
    return []


def _kf_split(inputs):
    if inputs and isinstance(inputs[-1], dict) and "__kforge_kwargs__" in inputs[-1]:
        return list(inputs[:-1]), dict(inputs[-1]["__kforge_kwargs__"])
    return list(inputs), {}
)py";

std::string prologue(const std::string& test_input_code, int case_index) {
  return "\n\n# ---- kforge workbench harness: appended by the server, not part of your code ----\n"
         "import torch as _kf_torch\n\n"
         "_KF_TEST_INPUT_CODE = " +
         Json(test_input_code).dump(-1, ' ', false, Json::error_handler_t::replace) +
         "\n_KF_CASE = " + std::to_string(case_index) + "\n" + kInputsHarness;
}

bool is_identifier(const std::string& s) {
  if (s.empty() || std::isdigit(static_cast<unsigned char>(s[0])) != 0) return false;
  for (char c : s) {
    if (std::isalnum(static_cast<unsigned char>(c)) == 0 && c != '_') return false;
  }
  return true;
}

bool is_blank(const std::string& s) {
  for (char c : s) {
    if (std::isspace(static_cast<unsigned char>(c)) == 0) return false;
  }
  return true;
}

}  // namespace

std::string candidate_harness(const std::string& entry, const std::string& test_input_code,
                              int case_index) {
  return prologue(test_input_code, case_index) + "\n_KF_ENTRY = \"" + entry + "\"\n" + R"py(
if not callable(globals().get(_KF_ENTRY)):
    raise NameError(
        f"the kernel file defines no function {_KF_ENTRY}(...): the workbench calls "
        f"{_KF_ENTRY}(*args, **kwargs) with the inputs of test_input_code and checks what it "
        "returns"
    )


class ModelNew(_kf_torch.nn.Module):
    def forward(self, *inputs):
        args, kwargs = _kf_split(inputs)
        return globals()[_KF_ENTRY](*args, **kwargs)
)py";
}

std::string reference_harness(const std::string& test_input_code, int case_index) {
  return prologue(test_input_code, case_index) + R"py(
if not callable(globals().get("reference")):
    raise NameError(
        "reference_code defines no function reference(...): the workbench calls "
        "reference(*args, **kwargs) with the inputs of test_input_code and compares the "
        "kernel's result with what it returns"
    )


class Model(_kf_torch.nn.Module):
    def forward(self, *inputs):
        args, kwargs = _kf_split(inputs)
        return reference(*args, **kwargs)
)py";
}

StatusOr<std::vector<PlannedJob>> plan_jobs(const ExecutionSpec& spec) {
  if (!is_identifier(spec.entry)) {
    return invalid_argument("entry_function '" + spec.entry + "' is not a Python identifier",
                            "entry_function");
  }
  if (is_blank(spec.kernel_source)) {
    return invalid_argument("the kernel code is empty", "code");
  }
  if (is_blank(spec.test_input_code)) {
    return invalid_argument("test_input_code is empty: define args (and kwargs) with the inputs",
                            "test_input_code");
  }
  const bool needs_reference = spec.purpose == Purpose::kValidate;
  if (needs_reference && (!spec.reference_code || is_blank(*spec.reference_code))) {
    return invalid_argument(
        "reference_code is required: define reference(*args, **kwargs) "
        "with the torch computation the kernel must match",
        "reference_code");
  }
  KF_ASSIGN_OR_RETURN(std::vector<InputCase> cases, input_cases(spec.test_input_code));
  const bool with_reference = spec.reference_code.has_value() && !is_blank(*spec.reference_code) &&
                              spec.purpose != Purpose::kRun && spec.purpose != Purpose::kMeasure;
  const bool on_cpu = spec.device == "cpu";
  std::vector<PlannedJob> out;
  for (const InputCase& c : cases) {
    model::JobRequest r;
    r.kind = with_reference ? model::JobKind::kCompare : model::JobKind::kEvaluate;
    r.kernel.kernel_type = model::KernelType::kTorch;
    r.kernel.source_code = spec.kernel_source;
    if (on_cpu && !spec.interpreter_compat.empty()) {
      r.kernel.source_code += "\n\n# ---- kforge: Triton interpreter fix (cpu device) ----\n";
      r.kernel.source_code += spec.interpreter_compat;
    }
    r.kernel.source_code += candidate_harness(spec.entry, spec.test_input_code, c.index);
    if (with_reference) {
      model::KernelCode ref;
      ref.kernel_type = model::KernelType::kTorch;
      ref.source_code = *spec.reference_code + reference_harness(spec.test_input_code, c.index);
      r.reference = std::move(ref);
    }
    switch (spec.purpose) {
      case Purpose::kRun:
        r.num_correct_trials = spec.trials.value_or(1);
        r.measure_performance = false;
        break;
      case Purpose::kValidate:
        r.num_correct_trials = spec.trials.value_or(5);
        r.measure_performance = false;
        break;
      case Purpose::kMeasure:
      case Purpose::kBenchmark:
        r.num_correct_trials = spec.trials.value_or(with_reference ? 3 : 1);
        r.measure_performance = true;
        break;
    }
    if (spec.warmup) r.timing.warmup_calls = *spec.warmup;
    if (spec.rep) {
      r.timing.max_trials = std::max(1, *spec.rep);
      r.timing.min_trials = std::min(r.timing.min_trials, r.timing.max_trials);
    }
    r.timeout_s = on_cpu ? 600.0 : 300.0;
    r.device = spec.device;
    r.atol = spec.atol;
    r.rtol = spec.rtol;
    out.push_back(PlannedJob{c, std::move(r)});
  }
  return out;
}

}  // namespace kforge::workbench
