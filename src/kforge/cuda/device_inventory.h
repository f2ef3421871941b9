// The GPUs this process can see (CUDA_VISIBLE_DEVICES is honoured by the driver).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kforge/common/json.h"
#include "kforge/common/status.h"

namespace kforge::cuda {

struct GpuInfo {
  int index = 0;     // driver ordinal in this process
  std::string name;  // "NVIDIA H100 80GB HBM3"
  std::string uuid;  // "GPU-xxxxxxxx-...", usable as CUDA_VISIBLE_DEVICES
  int cc_major = 0;
  int cc_minor = 0;
  int sm_count = 0;
  int64_t total_memory_bytes = 0;
  int64_t l2_cache_bytes = 0;
  int clock_khz = 0;
  int memory_clock_khz = 0;
  int memory_bus_width_bits = 0;
  int driver_version = 0;  // e.g. 13000
  std::string pci_bus_id;  // "0000:1b:00.0" (names /proc/driver/nvidia/gpus/<id>)

  // "sm_90a" for Hopper (9.0 gets the arch-specific 'a' variant), else "sm_XY".
  std::string arch() const;
  Json to_json() const;
};

// Facts about the GPU of driver ordinal `ordinal` (cuInit must have run: DriverApi::load).
class DriverApi;
StatusOr<GpuInfo> query_gpu(const DriverApi& api, int ordinal);

// "13.0" for a driver version of 13000.
std::string cuda_version_string(int driver_version);

// Lists the visible GPUs. An empty list (not an error) when there is no driver or no
// device; the reason is returned in `why_none`.
std::vector<GpuInfo> list_gpus(std::string* why_none);

}  // namespace kforge::cuda
