#include "kforge/model/batch.h"

#include <gtest/gtest.h>

#include "kforge/model/parse.h"
#include "kforge/model/serialize.h"

namespace kforge::model {
namespace {

Json torch_kernel(const std::string& name = "Model") {
  return Json{{"source_code", "class " + name + ": pass"}, {"kernel_type", "torch"}};
}

Json triton_kernel() {
  return Json::parse(R"({
    "source_code": "import triton\n",
    "kernel_type": "triton",
    "metadata": {"entry_point": "add_kernel"},
    "io": {"args": [
      {"name": "x", "type": "tensor", "tensor_spec": {"shape": [1024], "dtype": "float32"}},
      {"name": "out", "type": "tensor", "role": "output",
       "tensor_spec": {"shape": [1024], "dtype": "float32"}},
      {"name": "n", "type": "int", "value": 1024}],
     "launch": {"grid": {"x": 4}}}
  })");
}

Json body(Json candidates) {
  return Json{{"ref_kernel", torch_kernel()},
              {"candidates", std::move(candidates)},
              {"num_correct_trials", 2},
              {"seed", 42},
              {"device", "cpu"}};
}

Status error_of(const Json& b, RequestLimits limits = {}) {
  return parse_batch_request(b, limits).status();
}

TEST(BatchParseTest, OneCompareJobPerCandidateWithTheOptionsOfTheBatch) {
  auto batch = parse_batch_request(body({torch_kernel("A"), triton_kernel()}), {});
  ASSERT_TRUE(batch.is_ok()) << batch.status().to_string();
  ASSERT_EQ(batch->jobs.size(), 2u);
  for (const JobRequest& job : batch->jobs) {
    EXPECT_EQ(job.kind, JobKind::kCompare);
    ASSERT_TRUE(job.reference.has_value());
    EXPECT_EQ(job.reference->source_code, "class Model: pass");
    EXPECT_EQ(job.num_correct_trials, 2);
    EXPECT_EQ(job.seed, uint64_t{42});
    EXPECT_EQ(job.device, "cpu");
    EXPECT_FALSE(job.batch.has_value());  // the server sets it when it submits
  }
  EXPECT_EQ(batch->jobs[0].kernel.source_code, "class A: pass");
  EXPECT_EQ(batch->jobs[1].kernel.kernel_type, KernelType::kTriton);
}

TEST(BatchParseTest, ErrorsNameTheFieldAsTheClientWroteIt) {
  Json missing = body({triton_kernel(), triton_kernel()});
  missing["candidates"][1].erase("source_code");
  Status s = error_of(missing);
  EXPECT_EQ(s.code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(s.field_path(), "candidates[1].source_code");

  Json shape = body({triton_kernel(), triton_kernel(), triton_kernel()});
  shape["candidates"][2]["io"]["args"][0]["tensor_spec"]["shape"] = Json::array({"x"});
  EXPECT_EQ(error_of(shape).field_path(), "candidates[2].io.args[0].tensor_spec.shape");

  Json type = body({triton_kernel()});
  type["candidates"][0]["kernel_type"] = "fortran";
  EXPECT_EQ(error_of(type).field_path(), "candidates[0].kernel_type");

  Json ref = body({triton_kernel()});
  ref["ref_kernel"].erase("source_code");
  EXPECT_EQ(error_of(ref).field_path(), "ref_kernel.source_code");

  Json option = body({triton_kernel()});
  option["num_correct_trials"] = 0;
  EXPECT_EQ(error_of(option).field_path(), "num_correct_trials");
}

TEST(BatchParseTest, RefusesEmptyTooManyAndMisshapenCandidates) {
  EXPECT_EQ(error_of(body(Json::array())).field_path(), "candidates");
  EXPECT_EQ(error_of(body("x")).field_path(), "candidates");
  Json none = body(Json::array());
  none.erase("candidates");
  EXPECT_EQ(error_of(none).field_path(), "candidates");
  RequestLimits limits;
  limits.max_batch_candidates = 2;
  Status s = error_of(body({torch_kernel(), torch_kernel(), torch_kernel()}), limits);
  EXPECT_EQ(s.field_path(), "candidates");
  EXPECT_NE(s.message().find("at most 2"), std::string::npos) << s.message();
  Json custom = body({torch_kernel()});
  custom["custom_kernel"] = torch_kernel();
  EXPECT_EQ(error_of(custom).field_path(), "custom_kernel");
  Json ref = body({torch_kernel()});
  ref.erase("ref_kernel");
  EXPECT_EQ(error_of(ref).field_path(), "ref_kernel");
  EXPECT_EQ(error_of(Json::array()).field_path(), "<root>");
}

TEST(BatchParseTest, MembershipSurvivesTheStoredRequest) {
  auto batch = parse_batch_request(body({torch_kernel()}), {});
  ASSERT_TRUE(batch.is_ok());
  JobRequest job = batch->jobs[0];
  job.batch = BatchMembership{"batch-abc", 3, 8};
  Json stored = to_request_json(job);
  auto back = parse_batch_membership(stored);
  ASSERT_TRUE(back.is_ok()) << back.status().to_string();
  ASSERT_TRUE(back->has_value());
  EXPECT_EQ((*back)->id, "batch-abc");
  EXPECT_EQ((*back)->index, 3);
  EXPECT_EQ((*back)->size, 8);
  auto none = parse_batch_membership(to_request_json(batch->jobs[0]));
  ASSERT_TRUE(none.is_ok());
  EXPECT_FALSE(none->has_value());
  stored["batch"]["index"] = 8;  // not below size
  EXPECT_EQ(parse_batch_membership(stored).status().field_path(), "batch");
  stored["batch"] = "x";
  EXPECT_EQ(parse_batch_membership(stored).status().field_path(), "batch");
}

TEST(BatchParseTest, AClientCannotJoinABatchThroughCompare) {
  // `batch` in a /compare body is ignored: only the server puts a job in a batch.
  Json compare = {{"ref_kernel", torch_kernel()},
                  {"custom_kernel", torch_kernel()},
                  {"batch", {{"id", "batch-x"}, {"index", 0}, {"size", 2}}}};
  auto job = parse_compare_request(compare, {});
  ASSERT_TRUE(job.is_ok()) << job.status().to_string();
  EXPECT_FALSE(job->batch.has_value());
}

}  // namespace
}  // namespace kforge::model
