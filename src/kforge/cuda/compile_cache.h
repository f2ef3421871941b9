// On-disk cache of compiled `cuda` kernels, keyed by SHA-256 of (source, kernel name,
// options, architecture, NVRTC version, include directory). One file per entry,
// `<dir>/<key>.kfc`: a one-line JSON header, then the image. Entries are written
// atomically (temporary file + rename), so concurrent workers never read a partial entry;
// an entry that does not parse is a miss (and is overwritten).
//
// Thread-safety: one instance per thread; several processes may share a directory.
//
// Example:
//   KF_ASSIGN_OR_RETURN(auto cache, CompileCache::open({.dir = data_dir / "cache" / "cuda"}));
//   if (auto hit = cache->find(key)) return *hit;
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>

#include "kforge/common/status.h"
#include "kforge/cuda/compiled_kernel.h"

namespace kforge::cuda {

class CompileCache {
 public:
  struct Options {
    std::filesystem::path dir;
  };
  // Creates the directory if needed.
  static StatusOr<std::unique_ptr<CompileCache>> open(const Options& options);

  static std::string key_for(const CompileRequest& request, const std::string& nvrtc_version,
                             const std::string& include_dir);

  // The entry, counted as a hit; nullopt (counted as a miss) when absent or unreadable.
  std::optional<CompiledKernel> find(const std::string& key);
  Status put(const std::string& key, const CompiledKernel& kernel);

  int64_t hits() const { return hits_; }
  int64_t misses() const { return misses_; }
  const std::filesystem::path& dir() const { return dir_; }

 private:
  explicit CompileCache(std::filesystem::path dir) : dir_(std::move(dir)) {}
  std::filesystem::path path_of(const std::string& key) const;

  std::filesystem::path dir_;
  int64_t hits_ = 0;
  int64_t misses_ = 0;
};

}  // namespace kforge::cuda
