#include "kforge/cuda/device_inventory.h"

#include <cstdio>

#include "kforge/cuda/driver_api.h"

namespace kforge::cuda {
namespace {

std::string format_uuid(const CUuuid& u) {
  const auto* b = reinterpret_cast<const unsigned char*>(u.bytes);
  char buf[64];
  std::snprintf(buf, sizeof(buf),
                "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0],
                b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13],
                b[14], b[15]);
  return buf;
}

}  // namespace

StatusOr<GpuInfo> query_gpu(const DriverApi& api, int ordinal) {
  GpuInfo info;
  info.index = ordinal;
  CUdevice dev = 0;
  KF_RETURN_IF_ERROR(api.check(api.cuDeviceGet(&dev, ordinal), "cuDeviceGet"));
  char name[256] = {};
  KF_RETURN_IF_ERROR(
      api.check(api.cuDeviceGetName(name, sizeof(name) - 1, dev), "cuDeviceGetName"));
  info.name = name;
  CUuuid uuid{};
  KF_RETURN_IF_ERROR(api.check(api.cuDeviceGetUuid(&uuid, dev), "cuDeviceGetUuid"));
  info.uuid = format_uuid(uuid);
  auto attr = [&](CUdevice_attribute a, int& out) {
    return api.check(api.cuDeviceGetAttribute(&out, a, dev), "cuDeviceGetAttribute");
  };
  int l2 = 0;
  KF_RETURN_IF_ERROR(attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, info.cc_major));
  KF_RETURN_IF_ERROR(attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, info.cc_minor));
  KF_RETURN_IF_ERROR(attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, info.sm_count));
  KF_RETURN_IF_ERROR(attr(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE, l2));
  KF_RETURN_IF_ERROR(attr(CU_DEVICE_ATTRIBUTE_CLOCK_RATE, info.clock_khz));
  KF_RETURN_IF_ERROR(attr(CU_DEVICE_ATTRIBUTE_MEMORY_CLOCK_RATE, info.memory_clock_khz));
  KF_RETURN_IF_ERROR(attr(CU_DEVICE_ATTRIBUTE_GLOBAL_MEMORY_BUS_WIDTH, info.memory_bus_width_bits));
  info.l2_cache_bytes = l2;
  int pci_domain = 0;
  int pci_bus = 0;
  int pci_device = 0;
  if (attr(CU_DEVICE_ATTRIBUTE_PCI_DOMAIN_ID, pci_domain).is_ok() &&
      attr(CU_DEVICE_ATTRIBUTE_PCI_BUS_ID, pci_bus).is_ok() &&
      attr(CU_DEVICE_ATTRIBUTE_PCI_DEVICE_ID, pci_device).is_ok()) {
    char bus_id[32] = {};
    std::snprintf(bus_id, sizeof(bus_id), "%04x:%02x:%02x.0", pci_domain, pci_bus, pci_device);
    info.pci_bus_id = bus_id;
  }
  size_t total = 0;
  KF_RETURN_IF_ERROR(api.check(api.cuDeviceTotalMem(&total, dev), "cuDeviceTotalMem"));
  info.total_memory_bytes = static_cast<int64_t>(total);
  KF_RETURN_IF_ERROR(api.check(api.cuDriverGetVersion(&info.driver_version), "cuDriverGetVersion"));
  return info;
}

std::string cuda_version_string(int driver_version) {
  return std::to_string(driver_version / 1000) + "." + std::to_string((driver_version % 1000) / 10);
}

std::string GpuInfo::arch() const {
  std::string a = "sm_" + std::to_string(cc_major) + std::to_string(cc_minor);
  if (cc_major == 9 && cc_minor == 0) a += "a";
  return a;
}

Json GpuInfo::to_json() const {
  return Json{{"index", index},
              {"name", name},
              {"uuid", uuid},
              {"capability", std::to_string(cc_major) + "." + std::to_string(cc_minor)},
              {"arch", arch()},
              {"sm_count", sm_count},
              {"total_memory_bytes", total_memory_bytes},
              {"l2_cache_bytes", l2_cache_bytes},
              {"clock_khz", clock_khz},
              {"memory_clock_khz", memory_clock_khz},
              {"memory_bus_width_bits", memory_bus_width_bits},
              {"driver_version", driver_version},
              {"pci_bus_id", pci_bus_id}};
}

std::vector<GpuInfo> list_gpus(std::string* why_none) {
  auto api = DriverApi::load();
  if (!api) {
    if (why_none != nullptr) *why_none = api.status().message();
    return {};
  }
  int count = 0;
  Status st = (*api)->check((*api)->cuDeviceGetCount(&count), "cuDeviceGetCount");
  if (!st) {
    if (why_none != nullptr) *why_none = st.message();
    return {};
  }
  std::vector<GpuInfo> gpus;
  for (int i = 0; i < count; ++i) {
    auto info = query_gpu(**api, i);
    if (!info) {
      if (why_none != nullptr) *why_none = info.status().message();
      continue;
    }
    gpus.push_back(std::move(info).value());
  }
  if (gpus.empty() && why_none != nullptr && why_none->empty())
    *why_none = "no CUDA device visible";
  return gpus;
}

}  // namespace kforge::cuda
