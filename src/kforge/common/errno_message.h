// The text of an errno value, the one place an errno becomes text (errno_error in status.h
// and every message that names a failed system call use it).
//
// Thread-safe: strerror_r into a local buffer, never std::strerror, whose buffer is shared
// by every thread (clang-tidy concurrency-mt-unsafe).
//
// Example:
//   if (::rmdir(dir) != 0) KF_LOG_WARN("rmdir {}: {}", dir, errno_message(errno));
#pragma once

#include <string>

namespace kforge {

// "No such file or directory" for ENOENT; "Unknown error N" for a value libc does not know.
std::string errno_message(int err);

}  // namespace kforge
