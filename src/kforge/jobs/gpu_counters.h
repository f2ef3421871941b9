// Whether a job's processes may read the GPU's performance counters, which Nsight Compute
// needs for device metrics (docs/security.md "Device metrics (Nsight Compute) under the
// jail"). NVIDIA's driver decides: with RmProfilingAdminOnly: 1 in its parameters (the
// module option NVreg_RestrictProfilingToAdminUsers, the default) only a process with
// CAP_SYS_ADMIN may, and jailed job processes have no capabilities.
#pragma once

#include <filesystem>
#include <optional>
#include <string>

namespace kforge::jobs {

// RmProfilingAdminOnly from the driver's parameter file (normally
// /proc/driver/nvidia/params); nullopt when the file or the line is missing.
std::optional<bool> profiling_admin_only(const std::filesystem::path& params);

// Why job processes cannot read the counters, naming the cause and the two fixes, or "" when
// they can (or when it is unknown: ncu then says so itself). `jobs_jailed`: jobs run jailed
// (no capabilities); `server_is_root`: unjailed jobs run as root.
std::string gpu_counters_denied_reason(std::optional<bool> admin_only, bool jobs_jailed,
                                       bool server_is_root);

}  // namespace kforge::jobs
