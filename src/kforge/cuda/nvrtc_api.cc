#include "kforge/cuda/nvrtc_api.h"

#include <dlfcn.h>
#include <link.h>

#include <cstdlib>
#include <system_error>

namespace kforge::cuda {
namespace {

namespace fs = std::filesystem;

constexpr const char* kLibraryNames[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};

#define KF_NVRTC_STR(x) #x
#define KF_NVRTC_SYMBOL(x) KF_NVRTC_STR(x)

template <typename Fn>
Status resolve(void* handle, const char* symbol, Fn& out) {
  void* p = dlsym(handle, symbol);
  if (p == nullptr) return unavailable(std::string("libnvrtc lacks ") + symbol);
  out = reinterpret_cast<Fn>(p);
  return Status::ok();
}

bool is_file(const fs::path& p) {
  std::error_code ec;
  return fs::is_regular_file(p, ec);
}

// A file, or the first library name present in a directory; empty when neither.
fs::path library_in(const fs::path& file_or_dir) {
  std::error_code ec;
  if (fs::is_directory(file_or_dir, ec)) {
    for (const char* name : kLibraryNames) {
      if (is_file(file_or_dir / name)) return file_or_dir / name;
    }
    return {};
  }
  return is_file(file_or_dir) ? file_or_dir : fs::path();
}

// The directory the loaded library really lives in.
fs::path loaded_dir(void* handle) {
  link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) != 0 || map == nullptr || map->l_name == nullptr) {
    return {};
  }
  std::error_code ec;
  fs::path real = fs::canonical(map->l_name, ec);
  return ec ? fs::path(map->l_name).parent_path() : real.parent_path();
}

// The wheel's libnvrtc dlopens "libnvrtc-builtins.so.<M>.<m>" by name and has no RUNPATH:
// loading the file beside it first makes that name resolve.
void preload_builtins(const fs::path& dir) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    std::string name = entry.path().filename().string();
    if (name.starts_with("libnvrtc-builtins.so.") && name.find(".alt.") == std::string::npos) {
      dlopen(entry.path().c_str(), RTLD_NOW | RTLD_GLOBAL);
    }
  }
}

std::string find_include_dir(const fs::path& lib_dir) {
  std::vector<fs::path> candidates = {lib_dir.parent_path() / "include"};
  if (const char* env = std::getenv("KFORGE_CUDA_INCLUDE"); env != nullptr && *env != '\0') {
    candidates.insert(candidates.begin(), fs::path(env));
  }
  for (const char* var : {"CUDA_HOME", "CUDA_PATH"}) {
    if (const char* env = std::getenv(var); env != nullptr && *env != '\0') {
      candidates.push_back(fs::path(env) / "include");
    }
  }
  candidates.push_back("/usr/local/cuda/include");
  for (const auto& c : candidates) {
    if (is_file(c / "cuda_fp16.h")) return c.string();
  }
  return {};
}

}  // namespace

StatusOr<std::shared_ptr<const NvrtcApi>> NvrtcApi::load(const Options& options) {
  std::vector<std::string> tried;
  auto try_path = [&](const fs::path& file_or_dir) -> void* {
    fs::path lib = library_in(file_or_dir);
    if (lib.empty()) {
      tried.push_back(file_or_dir.string() + " (absent)");
      return nullptr;
    }
    preload_builtins(lib.parent_path());
    void* h = dlopen(lib.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
      const char* err = dlerror();
      tried.push_back(lib.string() + " (" + (err != nullptr ? err : "dlopen failed") + ")");
    }
    return h;
  };
  void* handle = nullptr;
  if (!options.library_path.empty()) handle = try_path(options.library_path);
  const char* env = std::getenv("KFORGE_NVRTC_LIB");
  if (handle == nullptr && env != nullptr && *env != '\0') handle = try_path(env);
  for (const char* name : kLibraryNames) {
    if (handle != nullptr) break;
    handle = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) tried.push_back(std::string(name) + " (not on the library path)");
  }
  std::vector<fs::path> dirs = options.search_dirs;
  dirs.emplace_back("/usr/local/cuda/lib64");
  if (const char* home = std::getenv("CUDA_HOME"); home != nullptr && *home != '\0') {
    dirs.push_back(fs::path(home) / "lib64");
  }
  for (const auto& dir : dirs) {
    if (handle != nullptr) break;
    handle = try_path(dir);
  }
  if (handle == nullptr) {
    std::string list;
    for (const auto& t : tried)
      list += (list.empty() ? "" : "; ") + t;
    return unavailable("NVRTC (libnvrtc.so.13) not found; set KFORGE_NVRTC_LIB. Tried: " + list);
  }
  fs::path dir = loaded_dir(handle);
  preload_builtins(dir);  // for a library found by name, its builtins are beside it too
  return from_handle(handle, (dir / "libnvrtc").string());
}

StatusOr<std::shared_ptr<const NvrtcApi>> NvrtcApi::from_handle(void* handle,
                                                                std::string library_path) {
  std::shared_ptr<NvrtcApi> api(new NvrtcApi());
  api->handle_ = handle;
#define KF_RESOLVE(name) KF_RETURN_IF_ERROR(resolve(handle, KF_NVRTC_SYMBOL(name), api->name))
  KF_RESOLVE(nvrtcGetErrorString);
  KF_RESOLVE(nvrtcVersion);
  KF_RESOLVE(nvrtcGetNumSupportedArchs);
  KF_RESOLVE(nvrtcGetSupportedArchs);
  KF_RESOLVE(nvrtcCreateProgram);
  KF_RESOLVE(nvrtcDestroyProgram);
  KF_RESOLVE(nvrtcCompileProgram);
  KF_RESOLVE(nvrtcGetPTXSize);
  KF_RESOLVE(nvrtcGetPTX);
  KF_RESOLVE(nvrtcGetCUBINSize);
  KF_RESOLVE(nvrtcGetCUBIN);
  KF_RESOLVE(nvrtcGetProgramLogSize);
  KF_RESOLVE(nvrtcGetProgramLog);
  KF_RESOLVE(nvrtcAddNameExpression);
  KF_RESOLVE(nvrtcGetLoweredName);
#undef KF_RESOLVE
  link_map* map = nullptr;
  if (dlinfo(handle, RTLD_DI_LINKMAP, &map) == 0 && map != nullptr && map->l_name != nullptr) {
    library_path = map->l_name;
  }
  api->library_path_ = std::move(library_path);
  int major = 0;
  int minor = 0;
  KF_RETURN_IF_ERROR(api->check(api->nvrtcVersion(&major, &minor), "nvrtcVersion"));
  api->version_ = std::to_string(major) + "." + std::to_string(minor);
  int count = 0;
  KF_RETURN_IF_ERROR(
      api->check(api->nvrtcGetNumSupportedArchs(&count), "nvrtcGetNumSupportedArchs"));
  api->supported_archs_.resize(static_cast<size_t>(std::max(count, 0)));
  if (count > 0) {
    KF_RETURN_IF_ERROR(api->check(api->nvrtcGetSupportedArchs(api->supported_archs_.data()),
                                  "nvrtcGetSupportedArchs"));
  }
  api->include_dir_ = find_include_dir(fs::path(api->library_path_).parent_path());
  return std::shared_ptr<const NvrtcApi>(std::move(api));
}

std::string NvrtcApi::program_log(nvrtcProgram program) const {
  size_t size = 0;
  if (program == nullptr || nvrtcGetProgramLogSize(program, &size) != NVRTC_SUCCESS || size <= 1) {
    return {};
  }
  std::string log(size, '\0');
  if (nvrtcGetProgramLog(program, log.data()) != NVRTC_SUCCESS) return {};
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n'))
    log.pop_back();
  return log;
}

Status NvrtcApi::check(nvrtcResult result, const char* what, nvrtcProgram program) const {
  if (result == NVRTC_SUCCESS) return Status::ok();
  const char* name = nvrtcGetErrorString != nullptr ? nvrtcGetErrorString(result) : nullptr;
  std::string message =
      std::string(what) + ": " + (name != nullptr ? name : "nvrtcResult " + std::to_string(result));
  std::string log = program_log(program);
  if (!log.empty()) message += "\n" + log;
  ErrorCode code = ErrorCode::kInternal;
  switch (result) {
    case NVRTC_ERROR_COMPILATION:
    case NVRTC_ERROR_INVALID_OPTION:
    case NVRTC_ERROR_NAME_EXPRESSION_NOT_VALID:
    case NVRTC_ERROR_NO_NAME_EXPRESSIONS_AFTER_COMPILATION:
    case NVRTC_ERROR_NO_LOWERED_NAMES_BEFORE_COMPILATION:
      code = ErrorCode::kInvalidArgument;
      break;
    case NVRTC_ERROR_BUILTIN_OPERATION_FAILURE:
      code = ErrorCode::kUnavailable;
      break;
    default:
      break;
  }
  return {code, std::move(message)};
}

}  // namespace kforge::cuda
