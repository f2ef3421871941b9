#include "kforge/jobs/retention.h"

#include <algorithm>
#include <charconv>
#include <string>

#include "kforge/common/log.h"

namespace kforge::jobs {

StatusOr<std::chrono::seconds> parse_retention(std::string_view text, std::string_view field) {
  auto bad = [&] {
    return invalid_argument(
        "must be 0 or a duration such as 3600, 90m, 24h or 7d, got '" + std::string(text) + "'",
        std::string(field));
  };
  if (text.empty()) return bad();
  int64_t unit = 1;
  std::string_view digits = text;
  switch (text.back()) {
    case 's':
      digits.remove_suffix(1);
      break;
    case 'm':
      unit = 60;
      digits.remove_suffix(1);
      break;
    case 'h':
      unit = 3600;
      digits.remove_suffix(1);
      break;
    case 'd':
      unit = 86400;
      digits.remove_suffix(1);
      break;
    default:
      break;
  }
  int64_t n = 0;
  const auto [end, err] = std::from_chars(digits.data(), digits.data() + digits.size(), n);
  if (digits.empty() || err != std::errc() || end != digits.data() + digits.size() || n < 0) {
    return bad();
  }
  constexpr int64_t kMaxSeconds = int64_t{100} * 365 * 86400;
  if (n > kMaxSeconds / unit) return bad();
  return std::chrono::seconds(n * unit);
}

std::chrono::milliseconds RetentionSweeper::interval_for(const Options& options) {
  if (options.interval.count() > 0) return options.interval;
  const auto tenth = std::chrono::duration_cast<std::chrono::milliseconds>(options.retention) / 10;
  return std::clamp<std::chrono::milliseconds>(tenth, std::chrono::seconds(1),
                                               std::chrono::minutes(5));
}

RetentionSweeper::RetentionSweeper(JobService& service, Options options)
    : service_(service), options_(options) {
  if (options_.retention.count() > 0) thread_ = std::thread([this] { loop(); });
}

RetentionSweeper::~RetentionSweeper() {
  {
    MutexLock lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void RetentionSweeper::loop() {
  const auto interval = interval_for(options_);
  MutexLock lock(mu_);
  while (!stopping_) {
    lock.unlock();
    auto deleted = service_.cleanup(options_.retention);
    if (!deleted.is_ok()) {
      KF_LOG_WARN("job retention: cleanup failed: {}", deleted.status().to_string());
    } else if (*deleted > 0) {
      KF_LOG_INFO("job retention: deleted {} job(s) finished more than {} s ago", *deleted,
                  options_.retention.count());
    }
    lock.lock();
    lock.wait_for(cv_, interval, [this]() REQUIRES(mu_) { return stopping_; });
  }
}

}  // namespace kforge::jobs
