#include "kforge/jobs/gpu_counters.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace kforge::jobs {
namespace {

std::filesystem::path params_with(const std::string& text) {
  auto path = std::filesystem::path(::testing::TempDir()) /
              ("params-" + std::to_string(std::hash<std::string>{}(text)));
  std::ofstream(path) << text;
  return path;
}

TEST(GpuCountersTest, ReadsRmProfilingAdminOnlyFromTheDriversParameters) {
  EXPECT_EQ(profiling_admin_only(params_with("ResmanDebugLevel: 4294967295\n"
                                             "RmProfilingAdminOnly: 1\n"
                                             "TCEBypassMode: 0\n")),
            true);
  EXPECT_EQ(profiling_admin_only(params_with("RmProfilingAdminOnly: 0\n")), false);
  EXPECT_EQ(profiling_admin_only(params_with("EnableMSI: 1\n")), std::nullopt);
  EXPECT_EQ(profiling_admin_only(params_with("RmProfilingAdminOnly:\n")), std::nullopt);
  EXPECT_EQ(profiling_admin_only("/nonexistent/driver/params"), std::nullopt);
}

TEST(GpuCountersTest, JailedJobsCannotReadRestrictedCounters) {
  const std::string why = gpu_counters_denied_reason(true, /*jobs_jailed=*/true, true);
  EXPECT_NE(why.find("RmProfilingAdminOnly: 1"), std::string::npos) << why;
  EXPECT_NE(why.find("jailed"), std::string::npos) << why;
  EXPECT_NE(why.find("NVreg_RestrictProfilingToAdminUsers=0"), std::string::npos) << why;
  EXPECT_NE(why.find("--sandbox off"), std::string::npos) << why;
  const std::string unprivileged = gpu_counters_denied_reason(true, false, false);
  EXPECT_NE(unprivileged.find("does not run as root"), std::string::npos) << unprivileged;
}

TEST(GpuCountersTest, OpenCountersOrRootJobsOrAnUnknownDriverAreNotRefused) {
  EXPECT_EQ(gpu_counters_denied_reason(false, true, false), "");
  EXPECT_EQ(gpu_counters_denied_reason(true, /*jobs_jailed=*/false, /*root=*/true), "");
  EXPECT_EQ(gpu_counters_denied_reason(std::nullopt, true, false), "");
}

}  // namespace
}  // namespace kforge::jobs
