// What compiling one `cuda` kernel asks for and produces (value types, no I/O).
#pragma once

#include <string>
#include <vector>

namespace kforge::cuda {

struct CompileRequest {
  std::string source;
  std::string kernel_name;           // the __global__ function; looked up by name expression
  std::vector<std::string> options;  // already allow-listed (model/cuda_options.h) + defines
  std::string arch;                  // "sm_90a" (cubin) or "compute_90" (PTX)
};

struct CompiledKernel {
  std::string image;         // cubin, or NUL-terminated PTX
  std::string format;        // "cubin" | "ptx"
  std::string lowered_name;  // the (mangled) symbol to look up in the module
  std::string arch;
  std::string log;  // NVRTC's warnings ("" when none)
};

struct CompileResult {
  CompiledKernel kernel;
  bool cache_hit = false;
  double compile_ms = 0;  // NVRTC time, or the cache read on a hit
  std::string cache_key;
};

}  // namespace kforge::cuda
