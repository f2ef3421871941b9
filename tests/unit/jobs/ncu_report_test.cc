// Nsight Compute CSV parsing and the seed server's groups, on recorded-format fixtures
// (tests/unit/jobs/testdata: ncu's raw page for two kernels, its details page for one).
#include "kforge/jobs/ncu_report.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "kforge/common/files.h"

namespace kforge::jobs {
namespace {

std::string fixture(const std::string& name) {
  const char* root = std::getenv("KFORGE_SOURCE_DIR");
  std::filesystem::path dir = root != nullptr
                                  ? std::filesystem::path(root) / "tests/unit/jobs/testdata"
                                  : std::filesystem::path("tests/unit/jobs/testdata");
  auto text = read_file(dir / name);
  EXPECT_TRUE(text.is_ok()) << text.status().to_string();
  return text.is_ok() ? *text : std::string();
}

Json run_with(std::string stdout_text, int exit_code = 0, std::string stderr_text = "") {
  return Json{{"command", {"ncu", "--csv"}},
              {"exit_code", exit_code},
              {"stdout", std::move(stdout_text)},
              {"stderr", std::move(stderr_text)}};
}

TEST(NcuReportTest, RawPageGivesEveryKernelWithUnitsAndNumbers) {
  auto kernels = parse_ncu_csv(fixture("ncu_raw_two_kernels.csv"));
  ASSERT_TRUE(kernels.is_ok()) << kernels.status().to_string();
  ASSERT_EQ(kernels->size(), 2u);
  const NcuKernel& add = (*kernels)[0];
  EXPECT_EQ(add.name, "add_kernel");
  EXPECT_EQ(add.grid, "(2048, 1, 1)");
  EXPECT_EQ(add.block, "(128, 1, 1)");
  EXPECT_EQ(add.stream, "7");
  EXPECT_DOUBLE_EQ(add.metrics.at("dram__bytes.sum.per_second").value.get<double>(),
                   1878309701560.98);  // thousands separators removed
  EXPECT_EQ(add.metrics.at("dram__bytes.sum.per_second").unit, "byte/second");
  EXPECT_EQ(add.metrics.at("gpu__time_duration.sum").unit, "second");
  EXPECT_EQ(add.metrics.at("sm__inst_executed_pipe_tensor_op_hmma.avg.pct_of_peak_sustained_active")
                .value,
            "n/a");
  // A demangled name with quotes, commas and parentheses survives CSV quoting.
  EXPECT_EQ((*kernels)[1].name.rfind("void at::native::reduce_kernel<512, 1, at::native::", 0), 0u);
  EXPECT_EQ((*kernels)[1].metrics.at("launch__block_size").value, 1024.0);
}

TEST(NcuReportTest, GroupsFollowTheSeedServer) {
  auto kernels = parse_ncu_csv(fixture("ncu_raw_two_kernels.csv"));
  ASSERT_TRUE(kernels.is_ok());
  const Json g = metric_groups((*kernels)[0]);
  EXPECT_EQ(g["speed_of_light"]["compute_throughput_pct"], 58.41);  // the GPU-wide figure first
  EXPECT_EQ(g["speed_of_light"]["sm_throughput_pct"], 17.36);
  EXPECT_EQ(g["speed_of_light"]["memory_throughput_pct"], 58.40);
  EXPECT_EQ(g["speed_of_light"]["dram_throughput_pct"], 58.41);
  EXPECT_EQ(g["detailed_metrics"]["l2_hit_rate_pct"], 33.51);
  EXPECT_EQ(g["detailed_metrics"]["waves_per_sm"], 1.94);
  EXPECT_NEAR(g["memory_metrics"]["dram_total_bandwidth_gb_s"].get<double>(),
              1878309701560.98 / (1024.0 * 1024 * 1024), 1e-6);
  EXPECT_EQ(g["memory_metrics"]["l2_throughput_pct"], 40.27);
  EXPECT_EQ(g["compute_metrics"]["registers_per_thread"], 16.0);
  EXPECT_FALSE(g["compute_metrics"].contains("tensor_pipe_utilization_pct"));  // n/a
  EXPECT_EQ(g["pipeline_metrics"]["sm_issue_active_pct"], 5.12);
  EXPECT_EQ(g["occupancy_metrics"]["grid_size"], 2048.0);
  EXPECT_EQ(g["occupancy_metrics"]["block_size"], 128.0);
}

TEST(NcuReportTest, ARunReportsItsLongestKernelAndEveryKernel) {
  const Json m = device_metrics_of_run(run_with(fixture("ncu_raw_two_kernels.csv")));
  ASSERT_FALSE(m.contains("error")) << m.dump();
  EXPECT_EQ(m["kernel_name"], "add_kernel");  // 6.2 us against 2.9 us
  EXPECT_EQ(m["speed_of_light"]["compute_throughput_pct"], 58.41);
  ASSERT_EQ(m["kernels"].size(), 2u);
  EXPECT_NEAR(m["kernels"][0]["duration_ms"].get<double>(), 0.006208, 1e-12);
  EXPECT_EQ(m["kernels"][1]["occupancy_metrics"]["shared_mem_per_block"], 4096.0);
  EXPECT_EQ(m["kernels"][0]["raw"]["launch__grid_size"], (Json{{"value", 2048.0}, {"unit", ""}}));
  EXPECT_EQ(m["ncu"]["sections"], ncu_sections());
}

TEST(NcuReportTest, DetailsPageIsReadToo) {
  auto kernels = parse_ncu_csv(fixture("ncu_details_one_kernel.csv"));
  ASSERT_TRUE(kernels.is_ok()) << kernels.status().to_string();
  ASSERT_EQ(kernels->size(), 1u);
  const Json m = device_metrics_of_run(run_with(fixture("ncu_details_one_kernel.csv")));
  EXPECT_NEAR(m["kernels"][0]["duration_ms"].get<double>(), 0.003648, 1e-12);
  EXPECT_EQ(m["speed_of_light"]["memory_throughput_pct"], 31.2);
  EXPECT_FALSE(m["speed_of_light"].contains("sm_throughput_pct"));  // n/a
}

TEST(NcuReportTest, FailuresSayWhatToDo) {
  const Json perm = device_metrics_of_run(
      run_with("==PROF== Connected to process 1\n"
               "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA "
               "GPU Performance Counters on the target device 0.\n",
               1));
  EXPECT_NE(perm["error"].get<std::string>().find("performance counters (ERR_NVGPUCTRPERM)"),
            std::string::npos);
  EXPECT_NE(perm["error"].get<std::string>().find("--sandbox off"), std::string::npos);
  const Json none = device_metrics_of_run(
      run_with("==PROF== Disconnected\n==WARNING== No kernels were profiled.\n"));
  EXPECT_NE(none["error"].get<std::string>().find("launched no kernel"), std::string::npos);
  Json missing = run_with("", 0, "cannot run ncu: [Errno 2] No such file or directory: '/x/ncu'");
  missing["exit_code"] = nullptr;
  const std::string why = device_metrics_of_run(missing)["error"];
  EXPECT_NE(why.find("exit code none"), std::string::npos) << why;
  EXPECT_NE(why.find("cannot run ncu"), std::string::npos) << why;
  // The profiled program failed: its own last words say why.
  const std::string crashed = device_metrics_of_run(
      run_with("==PROF== Connected to process 7\n", 1,
               "Traceback (most recent call last):\n  File \"x.py\", line 1, in <module>\n"
               "ModuleNotFoundError: No module named 'kforge_worker'\n"
               "==ERROR== The application returned an error code (1).\n"))["error"];
  EXPECT_NE(crashed.find("returned an error code (1). The profiled program's last output"),
            std::string::npos)
      << crashed;
  EXPECT_NE(crashed.find("No module named 'kforge_worker'"), std::string::npos) << crashed;
  EXPECT_FALSE(parse_ncu_csv("").is_ok());
  EXPECT_FALSE(parse_ncu_csv("\"ID\",\"Kernel Name\"\n").is_ok());  // a header, no rows
}

TEST(NcuReportTest, ForgedOutputIsBounded) {
  // The output comes from the job's process: many rows must stay linear and capped.
  std::string csv = "\"ID\",\"Kernel Name\",\"gpu__time_duration.sum\"\n\"\",\"\",\"nsecond\"\n";
  for (int i = 0; i < 200000; ++i)
    csv += "\"" + std::to_string(i) + "\",\"k\",\"1\"\n";
  auto kernels = parse_ncu_csv(csv);
  ASSERT_TRUE(kernels.is_ok());
  EXPECT_EQ(kernels->size(), kMaxNcuKernels);
  EXPECT_FALSE(parse_ncu_csv(std::string(kMaxNcuOutputBytes + 1, 'x')).is_ok());
}

}  // namespace
}  // namespace kforge::jobs
