#include "kforge/jobs/batch.h"

#include <algorithm>
#include <chrono>

#include "kforge/common/random.h"
#include "kforge/jobs/job_view.h"

namespace kforge::jobs {

void BatchBook::add(BatchRecord batch) {
  MutexLock lock(mu_);
  order_.push_back(batch.id);
  batches_[batch.id] = std::move(batch);
  while (order_.size() > capacity_) {
    batches_.erase(order_.front());
    order_.pop_front();
  }
}

std::optional<BatchRecord> BatchBook::get(const std::string& id) const {
  MutexLock lock(mu_);
  auto it = batches_.find(id);
  if (it == batches_.end()) return std::nullopt;
  return it->second;
}

StatusOr<BatchRecord> submit_batch(JobService& service, BatchBook* book, model::BatchRequest batch,
                                   const Caller& caller) {
  BatchRecord record;
  record.id = "batch-" + random_hex(12);
  record.submitter = caller.principal.name;
  record.created_ms = std::chrono::duration_cast<std::chrono::milliseconds>(
                          std::chrono::system_clock::now().time_since_epoch())
                          .count();
  const int size = static_cast<int>(batch.jobs.size());
  // One seed for the whole batch: every candidate sees the same inputs.
  const uint64_t seed = batch.jobs.empty() || !batch.jobs.front().seed
                            ? secure_random_u64() >> 1  // fits a JSON int64
                            : *batch.jobs.front().seed;
  for (int i = 0; i < size; ++i) {
    model::JobRequest& job = batch.jobs[static_cast<size_t>(i)];
    job.seed = seed;
    job.batch = model::BatchMembership{record.id, i, size};
    record.timeout_s = std::max(record.timeout_s, job.timeout_s);
    auto submitted = service.submit(std::move(job), caller);
    if (!submitted.is_ok()) {
      for (const auto& id : record.job_ids)
        (void)service.cancel(id, "another candidate of the batch was refused");
      const Status& s = submitted.status();
      return Status(s.code(),
                    "candidate " + std::to_string(i) + " of the batch was refused (the " +
                        std::to_string(i) + " before it are cancelled): " + s.message(),
                    s.field_path());
    }
    record.job_ids.push_back(submitted->id);
  }
  if (book != nullptr) book->add(record);
  return record;
}

std::shared_ptr<BatchWatch> BatchWatch::start(JobService& service, const BatchRecord& batch,
                                              OnJob on_job, OnAll on_all) {
  auto watch = std::make_shared<BatchWatch>(service, batch.job_ids.size(), std::move(on_job),
                                            std::move(on_all));
  for (size_t i = 0; i < batch.job_ids.size(); ++i) {
    auto sub = service.when_done(
        batch.job_ids[i], [watch, i](const model::JobRecord& done) { watch->finished(i, done); });
    if (!sub.is_ok()) {
      // Deleted meanwhile (POST /admin/cleanup-jobs): it ends as a failed job saying so.
      model::JobRecord gone;
      gone.id = batch.job_ids[i];
      gone.state = model::JobState::kFailed;
      gone.error = sub.status().message();
      watch->finished(i, gone);
      continue;
    }
    MutexLock lock(watch->mu_);
    if (watch->ended_) {
      service.unsubscribe(*sub);
    } else {
      watch->subs_.push_back(*sub);
    }
  }
  return watch;
}

void BatchWatch::finished(size_t index, const model::JobRecord& job) {
  Json view = job_result_view(job);
  Json all;
  {
    MutexLock lock(mu_);
    if (ended_ || !views_[index].is_null()) return;
    views_[index] = std::move(view);
    ++finished_;
    on_job_(index, job, views_[index], finished_);
    if (finished_ < views_.size()) return;
    all = views_;
  }
  if (end()) on_all_(std::move(all));
}

bool BatchWatch::end() {
  std::vector<uint64_t> subs;
  {
    MutexLock lock(mu_);
    if (ended_) return false;
    ended_ = true;
    subs.swap(subs_);
  }
  for (uint64_t sub : subs)
    service_.unsubscribe(sub);
  return true;
}

Json batch_view(JobService& service, const BatchRecord& batch) {
  Json jobs = Json::array();
  Json results = Json::array();
  int finished = 0;
  for (size_t i = 0; i < batch.job_ids.size(); ++i) {
    const std::string& id = batch.job_ids[i];
    auto job = service.get(id);
    if (!job.is_ok()) {
      // Deleted since (POST /admin/cleanup-jobs): it will not finish any more.
      jobs.push_back({{"index", i}, {"job_id", id}, {"state", "unknown"}});
      results.push_back(nullptr);
      ++finished;
      continue;
    }
    const bool done = is_terminal(job->state);
    finished += done ? 1 : 0;
    jobs.push_back({{"index", i}, {"job_id", id}, {"state", to_string(job->state)}});
    results.push_back(done ? job_result_view(*job) : Json());
  }
  const bool all = finished == static_cast<int>(batch.job_ids.size());
  return {{"batch_id", batch.id},
          {"state", all ? "finished" : "running"},
          {"total", batch.job_ids.size()},
          {"finished", finished},
          {"created_at", epoch_seconds(batch.created_ms)},
          {"jobs", std::move(jobs)},
          {"results", std::move(results)}};
}

}  // namespace kforge::jobs
