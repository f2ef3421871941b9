// The measured peaks of a GPU (bandwidth, GEMM FLOP/s) for the roofline (roofline.h):
// measured once per device by trusted code and cached in <data-dir>/cache/peaks-<uuid>.json.
//
// The measurement is `python -m kforge_worker measure-peaks`
// (python/kforge_worker/timing/peaks.py):
// a process of its own that imports no user code, started with the workers' environment
// allow-list and CUDA_VISIBLE_DEVICES set to the GPU. The server runs it on the device's
// runner thread before the device's first job, so no job shares the GPU with it.
//
// Thread-safety: load_or_measure_peaks may run concurrently for different GPUs.
#pragma once

#include <chrono>
#include <filesystem>
#include <string>
#include <vector>

#include "kforge/common/json.h"
#include "kforge/common/status.h"

namespace kforge::jobs {

struct PeaksOptions {
  std::filesystem::path cache_dir;    // <data-dir>/cache
  std::string python;                 // the workers' interpreter
  std::filesystem::path worker_path;  // the directory holding kforge_worker/
  std::vector<std::string> extra_env_names;
  std::chrono::seconds timeout{180};
};

// The cached peaks of the GPU `uuid` when the cache file exists and names that GPU, else
// measured now and cached. The measurement's output goes to peaks-<uuid>.log beside it.
StatusOr<Json> load_or_measure_peaks(const PeaksOptions& options, const std::string& uuid);

// The cache file of a GPU.
std::filesystem::path peaks_cache_path(const std::filesystem::path& cache_dir,
                                       const std::string& uuid);

}  // namespace kforge::jobs
