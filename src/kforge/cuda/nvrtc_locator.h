// Where the server looks for libnvrtc on behalf of its workers, without loading it: the
// CUDA wheels of the worker's Python (site-packages/nvidia/cu13/lib, the layout of the
// `nvidia-cuda-nvrtc` wheel that torch depends on), then the toolkit in /usr/local/cuda.
// The result is handed to the workers as KFORGE_NVRTC_LIB (see nvrtc_api.h).
#pragma once

#include <filesystem>
#include <string>
#include <vector>

namespace kforge::cuda {

// Directories that may hold libnvrtc.so.13 for `python` (an interpreter path or a name
// looked up in PATH), most specific first.
std::vector<std::filesystem::path> nvrtc_search_dirs(const std::string& python);

// The first libnvrtc.so.13 (or .12) file in those directories, then in /usr/local/cuda;
// empty when there is none (the worker then tries the library path).
std::filesystem::path find_nvrtc_library(const std::string& python);

}  // namespace kforge::cuda
