#include "engine_flags.h"

#include <pthread.h>

#include "version.h"

namespace kforge::app {

void add_engine_flags(CLI::App& cmd, EngineFlags& f, std::string_view devices_help) {
  cmd.add_option("--devices", f.devices, std::string(devices_help))
      ->envname("KFORGE_DEVICES")
      ->capture_default_str();
  cmd.add_option("--python", f.python,
                 "Python interpreter with torch and triton (default: KFORGE_PYTHON, "
                 "~/.cache/kforge/venv/bin/python, python3)");
  cmd.add_option("--worker-path", f.worker_path,
                 "Directory containing kforge_worker/ (default: found next to the binary)")
      ->envname("KFORGE_WORKER_PATH");
  cmd.add_option("--warm-children", f.warm_children_gpu,
                 "Job processes kept forked and warm per GPU (each holds a CUDA context)")
      ->check(CLI::Range(1, 16))
      ->capture_default_str();
  cmd.add_option("--warm-children-cpu", f.warm_children_cpu,
                 "Job processes kept forked and warm for the cpu device")
      ->check(CLI::Range(1, 16))
      ->capture_default_str();
  cmd.add_option("--warm-cuda-workers", f.warm_cuda_workers_gpu,
                 "Native CUDA worker processes (for `cuda` kernels) kept started per GPU")
      ->check(CLI::Range(1, 16))
      ->capture_default_str();
  cmd.add_option("--warm-cuda-workers-cpu", f.warm_cuda_workers_cpu,
                 "Native CUDA worker processes kept started for the cpu device")
      ->check(CLI::Range(1, 16))
      ->capture_default_str();
  cmd.add_option("--worker-env", f.worker_env,
                 "Extra environment variable to pass to workers (repeatable; secrets never)");
  cmd.add_flag("--device-metrics", f.device_metrics,
               "Profile every timed GPU kernel once under Nsight Compute (the default of a "
               "request's enable_device_metrics)")
      ->envname("ENABLE_DEVICE_METRICS");
  cmd.add_option("--ncu", f.ncu,
                 "Nsight Compute executable (default: ncu on PATH, else /usr/local/cuda/bin/ncu)")
      ->envname("KFORGE_NCU");
}

jobs::EngineOptions engine_options(const EngineFlags& f) {
  jobs::EngineOptions eo;
  eo.devices = f.devices;
  eo.python = f.python;
  eo.worker_path = f.worker_path;
  eo.worker_env = f.worker_env;
  eo.warm_children_gpu = f.warm_children_gpu;
  eo.warm_children_cpu = f.warm_children_cpu;
  eo.warm_cuda_workers_gpu = f.warm_cuda_workers_gpu;
  eo.warm_cuda_workers_cpu = f.warm_cuda_workers_cpu;
  eo.version = std::string(kVersion);
  eo.device_metrics = f.device_metrics;
  eo.ncu = f.ncu;
  return eo;
}

sigset_t block_termination_signals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  ::signal(SIGPIPE, SIG_IGN);
  return signals;
}

}  // namespace kforge::app
