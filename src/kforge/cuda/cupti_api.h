// CUPTI (the CUDA profiling tools interface), loaded at run time with dlopen, for the
// activity API only: the device's own start/end timestamps of the kernels a timed window
// launched (kernel_activity.h).
//
// Where the library comes from, first match wins:
//   1. the environment variable KFORGE_CUPTI_LIB (a file, or a directory holding it),
//   2. the directory of the NVRTC library the worker uses (KFORGE_NVRTC_LIB): the CUDA 13
//      wheels keep libcupti.so.13 beside libnvrtc.so.13 in nvidia/cu13/lib,
//   3. plain dlopen("libcupti.so.13") (LD_LIBRARY_PATH, or already loaded),
//   4. /usr/local/cuda/extras/CUPTI/lib64, /usr/local/cuda/targets/x86_64-linux/lib,
//      /usr/local/cuda/lib64.
// A library whose cuptiGetVersion is older than the headers kforge was built with is
// refused: activity records are read with the headers' layouts.
//
// Every CUptiResult is turned into a Status in exactly one place, `CuptiApi::check`.
//
// Thread-safety: immutable after load().
#pragma once

#include <cupti.h>

#include <memory>
#include <string>

#include "kforge/common/status.h"

namespace kforge::cuda {

class CuptiApi {
 public:
  // The process-wide table, loaded once; kUnavailable naming what was tried.
  static StatusOr<std::shared_ptr<const CuptiApi>> load();

  // OK for CUPTI_SUCCESS, else "<what>: CUPTI_ERROR_X (code)": kUnavailable when profiling
  // is not permitted or not supported (CUPTI_ERROR_INSUFFICIENT_PRIVILEGES,
  // CUPTI_ERROR_NOT_SUPPORTED, _NOT_INITIALIZED, _NOT_COMPATIBLE, another profiler attached,
  // a virtualised device), kInternal otherwise.
  Status check(CUptiResult result, const char* what) const;

  const std::string& library_path() const { return library_path_; }
  uint32_t version() const { return version_; }

  decltype(&::cuptiGetResultString) cuptiGetResultString = nullptr;
  decltype(&::cuptiGetVersion) cuptiGetVersion = nullptr;
  decltype(&::cuptiActivityRegisterCallbacks) cuptiActivityRegisterCallbacks = nullptr;
  decltype(&::cuptiActivityEnable) cuptiActivityEnable = nullptr;
  decltype(&::cuptiActivityDisable) cuptiActivityDisable = nullptr;
  decltype(&::cuptiActivityFlushAll) cuptiActivityFlushAll = nullptr;
  decltype(&::cuptiActivityGetNextRecord) cuptiActivityGetNextRecord = nullptr;
  decltype(&::cuptiActivityGetNumDroppedRecords) cuptiActivityGetNumDroppedRecords = nullptr;
  decltype(&::cuptiActivityPushExternalCorrelationId) cuptiActivityPushExternalCorrelationId =
      nullptr;
  decltype(&::cuptiActivityPopExternalCorrelationId) cuptiActivityPopExternalCorrelationId =
      nullptr;

 private:
  CuptiApi() = default;
  static StatusOr<std::shared_ptr<const CuptiApi>> load_uncached();
  static StatusOr<std::shared_ptr<const CuptiApi>> from_handle(void* handle, std::string path);
  void* handle_ = nullptr;  // never closed: CUPTI keeps threads and callbacks of its own
  std::string library_path_;
  uint32_t version_ = 0;
};

}  // namespace kforge::cuda
