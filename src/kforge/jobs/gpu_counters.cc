#include "kforge/jobs/gpu_counters.h"

#include <fstream>

namespace kforge::jobs {

std::optional<bool> profiling_admin_only(const std::filesystem::path& params) {
  std::ifstream in(params);
  std::string line;
  constexpr std::string_view kKey = "RmProfilingAdminOnly:";
  while (std::getline(in, line)) {
    if (!line.starts_with(kKey)) continue;
    const auto digit = line.find_first_of("0123456789", kKey.size());
    if (digit == std::string::npos) return std::nullopt;
    return line[digit] != '0';
  }
  return std::nullopt;
}

std::string gpu_counters_denied_reason(std::optional<bool> admin_only, bool jobs_jailed,
                                       bool server_is_root) {
  if (!admin_only.value_or(false)) return "";
  if (!jobs_jailed && server_is_root) return "";
  const std::string who = jobs_jailed ? "jobs run jailed, without capabilities (docs/security.md)"
                                      : "this server, and so its jobs, does not run as root";
  return "Nsight Compute cannot read this GPU's performance counters: the NVIDIA driver "
         "restricts them to administrators (RmProfilingAdminOnly: 1 in "
         "/proc/driver/nvidia/params) and " +
         who +
         ". Let every user profile (options nvidia NVreg_RestrictProfilingToAdminUsers=0, then "
         "reload the module) or serve with --sandbox off as root";
}

}  // namespace kforge::jobs
