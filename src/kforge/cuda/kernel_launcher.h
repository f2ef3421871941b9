// The seam between argument marshalling and the GPU: something that launches one kernel
// with prepared parameters. The real one calls cuLaunchKernel; tests use a fake
// (tests/unit/fakes/fake_launcher.h) that records what it was given.
#pragma once

#include <cuda.h>

#include <array>
#include <cstdint>

#include "kforge/common/status.h"

namespace kforge::cuda {

struct LaunchDims {
  std::array<unsigned, 3> grid{1, 1, 1};
  std::array<unsigned, 3> block{1, 1, 1};
  unsigned shared_mem_bytes = 0;  // dynamic shared memory
};

class KernelLauncher {
 public:
  virtual ~KernelLauncher() = default;
  // Enqueues one launch on `stream`; `params` is cuLaunchKernel's kernelParams (one pointer
  // per kernel parameter, to its value). Asynchronous: faults surface at the next sync.
  virtual Status launch(const LaunchDims& dims, void** params, CUstream stream) = 0;
};

}  // namespace kforge::cuda
