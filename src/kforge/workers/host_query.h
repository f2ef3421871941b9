// Asking the host where the files a job needs are, once at start (workers/root_plan.h): the
// workers' Python interpreter says where its installation is, the dynamic loader's cache
// says where the CUDA driver's libraries are. Both run a short program with a bounded
// wait (no shell); neither imports torch nor touches a GPU.
#pragma once

#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "kforge/common/status.h"

namespace kforge::workers {

// Where a Python interpreter's files are, as it reports them (sysconfig, site, sys.path).
struct PythonLayout {
  std::string executable;                // sys.executable
  bool is_venv = false;                  // sys.prefix != sys.base_prefix
  std::string prefix;                    // sys.prefix
  std::vector<std::string> directories;  // stdlib, site-packages, include, LIBDIR, scripts
  std::vector<std::string> sys_path;     // absolute entries of sys.path, as they are
};

// Runs `python` with `env` (the workers' environment) and reads its layout. kUnavailable
// (naming the interpreter and what it printed) when it cannot be run or answers garbage.
StatusOr<PythonLayout> python_layout(const std::string& python,
                                     const std::map<std::string, std::string>& env,
                                     std::chrono::milliseconds timeout);

// The directories holding the libraries whose file names start with one of `prefixes`
// ("libcuda.so", "libnvidia-"), where the loader would find them: directories of
// `library_path` (LD_LIBRARY_PATH's value) that hold one, then `ldconfig -p`'s answers.
// Missing ldconfig or no such library: an empty list.
std::vector<std::string> loader_directories(const std::vector<std::string>& prefixes,
                                            const std::string& library_path);

}  // namespace kforge::workers
