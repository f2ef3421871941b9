// Issue #37: a batch's reference file reaches only the judges of that batch, staged into the
// judge's own directory; what the judge writes goes back to the batch's directory.
#include "kforge/workers/reference_staging.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace kforge::workers {
namespace {

namespace fs = std::filesystem;

std::string read_all_staged(const fs::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_staged(const fs::path& p, const std::string& text) {
  std::ofstream(p) << text;
}

class ReferenceStagingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string dir = (fs::path(::testing::TempDir()) / "kforge_staging_XXXXXX").string();
    ASSERT_NE(mkdtemp(dir.data()), nullptr);
    root_ = dir;
    batch_dir_ = root_ / "cache" / "reference" / "batch-1";
    judge_dir_ = root_ / "scratch" / "child-1" / "judge";
    fs::create_directories(judge_dir_);
  }
  void TearDown() override { fs::remove_all(root_); }

  Json spec() const {
    return Json{
        {"job_id", "j1"},
        {"reference_reuse", {{"dir", batch_dir_.string()}, {"key", "ab12"}, {"sha256", nullptr}}}};
  }

  fs::path root_, batch_dir_, judge_dir_;
};

TEST_F(ReferenceStagingTest, TheJudgeSeesOnlyItsStagingDirectoryAndItsFileGoesBack) {
  Json job = spec();
  StagedReference staged = stage_reference(job, judge_dir_);
  const fs::path staging = judge_dir_ / "reference";
  EXPECT_EQ(job["reference_reuse"]["dir"], staging.string());
  EXPECT_EQ(job["reference_reuse"]["key"], "ab12");
  ASSERT_TRUE(fs::is_directory(staging));
  EXPECT_EQ(fs::status(staging).permissions() & fs::perms::all, fs::perms::owner_all);
  EXPECT_TRUE(fs::is_empty(staging));          // the batch has no file yet
  write_staged(staging / "ab12.pt", "first");  // what the judge writes
  staged.collect();
  EXPECT_EQ(read_all_staged(batch_dir_ / "ab12.pt"), "first");
  EXPECT_FALSE(fs::exists(staging / "ab12.pt"));
  staged.collect();  // idempotent
  EXPECT_EQ(read_all_staged(batch_dir_ / "ab12.pt"), "first");
}

TEST_F(ReferenceStagingTest, TheBatchsFileIsStagedAndAnUnchangedOneStaysWhereItIs) {
  fs::create_directories(batch_dir_);
  write_staged(batch_dir_ / "ab12.pt", "kept");
  write_staged(batch_dir_ / "other-key.pt", "not for this job");
  Json job = spec();
  StagedReference staged = stage_reference(job, judge_dir_);
  const fs::path staging = judge_dir_ / "reference";
  EXPECT_EQ(read_all_staged(staging / "ab12.pt"), "kept");
  EXPECT_FALSE(fs::exists(staging / "other-key.pt"));  // only its own key
  staged.collect();  // the judge only read it: the batch's file is left alone
  EXPECT_EQ(read_all_staged(batch_dir_ / "ab12.pt"), "kept");
  // A judge that writes a fuller file replaces the link (tmp file + rename).
  job = spec();
  staged = stage_reference(job, judge_dir_);
  write_staged(staging / "tmp", "fuller");
  fs::rename(staging / "tmp", staging / "ab12.pt");
  staged.collect();
  EXPECT_EQ(read_all_staged(batch_dir_ / "ab12.pt"), "fuller");
}

TEST_F(ReferenceStagingTest, ALinkPlantedByTheJudgeIsNotTaken) {
  Json job = spec();
  StagedReference staged = stage_reference(job, judge_dir_);
  const fs::path secret = root_ / "secret";
  write_staged(secret, "the server's");
  fs::create_symlink(secret, judge_dir_ / "reference" / "ab12.pt");
  staged.collect();
  EXPECT_FALSE(fs::exists(batch_dir_ / "ab12.pt"));
  job = spec();
  staged = stage_reference(job, judge_dir_);
  // Staging again clears what the judge left (never writes through it).
  EXPECT_FALSE(fs::exists(fs::symlink_status(judge_dir_ / "reference" / "ab12.pt")));
  ASSERT_EQ(::link(secret.c_str(), (judge_dir_ / "reference" / "ab12.pt").c_str()), 0);
  staged.collect();  // a hard link to a file elsewhere has two links: not the judge's file
  EXPECT_FALSE(fs::exists(batch_dir_ / "ab12.pt"));
}

TEST_F(ReferenceStagingTest, SpecsWithoutReuseOrWithABadKeyRunInFull) {
  Json plain = {{"job_id", "j2"}};
  StagedReference none = stage_reference(plain, judge_dir_);
  none.collect();
  EXPECT_EQ(plain, (Json{{"job_id", "j2"}}));
  EXPECT_FALSE(fs::exists(judge_dir_ / "reference"));
  Json bad = spec();
  bad["reference_reuse"]["key"] = "../../etc/passwd";
  stage_reference(bad, judge_dir_).collect();
  EXPECT_FALSE(bad.contains("reference_reuse"));
}

}  // namespace
}  // namespace kforge::workers
