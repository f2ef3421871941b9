// Which files a `cuda` source may #include (docs/security.md "Process isolation"): the CUDA
// headers (NVRTC's built-in ones and the toolkit's include directory on the include path) and
// relative paths that stay below the directory they are resolved from. NVRTC runs in a jailed
// process whose minimal root holds no host file a job could want; this check is the first
// line: a refused directive never reaches NVRTC, so its error cannot quote a file's lines.
//
// Refused, each with an error naming the file, the line and the directive:
// - an absolute path: `#include "/etc/passwd"`, `#include </etc/passwd>`;
// - a path with a `..` component (it leaves the job's directory or the include directory);
// - a computed include (`#include NAME`, `NAME` a macro, even one from -D): only the
//   preprocessor knows its path;
// - the same paths in `__has_include(...)` / `__has_include_next(...)`, which tell whether a
//   host file exists.
// Directives are found the way the preprocessor finds them: after backslash-newline splicing,
// with comments as spaces, introduced by `#`, `%:` (digraph) or `??=` (trigraph), named
// `include`, `include_next` or `import`.
//
// Example:
//   KF_RETURN_IF_ERROR(check_includes(request.source, "vector_add.cu"));
#pragma once

#include <string_view>

#include "kforge/common/status.h"

namespace kforge::cuda {

// kInvalidArgument (a compile error) for the first refused directive; ok otherwise.
Status check_includes(std::string_view source, std::string_view file_name);

}  // namespace kforge::cuda
