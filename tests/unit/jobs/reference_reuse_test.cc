#include "kforge/jobs/reference_reuse.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "kforge/common/random.h"

namespace kforge::jobs {
namespace {

namespace fs = std::filesystem;

const std::string kDigest(64, 'a');
const std::string kOther(64, 'b');

model::JobRequest batch_job(int index, int size, uint64_t seed = 7) {
  model::JobRequest r;
  r.kind = model::JobKind::kCompare;
  r.reference =
      model::KernelCode{"class Model: pass", model::KernelType::kTorch, {}, Json::object()};
  r.kernel =
      model::KernelCode{"class ModelNew: pass", model::KernelType::kTorch, {}, Json::object()};
  r.seed = seed;
  r.batch = model::BatchMembership{"batch-1", index, size};
  return r;
}

Json result_with(const std::string& digest) {
  return {{"reference_reuse", {{"sha256", digest}}}};
}

class ReferenceReuseTest : public ::testing::Test {
 protected:
  fs::path root_ = fs::temp_directory_path() / ("kforge-reuse-" + random_hex(6));
  void TearDown() override { fs::remove_all(root_); }
};

TEST_F(ReferenceReuseTest, TheFirstJobGetsNoDigestTheNextGetsTheOneReported) {
  ReferenceReuse reuse(root_);
  Json first = reuse.spec_for(batch_job(0, 3), "cpu");
  ASSERT_TRUE(first.is_object());
  EXPECT_EQ(first["dir"], (root_ / "batch-1").string());
  EXPECT_TRUE(first["sha256"].is_null());
  reuse.job_ended(batch_job(0, 3), "cpu", result_with(kDigest));
  Json second = reuse.spec_for(batch_job(1, 3), "cpu");
  EXPECT_EQ(second["key"], first["key"]);
  EXPECT_EQ(second["sha256"], kDigest);
  // A later job that wrote a fuller file replaces the digest.
  reuse.job_ended(batch_job(1, 3), "cpu", result_with(kOther));
  EXPECT_EQ(reuse.spec_for(batch_job(2, 3), "cpu")["sha256"], kOther);
}

TEST_F(ReferenceReuseTest, KeysSeparateDevicesSeedsAndInputs) {
  const std::string key = ReferenceReuse::key_of(batch_job(0, 2), "cuda:0");
  EXPECT_EQ(key.size(), 64u);
  EXPECT_EQ(ReferenceReuse::key_of(batch_job(1, 2), "cuda:0"), key);  // the candidate's code
  EXPECT_NE(ReferenceReuse::key_of(batch_job(0, 2), "cuda:1"), key);
  EXPECT_NE(ReferenceReuse::key_of(batch_job(0, 2, 8), "cuda:0"), key);
  model::JobRequest trials = batch_job(0, 2);
  trials.num_correct_trials = 9;
  EXPECT_NE(ReferenceReuse::key_of(trials, "cuda:0"), key);
  ReferenceReuse reuse(root_);
  reuse.job_ended(batch_job(0, 2), "cuda:0", result_with(kDigest));
  EXPECT_TRUE(reuse.spec_for(batch_job(1, 2), "cuda:1")["sha256"].is_null());
}

model::JobRequest triton_job(int64_t block, int64_t warps, int64_t elements = 4096) {
  model::JobRequest r = batch_job(0, 2);
  model::IOContract io;
  model::ArgSpec x{"x", model::ArgType::kTensor, Json(), model::TensorSpec{},
                   model::ArgRole::kInput};
  x.tensor_spec->shape = {elements};
  io.args.push_back(x);
  io.args.push_back(model::ArgSpec{"n", model::ArgType::kInt, Json(elements), {}, {}});
  io.args.push_back(
      model::ArgSpec{"BLOCK_SIZE", model::ArgType::kInt, Json(block), {}, {}, /*is_meta=*/true});
  io.launch = model::LaunchConfig{};
  io.launch->num_warps = static_cast<int>(warps);
  r.kernel.kernel_type = model::KernelType::kTriton;
  r.kernel.io = io;
  return r;
}

TEST_F(ReferenceReuseTest, CandidatesDifferingOnlyInLaunchOrMetaArgumentsShareAKey) {
  const std::string key = ReferenceReuse::key_of(triton_job(256, 4), "cuda:0");
  EXPECT_EQ(ReferenceReuse::key_of(triton_job(1024, 8), "cuda:0"), key);
  // Different inputs (a tensor's shape, a scalar the reference may be given) need their own run.
  EXPECT_NE(ReferenceReuse::key_of(triton_job(256, 4, 8192), "cuda:0"), key);
  EXPECT_NE(ReferenceReuse::key_of(batch_job(0, 2), "cuda:0"), key);
}

TEST_F(ReferenceReuseTest, OnlyAWellFormedDigestIsKept) {
  ReferenceReuse reuse(root_);
  reuse.job_ended(batch_job(0, 4), "cpu", result_with("../../etc/passwd"));
  reuse.job_ended(batch_job(1, 4), "cpu", Json());  // a worker failure: no result
  reuse.job_ended(batch_job(2, 4), "cpu", result_with(std::string(64, 'A')));
  EXPECT_TRUE(reuse.spec_for(batch_job(3, 4), "cpu")["sha256"].is_null());
}

TEST_F(ReferenceReuseTest, TheLastJobRemovesTheBatchsFilesAndDigests) {
  ReferenceReuse reuse(root_);
  fs::create_directories(root_ / "batch-1");
  std::ofstream(root_ / "batch-1" / "k.pt") << "x";
  reuse.job_ended(batch_job(0, 2), "cpu", result_with(kDigest));
  EXPECT_TRUE(fs::exists(root_ / "batch-1" / "k.pt"));
  reuse.job_ended(batch_job(1, 2), "cpu", result_with(kDigest));
  EXPECT_FALSE(fs::exists(root_ / "batch-1"));
  EXPECT_TRUE(reuse.spec_for(batch_job(1, 2), "cpu")["sha256"].is_null());
}

TEST_F(ReferenceReuseTest, NothingForJobsOutsideABatchOrWithoutAReferenceOrWhenOff) {
  ReferenceReuse reuse(root_);
  model::JobRequest plain = batch_job(0, 1);
  plain.batch.reset();
  EXPECT_TRUE(reuse.spec_for(plain, "cpu").is_null());
  model::JobRequest evaluate = batch_job(0, 1);
  evaluate.reference.reset();
  EXPECT_TRUE(reuse.spec_for(evaluate, "cpu").is_null());
  ReferenceReuse off{fs::path()};
  EXPECT_TRUE(off.spec_for(batch_job(0, 1), "cpu").is_null());
}

TEST_F(ReferenceReuseTest, ClearRemovesEveryBatch) {
  fs::create_directories(root_ / "batch-old");
  ReferenceReuse reuse(root_);
  reuse.job_ended(batch_job(0, 2), "cpu", result_with(kDigest));
  reuse.clear();
  EXPECT_FALSE(fs::exists(root_ / "batch-old"));
  EXPECT_TRUE(fs::exists(root_));
  EXPECT_TRUE(reuse.spec_for(batch_job(1, 2), "cpu")["sha256"].is_null());
}

}  // namespace
}  // namespace kforge::jobs
