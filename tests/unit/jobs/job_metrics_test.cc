#include "kforge/jobs/job_metrics.h"

#include <gtest/gtest.h>

namespace kforge::jobs {
namespace {

std::string written(const JobMetrics& m) {
  PrometheusText out;
  m.write(out);
  return out.text();
}

bool has_line(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos;
}

TEST(JobMetrics, CountsFinishedJobsByStateAndKernelType) {
  JobMetrics m;
  m.job_finished("triton", model::JobState::kSucceeded, Json(), 0.5);
  m.job_finished("triton", model::JobState::kSucceeded, Json(), 0.7);
  m.job_finished("cuda", model::JobState::kFailed, Json(), -1);
  const std::string text = written(m);
  EXPECT_TRUE(
      has_line(text, "kforge_jobs_finished_total{state=\"success\",kernel_type=\"triton\"} 2"));
  EXPECT_TRUE(
      has_line(text, "kforge_jobs_finished_total{state=\"failed\",kernel_type=\"cuda\"} 1"));
  // A job that never started has no run time.
  EXPECT_TRUE(has_line(text, "kforge_job_run_seconds_count{kernel_type=\"triton\"} 2"));
  EXPECT_EQ(text.find("kforge_job_run_seconds_count{kernel_type=\"cuda\"}"), std::string::npos);
}

TEST(JobMetrics, PhasesBecomeHistogramsInSeconds) {
  JobMetrics m;
  Json result = {{"phases_ms", {{"inputs", 3.0}, {"timing", 1500.0}}}};
  m.job_finished("torch", model::JobState::kSucceeded, result, 2.0);
  m.job_finished("torch", model::JobState::kSucceeded, result, 2.0);
  const std::string text = written(m);
  EXPECT_TRUE(has_line(
      text,
      "kforge_job_phase_seconds_bucket{phase=\"inputs\",kernel_type=\"torch\",le=\"0.005\"} 2"));
  EXPECT_TRUE(has_line(
      text,
      "kforge_job_phase_seconds_bucket{phase=\"inputs\",kernel_type=\"torch\",le=\"0.0025\"} 0"));
  EXPECT_TRUE(has_line(
      text, "kforge_job_phase_seconds_bucket{phase=\"timing\",kernel_type=\"torch\",le=\"1\"} 0"));
  EXPECT_TRUE(has_line(
      text,
      "kforge_job_phase_seconds_bucket{phase=\"timing\",kernel_type=\"torch\",le=\"2.5\"} 2"));
  EXPECT_TRUE(
      has_line(text, "kforge_job_phase_seconds_sum{phase=\"timing\",kernel_type=\"torch\"} 3"));
  EXPECT_TRUE(
      has_line(text, "kforge_job_phase_seconds_count{phase=\"inputs\",kernel_type=\"torch\"} 2"));
}

TEST(JobMetrics, UnknownPhasesAndBadValuesAreNotRecorded) {
  JobMetrics m;
  Json result = {
      {"phases_ms", {{"launch", 1.0}, {"import", -4.0}, {"compile", "fast"}, {"compare", 2.0}}}};
  m.job_finished("torch", model::JobState::kSucceeded, result, 1.0);
  m.job_finished("torch", model::JobState::kSucceeded, Json{{"phases_ms", "none"}}, 1.0);
  const std::string text = written(m);
  EXPECT_EQ(text.find("phase=\"launch\""), std::string::npos);
  EXPECT_EQ(text.find("phase=\"import\""), std::string::npos);
  EXPECT_EQ(text.find("phase=\"compile\""), std::string::npos);
  EXPECT_TRUE(
      has_line(text, "kforge_job_phase_seconds_count{phase=\"compare\",kernel_type=\"torch\"} 1"));
}

TEST(JobMetrics, EveryFamilyHasItsTypeLineEvenWhenEmpty) {
  const std::string text = written(JobMetrics{});
  EXPECT_NE(text.find("# TYPE kforge_jobs_finished_total counter\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE kforge_job_phase_seconds histogram\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE kforge_job_run_seconds histogram\n"), std::string::npos);
}

}  // namespace
}  // namespace kforge::jobs
