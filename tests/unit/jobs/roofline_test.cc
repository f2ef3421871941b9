// Roofline math, the device-peaks cache and the extras the server adds to results.
#include "kforge/jobs/roofline.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "kforge/common/files.h"
#include "kforge/jobs/device_peaks.h"
#include "kforge/jobs/result_extras.h"
#include "kforge/model/parse.h"

namespace kforge::jobs {
namespace {

const Json kPeaks = {
    {"version", 1},
    {"bandwidth_gb_s", 3000.0},
    {"flop_s", {{"fp32", 50e12}, {"tf32", 400e12}, {"fp16", 800e12}, {"bf16", 800e12}}}};

model::KernelCode kernel(const Json& j) {
  auto k = model::parse_kernel_code(j, JsonPath("kernel"), {});
  EXPECT_TRUE(k.is_ok()) << k.status().to_string();
  return k.is_ok() ? *k : model::KernelCode{};
}

Json tensor(const char* name, int64_t n, const char* dtype, const char* role = "input") {
  return {{"name", name},
          {"type", "tensor"},
          {"role", role},
          {"tensor_spec", {{"shape", {n}}, {"dtype", dtype}}}};
}

// A vector add of n float32 elements: 12 n bytes.
Json vadd(int64_t n, const Json& metadata = Json::object()) {
  Json args = Json::array({tensor("x", n, "float32"), tensor("y", n, "float32"),
                           tensor("out", n, "float32", "output"),
                           Json{{"name", "n"}, {"type", "int"}, {"value", n}}});
  return Json{{"source_code", "k"},
              {"kernel_type", "triton"},
              {"metadata", metadata},
              {"io", Json{{"args", args}}}};
}

TEST(RooflineTest, IoContractGivesALowerBoundOnBytes) {
  const auto k = kernel(vadd(1 << 20));
  const KernelWork w = work_of(k, nullptr, Json());
  EXPECT_EQ(*w.bytes, 12.0 * (1 << 20));
  EXPECT_EQ(w.bytes_source, "io_contract_lower_bound");
  EXPECT_FALSE(w.flops);
  EXPECT_EQ(w.flops_dtype, "fp32");
  // 12 MiB in 0.005 ms: 2516.58 GB/s, 83.9 % of 3000 GB/s.
  const Json r = roofline(w, 0.005, kPeaks);
  EXPECT_TRUE(r["measured"]);
  EXPECT_NEAR(r["achieved_gb_s"].get<double>(), 12.0 * (1 << 20) / 0.005e-3 / 1e9, 1e-9);
  EXPECT_NEAR(r["pct_of_peak_bandwidth"].get<double>(), 100 * 2516.582400 / 3000.0, 1e-6);
  EXPECT_TRUE(r["achieved_tflop_s"].is_null() && r["pct_of_peak_flops"].is_null());
  EXPECT_EQ(r["peak_tflop_s"], 50.0);
}

TEST(RooflineTest, InoutCountsTwice) {
  Json j = vadd(1000);
  j["io"]["args"][2]["role"] = "inout";
  EXPECT_EQ(*work_of(kernel(j), nullptr, Json()).bytes, 4.0 * 4000);
}

TEST(RooflineTest, MetadataWinsAndTheOtherKernelLendsItsWork) {
  const auto cand = kernel(vadd(1024, {{"bytes_moved", 5000}, {"flops", 2e9}}));
  const auto ref = kernel(vadd(1024));
  const KernelWork w = work_of(ref, &cand, Json());
  EXPECT_EQ(*w.bytes, 5000);
  EXPECT_EQ(w.bytes_source, "metadata.bytes_moved");
  EXPECT_EQ(*w.flops, 2e9);
  const Json r = roofline(w, 1.0, kPeaks);  // 2e9 FLOP in 1 ms = 2 TFLOP/s = 4 % of 50
  EXPECT_DOUBLE_EQ(r["achieved_tflop_s"].get<double>(), 2.0);
  EXPECT_DOUBLE_EQ(r["pct_of_peak_flops"].get<double>(), 4.0);
}

TEST(RooflineTest, FlopsDtypeChoosesThePeak) {
  const auto k = kernel(vadd(16, {{"flops", 8e12}, {"flops_dtype", "bf16"}}));
  const Json r = roofline(work_of(k, nullptr, Json()), 100.0, kPeaks);  // 80 TFLOP/s
  EXPECT_EQ(r["peak_flops_dtype"], "bf16");
  EXPECT_DOUBLE_EQ(r["pct_of_peak_flops"].get<double>(), 10.0);
}

TEST(RooflineTest, ReportedInputsOfAGetInputsKernel) {
  const auto k = kernel({{"source_code", "k"}, {"kernel_type", "torch"}});
  const Json inputs =
      Json::array({{{"name", "a"}, {"role", "input"}, {"dtype", "float16"}, {"shape", {64, 64}}},
                   {{"name", "s"}, {"role", "input"}, {"type", "int"}, {"value", 3}}});
  const KernelWork w = work_of(k, nullptr, inputs);
  EXPECT_EQ(*w.bytes, 64.0 * 64 * 2);
  EXPECT_EQ(w.bytes_source, "inputs_lower_bound");
  EXPECT_EQ(w.flops_dtype, "fp16");
}

TEST(RooflineTest, NotMeasuredSaysWhy) {
  const KernelWork w = work_of(kernel(vadd(8)), nullptr, Json());
  EXPECT_EQ(roofline(w, std::nullopt, kPeaks)["reason"], "the kernel was not timed");
  EXPECT_FALSE(roofline(w, 1.0, Json())["measured"]);
}

TEST(RooflineTest, BadMetadataIsA400NamingTheField) {
  for (const auto& [meta, field] :
       {std::pair{Json{{"bytes_moved", -1}}, "kernel.metadata.bytes_moved"},
        std::pair{Json{{"flops", "many"}}, "kernel.metadata.flops"},
        std::pair{Json{{"flops_dtype", "fp8"}}, "kernel.metadata.flops_dtype"}}) {
    auto k = model::parse_kernel_code(vadd(8, meta), JsonPath("kernel"), {});
    ASSERT_FALSE(k.is_ok());
    EXPECT_EQ(k.status().field_path(), field);
  }
}

TEST(ResultExtrasTest, RooflineOnGpuAndLabelsOnCpu) {
  model::JobRequest request;
  request.kernel = kernel(vadd(1 << 20));
  Json result = {{"correctness", true},
                 {"runtime_stats", {{"median", 0.005}}},
                 {"metadata", {{"inputs", Json::array()}}}};
  ResultExtrasContext gpu{&request, true, kPeaks, "", false, ""};
  Json on_gpu = result;
  add_result_extras(on_gpu, gpu);
  EXPECT_TRUE(on_gpu["roofline"]["measured"]);
  EXPECT_EQ(on_gpu["ref_roofline"]["reason"], "no reference kernel");
  EXPECT_FALSE(on_gpu["metadata"].contains("device_metrics"));

  ResultExtrasContext cpu{&request, false, Json(), "", true, ""};
  Json on_cpu = result;
  add_result_extras(on_cpu, cpu);
  EXPECT_EQ(on_cpu["roofline"]["reason"], "not measured on cpu");
  EXPECT_EQ(on_cpu["metadata"]["device_metrics"]["error"],
            "device metrics need a GPU; this job ran on the cpu device");
  EXPECT_NE(on_cpu["warnings"][0].get<std::string>().find("device metrics:"), std::string::npos);
}

TEST(ResultExtrasTest, NoRooflineFromATimingTheWallClockContradicts) {
  model::JobRequest request;
  request.kernel = kernel(vadd(1 << 20));
  request.reference = kernel(vadd(1 << 20));
  Json result = {{"correctness", true},
                 {"runtime_stats", {{"median", 0.0001}}},
                 {"ref_runtime_stats", {{"median", 0.01}}},
                 {"checks", {{{"name", "timing_consistent_with_judge_clock"}, {"passed", false}}}}};
  add_result_extras(result, {&request, true, kPeaks, "", false, ""});
  EXPECT_FALSE(result["roofline"]["measured"]);
  EXPECT_NE(result["roofline"]["reason"].get<std::string>().find("judge's clock check"),
            std::string::npos);
  EXPECT_TRUE(result["ref_roofline"]["measured"]);  // the judge timed the reference itself
}

TEST(ResultExtrasTest, UnavailableDeviceMetricsSayWhyWithoutFailingTheJob) {
  model::JobRequest request;
  request.kernel = kernel(vadd(1024));
  Json result = {{"correctness", true}, {"runtime_stats", {{"median", 0.01}}}};
  const std::string why = "Nsight Compute cannot read this GPU's performance counters: ...";
  add_result_extras(result, {&request, true, kPeaks, "", true, why});
  EXPECT_EQ(result["metadata"]["device_metrics"]["error"], why);
  EXPECT_EQ(result["correctness"], true);
  EXPECT_EQ(result["warnings"][0], "device metrics: " + why);
}

TEST(ResultExtrasTest, DeviceMetricsOfACompareUseTheSeedServersNames) {
  model::JobRequest request;
  request.kernel = kernel(vadd(1024));
  request.reference = kernel(vadd(1024));
  const std::string csv =
      "\"ID\",\"Process ID\",\"Process Name\",\"Host Name\",\"Kernel Name\",\"Context\","
      "\"Stream\",\"Block Size\",\"Grid Size\",\"Device\",\"CC\",\"gpu__time_duration.sum\","
      "\"sm__throughput.avg.pct_of_peak_sustained_elapsed\"\n"
      "\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"\",\"nsecond\",\"%\"\n"
      "\"0\",\"1\",\"p\",\"h\",\"k\",\"1\",\"7\",\"(128, 1, 1)\",\"(8, 1, 1)\",\"0\",\"9.0\","
      "\"3,000\",\"12.5\"\n";
  Json run = {{"command", {"ncu"}}, {"exit_code", 0}, {"stdout", csv}, {"stderr", ""}};
  Json result = {{"correctness", true},
                 {"runtime_stats", {{"median", 0.01}}},
                 {"device_metrics_raw", {{"candidate", run}, {"reference", run}}}};
  ResultExtrasContext c{&request, true, kPeaks, "", true, ""};
  add_result_extras(result, c);
  EXPECT_FALSE(result.contains("device_metrics_raw"));
  const Json& dm = result["metadata"]["device_metrics"];
  EXPECT_EQ(dm["custom_device_metrics"]["speed_of_light"]["sm_throughput_pct"], 12.5);
  EXPECT_EQ(dm["original_device_metrics"]["kernels"][0]["duration_ms"], 0.003);
  EXPECT_FALSE(dm.contains("error"));
}

TEST(ResultExtrasTest, RawOutputIsDroppedWhenNotAskedFor) {
  model::JobRequest request;
  request.kernel = kernel(vadd(8));
  Json result = {{"device_metrics_raw", {{"candidate", Json::object()}}}};
  add_result_extras(result, {&request, true, kPeaks, "", false, ""});
  EXPECT_FALSE(result.contains("device_metrics_raw"));
  EXPECT_FALSE(result.contains("metadata"));
}

TEST(ResultExtrasTest, MalformedWorkerOutputNeverThrows) {
  // A result comes from the job's own process: wrong types become errors, not exceptions.
  model::JobRequest request;
  request.kernel = kernel({{"source_code", "k"}, {"kernel_type", "torch"}});
  Json result = {{"correctness", "yes"},
                 {"runtime_stats", {{"median", "fast"}}},
                 {"metadata", {{"inputs", {{{"dtype", 7}, {"shape", "big"}}, 3}}}},
                 {"device_metrics_raw", {{"candidate", {{"stdout", 5}, {"exit_code", "x"}}}}}};
  ResultExtrasContext c{&request, true, kPeaks, "", true, ""};
  ASSERT_NO_THROW(add_result_extras(result, c));
  EXPECT_EQ(result["roofline"]["reason"], "the kernel was not timed");
  EXPECT_NE(result["metadata"]["device_metrics"]["original_device_metrics"]["error"]
                .get<std::string>()
                .find("ncu produced no metrics (exit code none)"),
            std::string::npos);
  Json not_object = {{"device_metrics_raw", {{"candidate", 1}}}, {"metadata", 2}};
  ASSERT_NO_THROW(add_result_extras(not_object, c));
  EXPECT_TRUE(not_object["metadata"]["device_metrics"].contains("error"));
}

TEST(DevicePeaksTest, ACachedFileIsUsedWithoutMeasuring) {
  const auto dir = std::filesystem::temp_directory_path() / "kforge-peaks-test";
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(make_dirs(dir).is_ok());
  ASSERT_TRUE(write_file_atomic(peaks_cache_path(dir, "GPU-1"), kPeaks.dump()).is_ok());
  PeaksOptions o{dir, "/nonexistent/python", "/nonexistent", {}, std::chrono::seconds(5)};
  auto peaks = load_or_measure_peaks(o, "GPU-1");
  ASSERT_TRUE(peaks.is_ok()) << peaks.status().to_string();
  EXPECT_EQ((*peaks)["bandwidth_gb_s"], 3000.0);
  // Another GPU has no file: the measurement runs, and a failing one is a clear error.
  o.python = "/bin/false";
  auto other = load_or_measure_peaks(o, "GPU-2");
  ASSERT_FALSE(other.is_ok());
  EXPECT_NE(other.status().message().find("measuring the peaks of GPU-2 exited with code 1"),
            std::string::npos)
      << other.status().message();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace kforge::jobs
