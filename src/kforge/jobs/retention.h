// Job retention: finished jobs (success, failed, cancelled) older than the retention age are
// deleted automatically, like the kernel evaluation server's periodic cleanup but with a
// configurable age (`--job-retention`, default 24 h; 0 keeps jobs forever).
//
// A RetentionSweeper calls JobService::cleanup(retention) once at start and then every
// `interval` on its own thread until it is destroyed.
//
// Example:
//   RetentionSweeper sweeper(service, {.retention = std::chrono::hours(24)});
#pragma once

#include <chrono>
#include <condition_variable>
#include <string_view>
#include <thread>

#include "kforge/common/status.h"
#include "kforge/common/thread_annotations.h"
#include "kforge/jobs/job_service.h"

namespace kforge::jobs {

inline constexpr std::chrono::seconds kDefaultJobRetention = std::chrono::hours(24);

// "0" (never), "<n>" seconds, or "<n>s", "<n>m", "<n>h", "<n>d" (n a non-negative integer).
// kInvalidArgument naming `field` otherwise.
StatusOr<std::chrono::seconds> parse_retention(std::string_view text, std::string_view field);

class RetentionSweeper {
 public:
  struct Options {
    std::chrono::seconds retention = kDefaultJobRetention;  // 0: the sweeper does nothing
    // How often to sweep; default: a tenth of the retention, between 1 s and 5 minutes.
    std::chrono::milliseconds interval{0};
  };

  RetentionSweeper(JobService& service, Options options);
  ~RetentionSweeper();  // stops and joins the thread
  RetentionSweeper(const RetentionSweeper&) = delete;
  RetentionSweeper& operator=(const RetentionSweeper&) = delete;

  // The interval a sweeper with `options` uses.
  static std::chrono::milliseconds interval_for(const Options& options);

 private:
  void loop();

  JobService& service_;
  const Options options_;
  Mutex mu_;
  std::condition_variable cv_;
  bool stopping_ GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace kforge::jobs
