#include "kforge/jobs/batch.h"

#include <gtest/gtest.h>

#include "fakes/fake_job_service.h"

namespace kforge::jobs {
namespace {

using namespace std::chrono_literals;

model::BatchRequest three_candidates(std::optional<uint64_t> seed = std::nullopt) {
  Json candidates = Json::array();
  for (const char* name : {"A", "B", "C"})
    candidates.push_back(
        {{"source_code", std::string("class ") + name + ": pass"}, {"kernel_type", "torch"}});
  Json body = {{"ref_kernel", {{"source_code", "class Model: pass"}, {"kernel_type", "torch"}}},
               {"candidates", candidates},
               {"device", "cpu"}};
  if (seed) body["seed"] = *seed;
  auto batch = model::parse_batch_request(body, {});
  KF_CHECK(batch.is_ok(), batch.status().to_string());
  return std::move(batch).value();
}

// Refuses every submit after the first `accepted`.
class RefusingJobService : public testing::FakeJobService {
 public:
  explicit RefusingJobService(int accepted) : accepted_(accepted) {}
  StatusOr<model::JobRecord> submit(model::JobRequest request,
                                    const jobs::Caller& client) override {
    if (accepted_-- <= 0) return unavailable("the queue is full (--max-queued-jobs)");
    return FakeJobService::submit(std::move(request), client);
  }

 private:
  int accepted_;
};

TEST(BatchTest, EveryCandidateIsAJobWithTheBatchsSeedAndPlace) {
  testing::FakeJobService service;
  BatchBook book;
  auto batch = submit_batch(service, &book, three_candidates(), "peer x");
  ASSERT_TRUE(batch.is_ok()) << batch.status().to_string();
  ASSERT_EQ(batch->job_ids.size(), 3u);
  EXPECT_EQ(batch->id.rfind("batch-", 0), 0u);
  std::optional<uint64_t> seed;
  for (int i = 0; i < 3; ++i) {
    auto request = service.submitted_request(batch->job_ids[static_cast<size_t>(i)]);
    ASSERT_TRUE(request.has_value());
    ASSERT_TRUE(request->batch.has_value());
    EXPECT_EQ(request->batch->id, batch->id);
    EXPECT_EQ(request->batch->index, i);
    EXPECT_EQ(request->batch->size, 3);
    ASSERT_TRUE(request->seed.has_value());  // drawn once by the batch, not per job
    if (!seed) seed = request->seed;
    EXPECT_EQ(request->seed, seed);
    EXPECT_EQ(service.submitted_client(batch->job_ids[static_cast<size_t>(i)]), "peer x");
  }
  auto recorded = book.get(batch->id);
  ASSERT_TRUE(recorded.has_value());
  EXPECT_EQ(recorded->job_ids, batch->job_ids);
  EXPECT_FALSE(book.get("batch-unknown").has_value());

  auto given = submit_batch(service, nullptr, three_candidates(99), "peer x");
  ASSERT_TRUE(given.is_ok());
  EXPECT_EQ(service.submitted_request(given->job_ids[2])->seed, uint64_t{99});
}

TEST(BatchTest, ARefusedCandidateCancelsTheOnesBeforeIt) {
  RefusingJobService service(2);
  auto batch = submit_batch(service, nullptr, three_candidates(), "peer x");
  ASSERT_FALSE(batch.is_ok());
  EXPECT_EQ(batch.status().code(), ErrorCode::kUnavailable);
  EXPECT_NE(batch.status().message().find("candidate 2"), std::string::npos)
      << batch.status().message();
  ASSERT_EQ(service.job_ids().size(), 2u);
  for (const auto& id : service.job_ids())
    EXPECT_EQ(service.get(id)->state, model::JobState::kCancelled);
}

TEST(BatchTest, TheBookKeepsTheMostRecentBatches) {
  BatchBook book(2);
  for (const char* id : {"b1", "b2", "b3"})
    book.add(BatchRecord{id, {}, 0, 0, ""});
  EXPECT_FALSE(book.get("b1").has_value());
  EXPECT_TRUE(book.get("b2").has_value());
  EXPECT_TRUE(book.get("b3").has_value());
}

TEST(BatchTest, TheWatchReportsEachJobInFinishingOrderThenAllInBatchOrder) {
  testing::FakeJobService service;
  auto batch = submit_batch(service, nullptr, three_candidates(), "peer x");
  ASSERT_TRUE(batch.is_ok());
  std::vector<std::pair<size_t, size_t>> seen;  // (index, finished so far)
  std::optional<Json> all;
  int all_calls = 0;
  auto watch = BatchWatch::start(
      service, *batch,
      [&](size_t index, const model::JobRecord&, const Json& view, size_t finished) {
        EXPECT_EQ(view["job_id"], batch->job_ids[index]);
        seen.emplace_back(index, finished);
      },
      [&](Json views) {
        all = std::move(views);
        ++all_calls;
      });
  EXPECT_EQ(service.waiter_count(), 3u);
  ASSERT_TRUE(service.finish(batch->job_ids[2], Json{{"correctness", true}}).is_ok());
  ASSERT_TRUE(service.fail(batch->job_ids[0], "no worker").is_ok());
  EXPECT_FALSE(all.has_value());
  ASSERT_TRUE(service.finish(batch->job_ids[1], Json{{"correctness", false}}).is_ok());
  EXPECT_EQ(seen, (std::vector<std::pair<size_t, size_t>>{{2, 1}, {0, 2}, {1, 3}}));
  ASSERT_EQ(all_calls, 1);
  ASSERT_TRUE(all->is_array() && all->size() == 3);
  for (size_t i = 0; i < 3; ++i)
    EXPECT_EQ((*all)[i]["job_id"], batch->job_ids[i]);
  EXPECT_EQ((*all)[0]["state"], "failed");
  EXPECT_EQ(service.waiter_count(), 0u);
  EXPECT_FALSE(watch->end());  // already ended by the last job
  // A batch view of the same jobs says they all finished.
  Json view = batch_view(service, *batch);
  EXPECT_EQ(view["state"], "finished");
  EXPECT_EQ(view["finished"], 3);
}

TEST(BatchTest, AnEndedWatchDropsItsSubscriptionsAndNeverAnswers) {
  testing::FakeJobService service;
  auto batch = submit_batch(service, nullptr, three_candidates(), "peer x");
  ASSERT_TRUE(batch.is_ok());
  int all_calls = 0;
  auto watch = BatchWatch::start(
      service, *batch, [](size_t, const model::JobRecord&, const Json&, size_t) {},
      [&](Json) { ++all_calls; });
  ASSERT_TRUE(service.finish(batch->job_ids[0], Json::object()).is_ok());
  EXPECT_TRUE(watch->end());
  EXPECT_FALSE(watch->end());
  EXPECT_EQ(service.waiter_count(), 0u);
  ASSERT_TRUE(service.finish(batch->job_ids[1], Json::object()).is_ok());
  ASSERT_TRUE(service.finish(batch->job_ids[2], Json::object()).is_ok());
  EXPECT_EQ(all_calls, 0);
  Json view = batch_view(service, *batch);
  EXPECT_EQ(view["state"], "finished");
  EXPECT_EQ(view["jobs"][1]["state"], "success");
}

TEST(BatchTest, ABatchOfFinishedJobsIsAnsweredAtOnce) {
  testing::FakeJobService service;
  auto batch = submit_batch(service, nullptr, three_candidates(), "peer x");
  ASSERT_TRUE(batch.is_ok());
  for (const auto& id : batch->job_ids)
    ASSERT_TRUE(service.finish(id, Json::object()).is_ok());
  int all_calls = 0;
  BatchWatch::start(
      service, *batch, [](size_t, const model::JobRecord&, const Json&, size_t) {},
      [&](Json views) {
        EXPECT_EQ(views.size(), 3u);
        ++all_calls;
      });
  EXPECT_EQ(all_calls, 1);
  EXPECT_EQ(service.waiter_count(), 0u);
}

}  // namespace
}  // namespace kforge::jobs
