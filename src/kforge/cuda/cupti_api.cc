#include "kforge/cuda/cupti_api.h"

#include <dlfcn.h>

#include <cstdlib>
#include <filesystem>
#include <optional>
#include <vector>

#include "kforge/common/thread_annotations.h"

namespace kforge::cuda {
namespace {

namespace fs = std::filesystem;

constexpr const char* kLibraryName = "libcupti.so.13";

template <typename Fn>
Status resolve(void* handle, const char* symbol, Fn& out) {
  void* p = dlsym(handle, symbol);
  if (p == nullptr) return unavailable(std::string("libcupti lacks ") + symbol);
  out = reinterpret_cast<Fn>(p);
  return Status::ok();
}

// A file, or the library inside a directory; empty when neither exists.
fs::path library_in(const fs::path& file_or_dir) {
  std::error_code ec;
  if (fs::is_directory(file_or_dir, ec)) {
    fs::path candidate = file_or_dir / kLibraryName;
    return fs::is_regular_file(candidate, ec) ? candidate : fs::path();
  }
  return fs::is_regular_file(file_or_dir, ec) ? file_or_dir : fs::path();
}

std::string env(const char* name) {
  const char* v = std::getenv(name);  // NOLINT(concurrency-mt-unsafe): read-only use
  return v != nullptr ? std::string(v) : std::string();
}

}  // namespace

StatusOr<std::shared_ptr<const CuptiApi>> CuptiApi::load() {
  static Mutex mu;
  static std::optional<StatusOr<std::shared_ptr<const CuptiApi>>> loaded GUARDED_BY(mu);
  MutexLock lock(mu);
  if (!loaded) loaded.emplace(load_uncached());
  return *loaded;
}

StatusOr<std::shared_ptr<const CuptiApi>> CuptiApi::load_uncached() {
  std::vector<std::string> tried;
  auto try_path = [&](const fs::path& path) -> void* {
    if (path.empty()) return nullptr;
    tried.push_back(path.string());
    return dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  };
  std::vector<fs::path> candidates;
  if (std::string p = env("KFORGE_CUPTI_LIB"); !p.empty()) candidates.push_back(library_in(p));
  if (std::string p = env("KFORGE_NVRTC_LIB"); !p.empty()) {
    std::error_code ec;
    const fs::path nvrtc(p);
    candidates.push_back(library_in(fs::is_directory(nvrtc, ec) ? nvrtc : nvrtc.parent_path()));
  }
  for (const auto& path : candidates) {
    if (void* h = try_path(path)) return from_handle(h, path.string());
  }
  tried.emplace_back(kLibraryName);
  if (void* h = dlopen(kLibraryName, RTLD_NOW | RTLD_LOCAL)) return from_handle(h, kLibraryName);
  for (const char* dir : {"/usr/local/cuda/extras/CUPTI/lib64",
                          "/usr/local/cuda/targets/x86_64-linux/lib", "/usr/local/cuda/lib64"}) {
    const fs::path path = library_in(dir);
    if (void* h = try_path(path)) return from_handle(h, path.string());
  }
  std::string list;
  for (const auto& t : tried)
    list += (list.empty() ? "" : ", ") + t;
  return unavailable("no CUPTI library (" + std::string(kLibraryName) + ") found; tried " + list +
                     "; set KFORGE_CUPTI_LIB");
}

StatusOr<std::shared_ptr<const CuptiApi>> CuptiApi::from_handle(void* handle, std::string path) {
  std::shared_ptr<CuptiApi> api(new CuptiApi());
  api->handle_ = handle;
  api->library_path_ = std::move(path);
#define KF_RESOLVE(name) KF_RETURN_IF_ERROR(resolve(handle, #name, api->name))
  KF_RESOLVE(cuptiGetResultString);
  KF_RESOLVE(cuptiGetVersion);
  KF_RESOLVE(cuptiActivityRegisterCallbacks);
  KF_RESOLVE(cuptiActivityEnable);
  KF_RESOLVE(cuptiActivityDisable);
  KF_RESOLVE(cuptiActivityFlushAll);
  KF_RESOLVE(cuptiActivityGetNextRecord);
  KF_RESOLVE(cuptiActivityGetNumDroppedRecords);
  KF_RESOLVE(cuptiActivityPushExternalCorrelationId);
  KF_RESOLVE(cuptiActivityPopExternalCorrelationId);
#undef KF_RESOLVE
  KF_RETURN_IF_ERROR(api->check(api->cuptiGetVersion(&api->version_), "cuptiGetVersion"));
  if (api->version_ < CUPTI_API_VERSION) {
    return unavailable(api->library_path_ + " is CUPTI API version " +
                       std::to_string(api->version_) + ", older than the " +
                       std::to_string(CUPTI_API_VERSION) + " kforge was built with");
  }
  return std::shared_ptr<const CuptiApi>(std::move(api));
}

Status CuptiApi::check(CUptiResult result, const char* what) const {
  if (result == CUPTI_SUCCESS) return Status::ok();
  const char* text = nullptr;
  if (cuptiGetResultString != nullptr) cuptiGetResultString(result, &text);
  std::string message = std::string(what) + ": " + (text != nullptr ? text : "CUPTI error") + " (" +
                        std::to_string(static_cast<int>(result)) + ")";
  ErrorCode code = ErrorCode::kInternal;
  if (result == CUPTI_ERROR_INSUFFICIENT_PRIVILEGES || result == CUPTI_ERROR_NOT_SUPPORTED ||
      result == CUPTI_ERROR_NOT_INITIALIZED || result == CUPTI_ERROR_NOT_COMPATIBLE ||
      result == CUPTI_ERROR_MULTIPLE_SUBSCRIBERS_NOT_SUPPORTED ||
      result == CUPTI_ERROR_VIRTUALIZED_DEVICE_NOT_SUPPORTED) {
    code = ErrorCode::kUnavailable;
  }
  return {code, std::move(message)};
}

}  // namespace kforge::cuda
