#include "kforge/jobs/queue_quota.h"

#include <algorithm>

namespace kforge::jobs {
namespace {

bool over(size_t used, size_t adding, size_t limit) {
  return limit != 0 && (adding > limit || used > limit - adding);
}

std::string mib(size_t bytes) {
  return std::to_string((bytes + (size_t{1} << 19)) >> 20) + " MiB";
}

}  // namespace

Status QueueQuota::admit(const std::string& client, size_t bytes) {
  auto it = by_client_.find(client);
  const Usage mine = it == by_client_.end() ? Usage{} : it->second;
  const std::string who = client.empty() ? std::string("this client") : "client '" + client + "'";
  if (over(mine.jobs, 1, limits_.max_jobs_per_client)) {
    return Status(ErrorCode::kResourceExhausted,
                  who + " already has " + std::to_string(mine.jobs) +
                      " jobs queued or running, its quota (--max-queued-per-client " +
                      std::to_string(limits_.max_jobs_per_client) +
                      "); retry when some have finished");
  }
  if (over(mine.bytes, bytes, limits_.max_bytes_per_client)) {
    return Status(ErrorCode::kResourceExhausted,
                  who + " has " + mib(mine.bytes) +
                      " of requests queued or running and this one is " + mib(bytes) +
                      ", over its quota (--max-queued-bytes-per-client " +
                      std::to_string(limits_.max_bytes_per_client) +
                      " bytes); retry when some have finished");
  }
  if (over(jobs_, 1, limits_.max_jobs)) {
    return unavailable("the job queue is full: " + std::to_string(jobs_) +
                       " jobs are queued or running (--max-queued-jobs " +
                       std::to_string(limits_.max_jobs) + "); retry later");
  }
  if (over(bytes_, bytes, limits_.max_bytes)) {
    return unavailable("the job queue is full: " + mib(bytes_) +
                       " of requests are queued or running and this one is " + mib(bytes) +
                       " (--max-queued-bytes " + std::to_string(limits_.max_bytes) +
                       " bytes); retry later");
  }
  add(client, bytes);
  return Status::ok();
}

void QueueQuota::add(const std::string& client, size_t bytes) {
  Usage& mine = by_client_[client];
  ++mine.jobs;
  mine.bytes += bytes;
  ++jobs_;
  bytes_ += bytes;
}

void QueueQuota::release(const std::string& client, size_t bytes) {
  auto it = by_client_.find(client);
  if (it == by_client_.end()) return;
  Usage& mine = it->second;
  mine.jobs -= std::min<size_t>(mine.jobs, 1);
  mine.bytes -= std::min(mine.bytes, bytes);
  if (mine.jobs == 0) by_client_.erase(it);
  jobs_ -= std::min<size_t>(jobs_, 1);
  bytes_ -= std::min(bytes_, bytes);
}

}  // namespace kforge::jobs
