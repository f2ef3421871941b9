// QueueQuota: how much unfinished work (queued or running jobs) the server holds, in jobs and
// in stored request bytes, in total and per client, and whether one more job fits.
//
// A job is admitted against four limits; the first one it would exceed refuses it:
//   per client  max_jobs_per_client, max_bytes_per_client -> kResourceExhausted (HTTP 429)
//   whole queue max_jobs, max_bytes                        -> kUnavailable (HTTP 503)
// The per-client limits come first, so one client filling its share is told to slow down
// (429) rather than told the server is full. Messages name the flag of the limit hit.
// A limit of 0 means "no limit". Bytes are the size of the canonical request as stored.
//
// Thread-compatible: the owner (JobServiceImpl) calls it under its own mutex.
//
// Example:
//   QueueQuota quota(limits);
//   KF_RETURN_IF_ERROR(quota.admit("peer 10.0.0.7", 4096));
//   ... when the job ends: quota.release("peer 10.0.0.7", 4096);
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>

#include "kforge/common/status.h"

namespace kforge::jobs {

struct QueueLimits {
  size_t max_jobs = 10000;                          // --max-queued-jobs
  size_t max_bytes = size_t{256} << 20;             // --max-queued-bytes
  size_t max_jobs_per_client = 5000;                // --max-queued-per-client
  size_t max_bytes_per_client = size_t{128} << 20;  // --max-queued-bytes-per-client
};

class QueueQuota {
 public:
  explicit QueueQuota(QueueLimits limits) : limits_(limits) {}

  // Counts the job if it fits every limit; otherwise changes nothing and says which limit.
  Status admit(const std::string& client, size_t bytes);
  // Counts a job without checking (jobs recovered after a restart were accepted before).
  void add(const std::string& client, size_t bytes);
  // Forgets a job counted by admit() or add().
  void release(const std::string& client, size_t bytes);

  size_t jobs() const { return jobs_; }
  size_t bytes() const { return bytes_; }
  size_t clients() const { return by_client_.size(); }
  const QueueLimits& limits() const { return limits_; }

 private:
  struct Usage {
    size_t jobs = 0;
    size_t bytes = 0;
  };

  const QueueLimits limits_;
  size_t jobs_ = 0;
  size_t bytes_ = 0;
  std::map<std::string, Usage> by_client_;  // clients with at least one job
};

}  // namespace kforge::jobs
