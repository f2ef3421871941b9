// The environment of worker processes, built from an allow-list so server secrets (the API
// token, database passwords, cloud credentials) never reach kernel code.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace kforge::workers {

// Variables copied from the server's environment when set: PATH, HOME, USER, LANG, LC_*,
// TZ, TMPDIR, LD_LIBRARY_PATH, CUDA_HOME, CUDA_PATH, CUDA_CACHE_PATH, NVIDIA_*, CC, CXX,
// TRITON_* (except TRITON_INTERPRET), TORCH_CUDA_ARCH_LIST, MAX_JOBS, OMP_NUM_THREADS,
// plus `extra_names` (from --worker-env). Never anything named *TOKEN*, *SECRET*,
// *PASSWORD*, *KEY* or KFORGE_*.
std::map<std::string, std::string> base_worker_env(const std::vector<std::string>& extra_names);

// True for names that must never be passed to a worker.
bool is_secret_env_name(const std::string& name);

}  // namespace kforge::workers
