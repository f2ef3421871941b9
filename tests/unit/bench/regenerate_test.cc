#include "kforge/bench/regenerate.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>

#include "bench/bench_test_support.h"
#include "kforge/common/files.h"

namespace kforge::bench {
namespace {

using testing::health_with;
using testing::kernel_library;
using testing::timed_result;
using testing::wrong_result;

// A softmax --kernels directory on cpu at the small size, whose jobs are judged by a fake:
// a version is correct when its source carries "# FIXED", wrong otherwise.
class RegenerateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::temp_directory_path() /
           ("kforge-regenerate-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_ / "softmax");
    for (const char* v : {"v1_baseline", "v2_tiling", "v3_coalesced", "v4_optimized"}) {
      std::ofstream(dir_ / "softmax" / (std::string(v) + ".py"))
          << "\"\"\"" << v << " — test.\"\"\"\n"
          << (std::string(v) == "v2_tiling" || std::string(v) == "v3_coalesced" ? "" : "# FIXED\n");
    }
    BenchOptions o;
    o.ops = {"softmax"};
    o.sizes = {"small", "medium"};
    o.library = kernel_library();
    o.kernels_dir = dir_;
    o.torch_compile = false;
    auto plan = plan_bench(o, health_with({"cpu"}));
    ASSERT_TRUE(plan.is_ok()) << plan.status().to_string();
    plan_ = *plan;
    auto first = judge(plan_);
    ASSERT_TRUE(first.is_ok());
    outcomes_ = *first;
    run_jobs_ = [this](const BenchPlan& p) { return judge(p); };
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  StatusOr<std::vector<JobOutcome>> judge(const BenchPlan& p) {
    ++runs_;
    std::vector<JobOutcome> out;
    for (const auto& j : p.jobs) {
      const bool fixed = j.role != JobRole::kVersion ||
                         j.request.kernel.source_code.find("# FIXED") != std::string::npos;
      out.push_back(JobOutcome{true, "job-" + std::to_string(++job_), "success",
                               fixed ? timed_result(0.1) : wrong_result("3 elements differ"), ""});
    }
    return out;
  }

  Status regenerate(const std::string& command, int tries = 3) {
    RegenerateOptions r;
    r.command = command;
    r.max_tries = tries;
    r.timeout_s = 30;
    return regenerate_failures(
        plan_, outcomes_, r, run_jobs_, [this](const std::string& line) { notes_.push_back(line); },
        [this] { return stop_; });
  }

  const Json& tries(const std::string& version) {
    static const Json kNone = Json::array();
    auto it = plan_.ops[0].regeneration.find(version);
    return it == plan_.ops[0].regeneration.end() ? kNone : *it;
  }

  std::filesystem::path dir_;
  BenchPlan plan_;
  std::vector<JobOutcome> outcomes_;
  RunJobsFn run_jobs_;
  int runs_ = 0;
  int job_ = 0;
  bool stop_ = false;
  std::vector<std::string> notes_;
};

// Fixes the file ($1) on the op's second try only, and says what it was told.
constexpr const char* kFixOnSecondTry =
    "echo \"$KFORGE_OP $KFORGE_VERSION $KFORGE_ERROR_KIND try $KFORGE_TRY/$KFORGE_MAX_TRIES\"; "
    "head -1 \"$2\"; test \"$1\" = \"$KFORGE_VERSION_PATH\" || exit 9; "
    "if [ \"$KFORGE_TRY\" = 2 ]; then echo '# FIXED' >> \"$1\"; else echo '# again' >> \"$1\"; "
    "fi";

TEST_F(RegenerateTest, AFailingVersionIsRewrittenAndJudgedAgainUntilItIsCorrect) {
  ASSERT_TRUE(version_failure(plan_, outcomes_, 0, "v2_tiling").has_value());
  // v2 takes two tries; v3 gets the op's last one, which is not enough.
  ASSERT_TRUE(regenerate(kFixOnSecondTry).is_ok());
  const Json& v2 = tries("v2_tiling");
  ASSERT_EQ(v2.size(), 2u) << v2.dump(1);
  EXPECT_EQ(v2[0]["result"], "failing");
  EXPECT_EQ(v2[0]["after"]["error_kind"], "mismatch");
  EXPECT_EQ(v2[0]["after"]["error"], "small: 3 elements differ\nmedium: 3 elements differ");
  EXPECT_EQ(v2[0]["command"]["exit_code"], 0);
  EXPECT_EQ(v2[0]["command"]["output_tail"],
            "softmax v2_tiling mismatch try 1/3\nkforge bench: softmax v2_tiling failed "
            "(mismatch)\n");
  EXPECT_EQ(v2[1]["result"], "correct");
  EXPECT_EQ(v2[1]["jobs"].size(), 2u);  // small and medium, judged again
  EXPECT_FALSE(version_failure(plan_, outcomes_, 0, "v2_tiling").has_value());
  const Json& v3 = tries("v3_coalesced");
  ASSERT_EQ(v3.size(), 1u);
  EXPECT_EQ(v3[0]["try"], 3);
  EXPECT_EQ(v3[0]["result"], "failing");
  EXPECT_TRUE(version_failure(plan_, outcomes_, 0, "v3_coalesced").has_value());
  EXPECT_EQ(runs_, 1 + 3);  // the bench, then one judgement per try

  // The report shows the final files: v2 correct with its tries, v3 still failing.
  EXPECT_EQ(outcomes_.size(), plan_.jobs.size());
  const Json report = build_report(plan_, outcomes_, 0, 0);
  EXPECT_EQ(report["regenerate"]["max_tries"], 3);
  for (const Json& row : report["ops"][0]["rows"]) {
    if (row["kernel"] == "v2_tiling") {
      EXPECT_TRUE(row["correct"].get<bool>());
      EXPECT_EQ(row["retries"], 2);
      EXPECT_NE(row["origin"].get<std::string>().find("v2_tiling.py"), std::string::npos);
    }
    if (row["kernel"] == "v3_coalesced") {
      EXPECT_FALSE(row["correct"].get<bool>());
    }
  }
  EXPECT_NE(read_file(dir_ / "softmax" / "v2_tiling.py")->find("# FIXED"), std::string::npos);
  EXPECT_EQ(notes_.front(),
            "softmax v2_tiling: try 1 of 3 (mismatch): running the --regenerate-cmd");
}

TEST_F(RegenerateTest, ACommandThatFailsOrChangesNothingSpendsATryWithoutAJudgement) {
  ASSERT_TRUE(regenerate("echo broken >&2; exit 3", 2).is_ok());
  const Json& v2 = tries("v2_tiling");
  ASSERT_EQ(v2.size(), 2u);
  EXPECT_EQ(v2[0]["result"], "command_failed");
  EXPECT_EQ(v2[0]["command"]["exit"], "exited with code 3");
  EXPECT_EQ(v2[0]["command"]["output_tail"], "broken\n");
  EXPECT_TRUE(tries("v3_coalesced").empty());  // the op's two tries are spent
  EXPECT_EQ(runs_, 1);

  plan_.ops[0].regeneration = Json::object();
  ASSERT_TRUE(regenerate("true", 1).is_ok());
  EXPECT_EQ(tries("v2_tiling")[0]["result"], "unchanged");
  EXPECT_EQ(runs_, 1);
}

TEST_F(RegenerateTest, AMissingVersionIsWrittenByTheCommand) {
  std::filesystem::remove(dir_ / "softmax" / "v2_tiling.py");
  auto plan = plan_bench(plan_.options, health_with({"cpu"}));
  ASSERT_TRUE(plan.is_ok());
  plan_ = *plan;
  outcomes_ = *judge(plan_);
  EXPECT_EQ(version_failure(plan_, outcomes_, 0, "v2_tiling")->error_kind, "not_loaded");
  ASSERT_TRUE(regenerate("printf '\"\"\"v2_tiling — new.\"\"\"\\n# FIXED\\n' > \"$1\"", 1).is_ok());
  EXPECT_EQ(tries("v2_tiling")[0]["result"], "correct");
  EXPECT_EQ(plan_.ops[0].versions[1].summary_en, "new");
}

TEST_F(RegenerateTest, ATimeoutKillsTheCommandAndAStopEndsTheLoop) {
  const auto out = dir_ / "output.txt";
  auto run = run_shell_command("echo started; sleep 30", {}, {}, out,
                               std::chrono::milliseconds(300), nullptr);
  ASSERT_TRUE(run.is_ok()) << run.status().to_string();
  EXPECT_TRUE(run->timed_out);
  EXPECT_FALSE(run->exit_code.has_value());
  EXPECT_LT(run->seconds, 10);
  EXPECT_EQ(run->how, "timed out after 0.3 s (killed)");
  EXPECT_EQ(run->output_tail, "started\n");

  stop_ = true;
  Status s = regenerate("sleep 30");
  EXPECT_EQ(s.code(), ErrorCode::kCancelled);
}

TEST(RegenerateOptionsTest, BadOptionsNameTheirField) {
  BenchOptions o;
  o.kernels_dir = "/some/dir";
  RegenerateOptions r;
  r.command = "fix";
  EXPECT_TRUE(validate_regenerate(r, o).is_ok());
  struct Case {
    std::function<void(RegenerateOptions&, BenchOptions&)> edit;
    std::string field;
  };
  const std::vector<Case> cases = {
      {[](RegenerateOptions& x, BenchOptions&) { x.command = " "; }, "regenerate_cmd"},
      {[](RegenerateOptions&, BenchOptions& b) { b.kernels_dir.clear(); }, "regenerate_cmd"},
      {[](RegenerateOptions& x, BenchOptions&) { x.max_tries = 0; }, "regenerate_tries"},
      {[](RegenerateOptions& x, BenchOptions&) { x.max_tries = 11; }, "regenerate_tries"},
      {[](RegenerateOptions& x, BenchOptions&) { x.timeout_s = 0.5; }, "regenerate_timeout_s"},
  };
  for (const auto& c : cases) {
    RegenerateOptions x = r;
    BenchOptions b = o;
    c.edit(x, b);
    Status s = validate_regenerate(x, b);
    EXPECT_EQ(s.field_path(), c.field) << s.to_string();
  }
  BenchOptions library_only;
  EXPECT_NE(validate_regenerate(r, library_only).message().find("needs --kernels DIR"),
            std::string::npos);
}

}  // namespace
}  // namespace kforge::bench
