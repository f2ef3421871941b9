// Small file-system helpers; every failure is a Status naming the path.
#pragma once

#include <filesystem>
#include <memory>
#include <string>
#include <string_view>

#include "kforge/common/status.h"

namespace kforge {

StatusOr<std::string> read_file(const std::filesystem::path& path);
// Writes via a temporary file and rename, so readers never see a partial file.
Status write_file_atomic(const std::filesystem::path& path, std::string_view content);
Status make_dirs(const std::filesystem::path& path);
// Removes a directory tree; a missing path is not an error.
Status remove_tree(const std::filesystem::path& path);

// Absolute path of the running executable (/proc/self/exe).
StatusOr<std::filesystem::path> self_executable();

// Resolves `program` against PATH when it has no '/'; empty when it is not an executable.
std::string find_program(const std::string& program);

// An exclusive advisory lock (flock) on `dir/kforge.lock`, held for the object's lifetime, so
// two kforge processes never share one data directory (the second would re-run the first's
// running jobs as "interrupted"). kFailedPrecondition naming the holder's pid when taken.
class DataDirLock {
 public:
  static StatusOr<std::unique_ptr<DataDirLock>> acquire(const std::filesystem::path& dir);
  ~DataDirLock();
  DataDirLock(const DataDirLock&) = delete;
  DataDirLock& operator=(const DataDirLock&) = delete;

 private:
  explicit DataDirLock(int fd) : fd_(fd) {}
  int fd_;
};

}  // namespace kforge
