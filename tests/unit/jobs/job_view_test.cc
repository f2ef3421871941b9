#include "kforge/jobs/job_view.h"

#include <gtest/gtest.h>

#include "kforge/jobs/exec_result_view.h"

namespace kforge::jobs {
namespace {

// A worker result as the Python worker reports it (runtime = median, -1 when untimed).
Json timed_result() {
  return Json::parse(R"({
    "compiled": true, "correctness": true, "runtime": 0.5,
    "runtime_stats": {"mean": 0.6, "std": 0.1, "min": 0.4, "max": 0.9, "median": 0.5,
                      "percentile_5": 0.41, "percentile_95": 0.8, "percentile_99": 0.85,
                      "trials": 100, "method": "cpu_wall_clock"},
    "ref_runtime": 1.0,
    "ref_runtime_stats": {"mean": 1.1, "std": 0.1, "min": 0.9, "max": 1.5, "median": 1.0,
                          "percentile_95": 1.3, "percentile_99": 1.4},
    "speedup": 2.0, "error_kind": null,
    "metadata": {"device": "cpu", "gpu_id": null, "kernel_type": "triton"}
  })");
}

Json untimed_failure() {
  return Json::parse(R"({
    "compiled": true, "correctness": false, "runtime": -1.0, "runtime_stats": null,
    "ref_runtime": -1.0, "ref_runtime_stats": null, "speedup": null, "error_kind": "timeout",
    "runtime_error": "the job timed out after 5 s",
    "metadata": {"device": "cuda:0", "gpu_id": 1}
  })");
}

TEST(ExecResultViewTest, RuntimeIsTheMeanAndTheMedianHasItsOwnField) {
  Json r = exec_result_view(timed_result(), /*is_compare=*/true);
  EXPECT_EQ(r["runtime"], 0.6);
  EXPECT_EQ(r["runtime_median"], 0.5);
  EXPECT_EQ(r["runtime_stats"]["percentile_5"], 0.41);  // kforge's fields stay
  EXPECT_EQ(r["ref_runtime"]["mean"], 1.1);             // a RuntimeStats object, not a number
  EXPECT_EQ(r["ref_runtime"]["percentile_99"], 1.4);
  EXPECT_EQ(r["metadata"]["gpu_id"], -1);  // an int on the cpu device too
  EXPECT_EQ(r["speedup"], 2.0);
  EXPECT_FALSE(r.contains("validation_error"));
}

TEST(ExecResultViewTest, UntimedRunsReportZeroAndNoStats) {
  Json r = exec_result_view(untimed_failure(), /*is_compare=*/true);
  EXPECT_EQ(r["runtime"], 0.0);
  EXPECT_FALSE(r.contains("runtime_stats"));
  EXPECT_FALSE(r.contains("runtime_median"));
  EXPECT_EQ(r["ref_runtime"], zero_runtime_stats());
  EXPECT_FALSE(r.contains("ref_runtime_stats"));
  EXPECT_FALSE(r.contains("speedup"));
  EXPECT_EQ(r["metadata"]["gpu_id"], 1);
  // The reason is where old clients read it, and kforge's fields stay.
  EXPECT_EQ(r["validation_error"], "the job timed out after 5 s");
  EXPECT_EQ(r["runtime_error"], "the job timed out after 5 s");
  EXPECT_EQ(r["error_kind"], "timeout");
}

TEST(ExecResultViewTest, EvaluateHasNoRefRuntime) {
  Json r = exec_result_view(timed_result(), /*is_compare=*/false);
  EXPECT_FALSE(r.contains("ref_runtime"));
}

TEST(ExecResultViewTest, AFailedReferenceIsAValidationErrorNotACompileError) {
  Json result = Json::parse(R"({
    "compiled": true, "correctness": false, "error_kind": "compile", "runtime": -1.0,
    "compilation_error": "reference kernel:\nSyntaxError: invalid syntax", "metadata": {}
  })");
  Json r = exec_result_view(result, /*is_compare=*/true);
  EXPECT_TRUE(r["compiled"].get<bool>());
  EXPECT_FALSE(r.contains("compilation_error"));
  EXPECT_EQ(r["validation_error"], "reference kernel:\nSyntaxError: invalid syntax");
}

TEST(ExecResultViewTest, ACompileFailureKeepsItsCompilationError) {
  Json result = {{"compiled", false},
                 {"correctness", false},
                 {"error_kind", "compile"},
                 {"compilation_error", "SyntaxError"}};
  Json r = exec_result_view(result, false);
  EXPECT_EQ(r["compilation_error"], "SyntaxError");
  EXPECT_FALSE(r.contains("validation_error"));
  // A kernel killed while loading still says why, in compilation_error.
  Json killed = {{"compiled", false}, {"error_kind", "timeout"}, {"runtime_error", "timed out"}};
  EXPECT_EQ(exec_result_view(killed, false)["compilation_error"], "timed out");
}

TEST(ExecResultViewTest, IsIdempotent) {
  for (const Json& result : {timed_result(), untimed_failure()}) {
    for (bool compare : {true, false}) {
      Json once = exec_result_view(result, compare);
      EXPECT_EQ(exec_result_view(once, compare), once);
    }
  }
}

model::JobRecord finished_compare() {
  model::JobRecord job;
  job.id = "abc";
  job.kind = model::JobKind::kCompare;
  job.state = model::JobState::kSucceeded;
  job.result = timed_result();
  job.device = "cpu";
  job.created_ms = 1700000000123;
  job.started_ms = 1700000001000;
  job.finished_ms = 1700000002500;
  return job;
}

TEST(JobViewTest, ASubmitAnswerHasTheOldFieldsAndKforgesState) {
  Json v = job_result_view(finished_compare());
  EXPECT_EQ(v["status"], "success");
  EXPECT_EQ(v["state"], "success");
  EXPECT_EQ(v["ref_runtime"]["mean"], 1.1);
  EXPECT_EQ(v["kernel_exec_result"]["runtime"], 0.6);
  EXPECT_EQ(v["pod_name"], pod_name());
  EXPECT_FALSE(v["pod_ip"].get<std::string>().empty());
  EXPECT_DOUBLE_EQ(v["created_at"].get<double>(), 1700000000.123);
  EXPECT_DOUBLE_EQ(v["finished_at"].get<double>(), 1700000002.5);
  EXPECT_TRUE(v["error"].is_null());
}

TEST(JobViewTest, AJobKforgeCouldNotRunIsAnErrorAnswer) {
  model::JobRecord job = finished_compare();
  job.state = model::JobState::kFailed;
  job.result = Json();
  job.error = "no worker can run this job on cpu";
  Json v = job_result_view(job);
  EXPECT_EQ(v["status"], "error");
  EXPECT_EQ(v["error"], "no worker can run this job on cpu");
  EXPECT_EQ(v["kernel_exec_result"], Json::object());
  EXPECT_EQ(v["ref_runtime"], Json::object());
}

TEST(JobViewTest, LookedUpJobsHaveTheOldStatuses) {
  model::JobRecord job = finished_compare();
  EXPECT_EQ(job_status_view(job)["status"], "completed");
  job.state = model::JobState::kQueued;
  EXPECT_EQ(job_status_view(job)["status"], "submitted");
  job.state = model::JobState::kRunning;
  job.phase = "loading";
  EXPECT_EQ(job_status_view(job)["status"], "compiling");
  EXPECT_EQ(job_status_view(job)["phase"], "loading");
  job.phase = "correctness";
  EXPECT_EQ(job_status_view(job)["status"], "validating");
  job.phase = "timing_candidate";
  EXPECT_EQ(job_status_view(job)["status"], "profiling");
  job.state = model::JobState::kCancelled;
  EXPECT_EQ(job_status_view(job)["status"], "failed");
  EXPECT_EQ(job_status_view(job)["state"], "cancelled");
}

TEST(JobViewTest, TheStateReadsBackFromEitherView) {
  for (model::JobState s :
       {model::JobState::kQueued, model::JobState::kRunning, model::JobState::kSucceeded,
        model::JobState::kFailed, model::JobState::kCancelled}) {
    model::JobRecord job = finished_compare();
    job.state = s;
    EXPECT_EQ(job_state_of_view(job_status_view(job)), s);
    EXPECT_EQ(job_state_of_view(job_result_view(job)), s);
  }
  EXPECT_EQ(job_state_of_view(Json{{"status", "completed"}}), model::JobState::kSucceeded);
  EXPECT_EQ(job_state_of_view(Json{{"status", "profiling"}}), model::JobState::kRunning);
  EXPECT_FALSE(job_state_of_view(Json{{"status", "bogus"}}).has_value());
}

TEST(JobViewTest, AListingEntryFromACutDownRecord) {
  model::JobRecord job;
  job.id = "j1";
  job.kind = model::JobKind::kCompare;
  job.state = model::JobState::kSucceeded;
  job.device = "cpu";
  job.submitter = "alice";
  job.created_ms = 2000;
  job.finished_ms = 3500;
  // As Store::list_jobs gives it: absent members are null.
  job.request = {{"kernel", {{"kernel_type", "triton"}}}};
  job.result = {{"compiled", true},     {"correctness", true},
                {"runtime", nullptr},   {"runtime_stats", {{"mean", 0.25}, {"trials", 4}}},
                {"speedup", 1.5},       {"speedup_verdict", "faster"},
                {"error_kind", nullptr}};
  const Json view = job_list_view(job);
  EXPECT_EQ(view["job_id"], "j1");
  EXPECT_EQ(view["state"], "success");
  EXPECT_EQ(view["status"], "completed");
  EXPECT_EQ(view["kernel_type"], "triton");
  EXPECT_EQ(view["submitter"], "alice");
  EXPECT_EQ(view["created_at"], 2.0);
  EXPECT_EQ(view["finished_at"], 3.5);
  EXPECT_FALSE(view.contains("started_at"));
  EXPECT_EQ(view["runtime"], 0.25);  // the mean, as in a full view
  EXPECT_EQ(view["speedup"], 1.5);
  EXPECT_EQ(view["speedup_verdict"], "faster");
  EXPECT_FALSE(view.contains("error_kind"));
  EXPECT_TRUE(view["error"].is_null());
  // A full record gives the same entry (the candidate of a compare's request).
  model::JobRecord full = job;
  full.request = {{"ref_kernel", {{"kernel_type", "torch"}}},
                  {"custom_kernel", {{"kernel_type", "triton"}, {"source_code", "..."}}}};
  full.result = {{"compiled", true},
                 {"correctness", true},
                 {"runtime_stats", {{"mean", 0.25}, {"trials", 4}}},
                 {"speedup", 1.5},
                 {"speedup_verdict", "faster"},
                 {"stdout", "lots"}};
  EXPECT_EQ(job_list_view(full), view);
}

}  // namespace
}  // namespace kforge::jobs
