// A KernelLauncher that launches nothing: it records the launch dimensions and a copy of
// every parameter's bytes, as cuLaunchKernel would read them, so argument marshalling can
// be tested without a GPU. `fail_with` makes the next launch fail with that status.
#pragma once

#include <cstddef>
#include <cstring>
#include <vector>

#include "kforge/cuda/kernel_args.h"
#include "kforge/cuda/kernel_launcher.h"

namespace kforge::testing {

class FakeLauncher final : public cuda::KernelLauncher {
 public:
  struct Launch {
    cuda::LaunchDims dims;
    std::vector<std::vector<std::byte>> params;  // each parameter's bytes, in order
    CUstream stream = nullptr;
  };

  // `param_sizes`: how many bytes of each parameter to copy (what the kernel declares).
  explicit FakeLauncher(std::vector<size_t> param_sizes) : param_sizes_(std::move(param_sizes)) {}

  Status launch(const cuda::LaunchDims& dims, void** params, CUstream stream) override {
    if (!fail_with.is_ok()) return fail_with;
    Launch l{dims, {}, stream};
    for (size_t i = 0; i < param_sizes_.size(); ++i) {
      std::vector<std::byte> bytes(param_sizes_[i]);
      std::memcpy(bytes.data(), params[i], bytes.size());
      l.params.push_back(std::move(bytes));
    }
    launches.push_back(std::move(l));
    return Status::ok();
  }

  template <typename T>
  T param_as(size_t launch, size_t i) const {
    T v{};
    std::memcpy(&v, launches.at(launch).params.at(i).data(), sizeof(T));
    return v;
  }

  std::vector<Launch> launches;
  Status fail_with = Status::ok();

 private:
  std::vector<size_t> param_sizes_;
};

}  // namespace kforge::testing
