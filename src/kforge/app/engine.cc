#include "kforge/app/engine.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <set>
#include <sstream>

#include "kforge/common/clock.h"
#include "kforge/common/files.h"
#include "kforge/common/log.h"
#include "kforge/cuda/device_inventory.h"
#include "kforge/cuda/nvrtc_locator.h"
#include "kforge/jobs/device_peaks.h"
#include "kforge/jobs/gpu_counters.h"
#include "kforge/store/open_store.h"
#include "kforge/workers/native_cuda_worker.h"
#include "kforge/workers/python_worker.h"
#include "kforge/workers/sandbox_policy.h"
#include "kforge/workers/worker_env.h"

namespace kforge::app {
namespace {

std::vector<std::string> split_list(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ',')) {
    item.erase(0, item.find_first_not_of(" \t"));
    item.erase(item.find_last_not_of(" \t") + 1);
    if (!item.empty()) out.push_back(item);
  }
  return out;
}

int64_t physical_memory_bytes() {
  long pages = sysconf(_SC_PHYS_PAGES);
  long page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page : int64_t{8} << 30;
}

std::string cpu_model() {
  auto text = read_file("/proc/cpuinfo");
  if (!text.is_ok()) return "cpu";
  std::istringstream in(*text);
  std::string line;
  while (std::getline(in, line)) {
    if (line.starts_with("model name")) {
      auto colon = line.find(':');
      if (colon != std::string::npos) return line.substr(colon + 2);
    }
  }
  return "cpu";
}

}  // namespace

std::string find_ncu(const std::string& configured) {
  if (!configured.empty()) return ::access(configured.c_str(), X_OK) == 0 ? configured : "";
  if (std::string found = find_program("ncu"); !found.empty()) return found;
  const char* toolkit = "/usr/local/cuda/bin/ncu";
  return ::access(toolkit, X_OK) == 0 ? std::string(toolkit) : std::string();
}

std::string default_python() {
  if (const char* p = std::getenv("KFORGE_PYTHON"); p != nullptr && *p != '\0') return p;  // NOLINT
  if (const char* home = std::getenv("HOME"); home != nullptr) {                           // NOLINT
    std::filesystem::path venv = std::filesystem::path(home) / ".cache/kforge/venv/bin/python";
    if (::access(venv.c_str(), X_OK) == 0) return venv.string();
  }
  return "python3";
}

StatusOr<std::filesystem::path> find_worker_path() {
  if (const char* p = std::getenv("KFORGE_WORKER_PATH"); p != nullptr && *p != '\0') {  // NOLINT
    return std::filesystem::path(p);
  }
  KF_ASSIGN_OR_RETURN(auto exe, self_executable());
  // The build tree (<checkout>/build/<preset>/bin/kforge: <checkout>/python) or an install
  // (<prefix>/bin/kforge: <prefix>/share/kforge/python).
  for (auto dir = exe.parent_path(); !dir.empty() && dir != dir.root_path();
       dir = dir.parent_path()) {
    for (auto candidate : {dir / "python", dir / "share" / "kforge" / "python"}) {
      if (std::filesystem::exists(candidate / "kforge_worker" / "__init__.py")) return candidate;
    }
  }
  return not_found("cannot find python/kforge_worker next to " + exe.string() +
                   "; set --worker-path or KFORGE_WORKER_PATH");
}

namespace {

std::filesystem::path find_library_near(const std::filesystem::path& executable,
                                        const char* env_name, const char* file_name) {
  if (const char* p = std::getenv(env_name); p != nullptr && *p != '\0') {  // NOLINT
    return p;
  }
  const auto dir = executable.parent_path();
  for (const auto& candidate : {dir / file_name, dir.parent_path() / "lib" / file_name}) {
    std::error_code ec;
    if (std::filesystem::is_regular_file(candidate, ec)) return candidate;
  }
  return {};
}

}  // namespace

std::filesystem::path find_cuda_abi_library(const std::filesystem::path& executable) {
  return find_library_near(executable, "KFORGE_CUDA_ABI", "libkforge_cuda.so");
}

std::filesystem::path find_sandbox_library(const std::filesystem::path& executable) {
  return find_library_near(executable, "KFORGE_SANDBOX_LIB", "libkforge_sandbox.so");
}

namespace {

// Where the server's helpers live, resolved once from the options and the environment.
struct Paths {
  std::filesystem::path data_dir;     // absolute
  std::filesystem::path worker_path;  // holds python/kforge_worker
  std::string python;                 // the workers' interpreter
  std::filesystem::path executable;   // the kforge binary (`worker cuda`)
  std::string nvrtc_library;          // empty: the library path
  std::string cuda_abi;               // libkforge_cuda.so; empty: not built
  std::string sandbox_library;        // libkforge_sandbox.so; empty: not built
  std::string ncu;                    // Nsight Compute; empty: none
};

StatusOr<Paths> resolve_paths(const EngineOptions& options, const std::filesystem::path& data_dir) {
  Paths paths;
  paths.data_dir = data_dir;
  paths.worker_path = options.worker_path;
  if (paths.worker_path.empty()) {
    KF_ASSIGN_OR_RETURN(paths.worker_path, find_worker_path());
  }
  paths.python = options.python.empty() ? default_python() : options.python;
  paths.executable = options.executable;
  if (paths.executable.empty()) {
    KF_ASSIGN_OR_RETURN(paths.executable, self_executable());
  }
  // Both workers find NVRTC through KFORGE_NVRTC_LIB: the worker Python's CUDA wheels first.
  paths.nvrtc_library = cuda::find_nvrtc_library(paths.python).string();
  paths.cuda_abi = find_cuda_abi_library(paths.executable).string();
  paths.sandbox_library = find_sandbox_library(paths.executable).string();
  paths.ncu = find_ncu(options.ncu);
  KF_LOG_INFO("cuda: nvrtc={} c_abi={}",
              paths.nvrtc_library.empty() ? "(library path)" : paths.nvrtc_library,
              paths.cuda_abi.empty() ? "(not built)" : paths.cuda_abi);
  return paths;
}

// The GPUs visible to this process, and why there are none.
struct Gpus {
  std::vector<cuda::GpuInfo> list;
  std::string why_none;
};

// Which devices to serve (--devices).
struct DeviceSelection {
  bool cpu = false;
  bool all_gpus = false;
  std::set<std::string> named;  // cuda:N
};

StatusOr<DeviceSelection> select_devices(const std::string& devices, const Gpus& gpus) {
  DeviceSelection selection;
  for (const auto& d : split_list(devices)) {
    if (d == "all") {
      selection.cpu = true;
      selection.all_gpus = true;
    } else if (d == "cpu") {
      selection.cpu = true;
    } else if (d == "gpus" || d == "gpu") {
      selection.all_gpus = true;
    } else if (d.starts_with("cuda:")) {
      selection.named.insert(d);
    } else {
      return invalid_argument("unknown device '" + d + "' (expected all, cpu, gpus or cuda:N)",
                              "--devices");
    }
  }
  for (const auto& name : selection.named) {
    bool found = false;
    for (const auto& g : gpus.list)
      found = found || name == "cuda:" + std::to_string(g.index);
    if (!found) {
      return invalid_argument(
          "device " + name + " is not visible (" +
              (gpus.list.empty() ? gpus.why_none
                                 : std::to_string(gpus.list.size()) + " GPU(s) found") +
              ")",
          "--devices");
    }
  }
  return selection;
}

// Isolation of every job process: identities, cgroups, jails.
workers::SandboxOptions sandbox_options_for(const EngineOptions& options, const Paths& paths) {
  workers::SandboxOptions sandbox_options;
  sandbox_options.mode = options.sandbox;
  sandbox_options.data_dir = paths.data_dir;
  sandbox_options.memory_bytes = options.child_memory_bytes;
  sandbox_options.pids_max = options.job_pids_max;
  sandbox_options.uid_base = options.sandbox_uid_base;
  sandbox_options.kernel_cache = options.kernel_cache;
  sandbox_options.cupy_cache_dir = options.cupy_cache_dir;
  sandbox_options.tmp_bytes = options.job_tmp_bytes;
  // What jailed jobs see of the host (workers/root_plan.h): the workers' Python as the
  // zygote runs it, the worker package, kforge's own files, CUDA, Nsight Compute.
  workers::RootPlanOptions& root = sandbox_options.root;
  root.python = paths.python;
  root.worker_env = workers::base_worker_env(options.worker_env);
  root.worker_env["PYTHONPATH"] = paths.worker_path.string();
  root.worker_env["PYTHONSAFEPATH"] = "1";
  root.worker_package = paths.worker_path / "kforge_worker";
  root.kforge_files = {paths.executable};
  for (const std::string& lib : {paths.cuda_abi, paths.sandbox_library}) {
    if (!lib.empty()) root.kforge_files.emplace_back(lib);
  }
  root.nvrtc_library = paths.nvrtc_library;
  root.ncu = paths.ncu;
  root.extra = options.jail_read_only;
  return sandbox_options;
}

// What the workers of every device share.
struct WorkerContext {
  const EngineOptions& options;
  const Paths& paths;
  const Gpus& gpus;
  std::shared_ptr<workers::SandboxPolicy> sandbox;
  workers::ChildLimits limits;
};

// A device's gate (workers/device_gate.h), shared by its two workers. Deeper than 1 it
// pipelines the jobs (`pipelined`: shared holders for correctness phases up to the depth,
// timing exclusive). At depth 1 jobs run one at a time, and the gate is still there for
// their timed regions (`timing`): a job's timing takes it alone, and processes warming up
// meanwhile are stopped (a replacement child's CUDA context and warm-up launches beside a
// timed region slowed torch references by 24-32 % on an H100).
struct DeviceGates {
  std::shared_ptr<workers::DeviceGate> pipelined;  // null at depth 1
  std::shared_ptr<workers::DeviceGate> timing;     // never null: `pipelined` when set

  static DeviceGates make(const std::string& device, int depth) {
    DeviceGates g;
    if (depth > 1) g.pipelined = std::make_shared<workers::DeviceGate>(device, depth);
    g.timing = g.pipelined ? g.pipelined : std::make_shared<workers::DeviceGate>(device, 1);
    return g;
  }
};

std::unique_ptr<workers::Worker> make_python_worker(const WorkerContext& c,
                                                    const std::string& device,
                                                    const cuda::GpuInfo* gpu,
                                                    const DeviceGates& gates) {
  workers::PythonWorkerOptions o;
  o.gate = gates.pipelined;
  o.timing_gate = gates.timing;
  o.device = device;
  o.python = c.paths.python;
  o.worker_path = c.paths.worker_path;
  o.data_dir = c.paths.data_dir;
  o.extra_env_names = c.options.worker_env;
  o.limits = c.limits;
  o.warm_children = gpu != nullptr ? c.options.warm_children_gpu : c.options.warm_children_cpu;
  o.max_warm_children =
      gpu != nullptr ? c.options.max_warm_children_gpu : c.options.max_warm_children_cpu;
  o.jobs_per_judge = c.options.jobs_per_judge;
  o.cuda_abi_library = c.paths.cuda_abi;
  o.nvrtc_library = c.paths.nvrtc_library;
  o.sandbox_library = c.paths.sandbox_library;
  o.sandbox = c.sandbox;
  o.cupy_cache_dir = c.options.cupy_cache_dir;
  if (gpu != nullptr) {
    o.gpu_minor = workers::nvidia_device_minor(gpu->pci_bus_id);
    o.cuda_visible_device = gpu->uuid;
    o.triton_arch = std::to_string(gpu->cc_major * 10 + gpu->cc_minor);
    o.device_info = gpu->to_json();
  } else {
    o.child_address_space_bytes = static_cast<uint64_t>(c.limits.memory_limit_bytes) * 2;
  }
  return std::make_unique<workers::PythonWorker>(std::move(o));
}

std::unique_ptr<workers::Worker> make_native_worker(const WorkerContext& c,
                                                    const std::string& device,
                                                    const cuda::GpuInfo* gpu,
                                                    const DeviceGates& gates) {
  workers::NativeCudaWorkerOptions o;
  o.gate = gates.pipelined;
  o.timing_gate = gates.timing;
  o.device = device;
  o.executable = c.paths.executable;
  o.data_dir = c.paths.data_dir;
  o.nvrtc_library = c.paths.nvrtc_library;
  o.extra_env_names = c.options.worker_env;
  o.limits = c.limits;
  o.warm_children =
      gpu != nullptr ? c.options.warm_cuda_workers_gpu : c.options.warm_cuda_workers_cpu;
  o.sandbox = c.sandbox;
  if (gpu != nullptr) {
    o.gpu_minor = workers::nvidia_device_minor(gpu->pci_bus_id);
    o.cuda_visible_device = gpu->uuid;
    o.device_info = gpu->to_json();
  } else {
    o.why_no_gpu = c.gpus.list.empty() ? c.gpus.why_none : std::string();
  }
  return std::make_unique<workers::NativeCudaWorker>(std::move(o));
}

// The served devices, each with its two workers (python, cuda).
StatusOr<std::vector<jobs::DeviceWorkers>> make_devices(const WorkerContext& c,
                                                        const DeviceSelection& selection) {
  std::vector<jobs::DeviceWorkers> devices;
  if (selection.cpu) {
    jobs::DeviceWorkers d;
    // Pipelined only in tests (--test-cpu-pipeline-depth): compiles beside a timed CPU
    // kernel would skew it.
    const DeviceGates gates = DeviceGates::make("cpu", c.options.test_cpu_pipeline_depth);
    const auto& gate = gates.pipelined;
    d.device = {"cpu", false, gate ? c.options.test_cpu_pipeline_depth : 1};
    d.facts = Json{{"kind", "cpu"},
                   {"name", cpu_model()},
                   {"threads", static_cast<int>(sysconf(_SC_NPROCESSORS_ONLN))},
                   {"memory_bytes", physical_memory_bytes()}};
    if (gate) d.facts["pipeline_depth"] = c.options.test_cpu_pipeline_depth;
    d.by_type["python"] = make_python_worker(c, "cpu", nullptr, gates);
    d.by_type["cuda"] = make_native_worker(c, "cpu", nullptr, gates);
    d.gate = gates.timing;
    devices.push_back(std::move(d));
  }
  for (const auto& g : c.gpus.list) {
    std::string name = "cuda:" + std::to_string(g.index);
    if (!selection.all_gpus && !selection.named.contains(name)) continue;
    jobs::DeviceWorkers d;
    // One grant per GPU, shared by its two workers: pipelined stages when deeper than 1.
    const DeviceGates gates = DeviceGates::make(name, c.options.pipeline_depth);
    const auto& gate = gates.pipelined;
    d.device = {name, true, gate ? c.options.pipeline_depth : 1};
    d.facts = g.to_json();
    d.facts["kind"] = "gpu";
    if (gate) d.facts["pipeline_depth"] = c.options.pipeline_depth;
    d.by_type["python"] = make_python_worker(c, name, &g, gates);
    d.by_type["cuda"] = make_native_worker(c, name, &g, gates);
    d.gate = gates.timing;
    d.measure_peaks = [peaks = jobs::PeaksOptions{c.paths.data_dir / "cache", c.paths.python,
                                                  c.paths.worker_path, c.options.worker_env},
                       uuid = g.uuid]() { return jobs::load_or_measure_peaks(peaks, uuid); };
    devices.push_back(std::move(d));
  }
  if (devices.empty()) return invalid_argument("no devices to serve", "--devices");
  return devices;
}

store::StoreOptions store_options_for(const EngineOptions& options,
                                      const std::filesystem::path& data_dir) {
  store::StoreOptions store_options;
  store_options.url = options.store;
  store_options.sqlite_path = data_dir / "kforge.db";
  store_options.sqlite_fsync = options.store_fsync;
  store_options.node_id = options.node_id;
  store_options.lease = std::chrono::seconds(options.lease_seconds);
  return store_options;
}

jobs::JobServiceImpl::Options service_options_for(const EngineOptions& options, const Paths& paths,
                                                  const Gpus& gpus,
                                                  const workers::SandboxPolicy& sandbox) {
  jobs::JobServiceImpl::Options service_options;
  service_options.max_attempts = options.max_attempts;
  service_options.heartbeat = std::chrono::milliseconds(options.lease_seconds * 1000 / 3);
  service_options.queue = options.queue;
  service_options.version = options.version;
  service_options.sandbox = sandbox.describe();
  service_options.device_metrics_default = options.device_metrics_default;
  service_options.ncu = paths.ncu;
  service_options.reference_cache_dir = sandbox.reference_cache_dir();
  // Captured output keeps what --output-cap-kb allows, even above the default text cap.
  service_options.result_limits.max_text_bytes =
      std::max(service_options.result_limits.max_text_bytes, options.output_cap_bytes);
  if (paths.ncu.empty()) {
    service_options.device_metrics_unavailable =
        options.ncu.empty()
            ? "Nsight Compute (ncu) is not installed on this server: not on PATH, not "
              "/usr/local/cuda/bin/ncu (install it, or name it with --ncu)"
            : "the ncu given with --ncu (" + options.ncu + ") is not an executable";
  } else if (!gpus.list.empty()) {
    service_options.device_metrics_unavailable =
        jobs::gpu_counters_denied_reason(jobs::profiling_admin_only("/proc/driver/nvidia/params"),
                                         sandbox.jailing(), ::geteuid() == 0);
  }
  if (!service_options.device_metrics_unavailable.empty() && options.device_metrics_default) {
    KF_LOG_WARN("--device-metrics: {}", service_options.device_metrics_unavailable);
  }
  return service_options;
}

}  // namespace

StatusOr<Engine> build_engine(const EngineOptions& options) {
  std::error_code ec;
  auto data_dir = std::filesystem::absolute(options.data_dir, ec);
  if (ec) return invalid_argument("bad data directory: " + ec.message(), "--data-dir");
  // Everything the server creates (the store, its journals, caches) is its own: jobs run as
  // other uids and must not read it even where a path to it leaks.
  ::umask(077);
  Engine engine;
  KF_ASSIGN_OR_RETURN(engine.data_dir_lock, DataDirLock::acquire(data_dir));
  KF_ASSIGN_OR_RETURN(const Paths paths, resolve_paths(options, data_dir));

  Gpus gpus;
  gpus.list = cuda::list_gpus(&gpus.why_none);
  if (gpus.list.empty()) KF_LOG_INFO("no GPU: {}", gpus.why_none);
  KF_ASSIGN_OR_RETURN(const DeviceSelection selection, select_devices(options.devices, gpus));

  KF_ASSIGN_OR_RETURN(std::shared_ptr<workers::SandboxPolicy> sandbox,
                      workers::SandboxPolicy::create(sandbox_options_for(options, paths)));
  WorkerContext context{options, paths, gpus, sandbox, {}};
  context.limits.output_cap_bytes = options.output_cap_bytes;
  context.limits.memory_limit_bytes =
      options.child_memory_bytes > 0 ? options.child_memory_bytes : physical_memory_bytes() / 4 * 3;
  KF_ASSIGN_OR_RETURN(std::vector<jobs::DeviceWorkers> devices, make_devices(context, selection));

  KF_ASSIGN_OR_RETURN(auto store, store::open_store(store_options_for(options, data_dir)));
  for (const auto& d : devices)
    KF_LOG_INFO("device {} ready to serve", d.device.name);
  engine.service = std::make_unique<jobs::JobServiceImpl>(
      service_options_for(options, paths, gpus, *sandbox), std::move(store), std::move(devices),
      SystemClock::instance());
  return engine;
}

}  // namespace kforge::app
