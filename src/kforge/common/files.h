// Small file-system helpers; every failure is a Status naming the path.
#pragma once

#include <filesystem>
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

}  // namespace kforge
