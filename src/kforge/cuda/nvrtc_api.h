// NVRTC (the CUDA run-time compiler), loaded at run time with dlopen.
//
// Where the library comes from, first match wins:
//   1. Options::library_path (a file, or a directory holding libnvrtc.so.13),
//   2. the environment variable KFORGE_NVRTC_LIB (same forms; the server sets it for its
//      workers to what it found, see nvrtc_locator.h),
//   3. plain dlopen("libnvrtc.so.13") (LD_LIBRARY_PATH, or already loaded, e.g. by torch),
//   4. Options::search_dirs, then /usr/local/cuda/lib64 and $CUDA_HOME/lib64.
// The PyPI wheel's libnvrtc cannot find its libnvrtc-builtins by itself, so the builtins
// next to the library are loaded first. The CUDA headers for `-I` are the `include`
// directory beside the library's `lib` (wheel layout) or /usr/local/cuda/include.
//
// Every nvrtcResult is turned into a Status in exactly one place, `NvrtcApi::check`, which
// attaches the program's log.
//
// Thread-safety: immutable after load(); NVRTC itself is thread-safe per program.
#pragma once

#include <nvrtc.h>

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "kforge/common/status.h"

namespace kforge::cuda {

class NvrtcApi {
 public:
  struct Options {
    std::string library_path;
    std::vector<std::filesystem::path> search_dirs;
  };

  // kUnavailable naming every place that was tried when no libnvrtc loads.
  static StatusOr<std::shared_ptr<const NvrtcApi>> load(const Options& options);

  // OK for NVRTC_SUCCESS. Otherwise "<what>: NVRTC_ERROR_X" followed by the program's log
  // when `program` is given: kInvalidArgument for errors in the user's source or options
  // (compilation, invalid option, bad name expression), kUnavailable for a broken NVRTC
  // installation (builtins missing), kInternal otherwise.
  Status check(nvrtcResult result, const char* what, nvrtcProgram program = nullptr) const;

  // The program's log (warnings and errors), "" when empty or unreadable.
  std::string program_log(nvrtcProgram program) const;

  const std::string& library_path() const { return library_path_; }
  // Directory holding cuda_fp16.h etc. for `-I`; empty when none was found.
  const std::string& include_dir() const { return include_dir_; }
  // "13.0".
  const std::string& version() const { return version_; }
  // Real architectures this NVRTC can compile for (75, 80, 90, ...).
  const std::vector<int>& supported_archs() const { return supported_archs_; }

  decltype(&::nvrtcGetErrorString) nvrtcGetErrorString = nullptr;
  decltype(&::nvrtcVersion) nvrtcVersion = nullptr;
  decltype(&::nvrtcGetNumSupportedArchs) nvrtcGetNumSupportedArchs = nullptr;
  decltype(&::nvrtcGetSupportedArchs) nvrtcGetSupportedArchs = nullptr;
  decltype(&::nvrtcCreateProgram) nvrtcCreateProgram = nullptr;
  decltype(&::nvrtcDestroyProgram) nvrtcDestroyProgram = nullptr;
  decltype(&::nvrtcCompileProgram) nvrtcCompileProgram = nullptr;
  decltype(&::nvrtcGetPTXSize) nvrtcGetPTXSize = nullptr;
  decltype(&::nvrtcGetPTX) nvrtcGetPTX = nullptr;
  decltype(&::nvrtcGetCUBINSize) nvrtcGetCUBINSize = nullptr;
  decltype(&::nvrtcGetCUBIN) nvrtcGetCUBIN = nullptr;
  decltype(&::nvrtcGetProgramLogSize) nvrtcGetProgramLogSize = nullptr;
  decltype(&::nvrtcGetProgramLog) nvrtcGetProgramLog = nullptr;
  decltype(&::nvrtcAddNameExpression) nvrtcAddNameExpression = nullptr;
  decltype(&::nvrtcGetLoweredName) nvrtcGetLoweredName = nullptr;

 private:
  NvrtcApi() = default;
  static StatusOr<std::shared_ptr<const NvrtcApi>> from_handle(void* handle,
                                                               std::string library_path);
  void* handle_ = nullptr;  // never closed
  std::string library_path_;
  std::string include_dir_;
  std::string version_;
  std::vector<int> supported_archs_;
};

}  // namespace kforge::cuda
