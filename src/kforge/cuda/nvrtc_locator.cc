#include "kforge/cuda/nvrtc_locator.h"

#include <cstdlib>
#include <system_error>

#include "kforge/common/files.h"

namespace kforge::cuda {
namespace {

namespace fs = std::filesystem;

// <prefix>/lib/python3.*/{site,dist}-packages/nvidia/cu13/lib for each prefix.
void add_wheel_dirs(const fs::path& prefix, std::vector<fs::path>& out) {
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(prefix / "lib", ec)) {
    std::string name = entry.path().filename().string();
    if (!name.starts_with("python3")) continue;
    for (const char* packages : {"site-packages", "dist-packages"}) {
      for (const char* cuda : {"cu13", "cu12", "cuda_nvrtc"}) {
        fs::path dir = entry.path() / packages / "nvidia" / cuda / "lib";
        if (fs::is_directory(dir, ec)) out.push_back(dir);
      }
    }
  }
}

}  // namespace

std::vector<fs::path> nvrtc_search_dirs(const std::string& python) {
  std::vector<fs::path> out;
  fs::path exe = find_program(python);
  if (!exe.empty()) {
    // A venv's bin/python is a symlink to the base interpreter: the venv's own prefix comes
    // first, then the resolved interpreter's.
    add_wheel_dirs(exe.parent_path().parent_path(), out);
    std::error_code ec;
    fs::path real = fs::canonical(exe, ec);
    if (!ec) add_wheel_dirs(real.parent_path().parent_path(), out);
  }
  // NOLINTNEXTLINE(concurrency-mt-unsafe): read-only; kforge unsets only before any thread starts
  if (const char* home = std::getenv("HOME"); home != nullptr && *home != '\0') {
    add_wheel_dirs(fs::path(home) / ".local", out);
  }
  add_wheel_dirs("/usr/local", out);
  add_wheel_dirs("/usr", out);
  out.emplace_back("/usr/local/cuda/lib64");
  return out;
}

fs::path find_nvrtc_library(const std::string& python) {
  std::error_code ec;
  for (const auto& dir : nvrtc_search_dirs(python)) {
    for (const char* name : {"libnvrtc.so.13", "libnvrtc.so.12"}) {
      if (fs::is_regular_file(dir / name, ec)) return dir / name;
    }
  }
  return {};
}

}  // namespace kforge::cuda
