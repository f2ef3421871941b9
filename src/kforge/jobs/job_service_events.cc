// JobServiceImpl's events (job_service_impl.h): progress and change notifications to their
// subscribers, when_done / on_progress / on_job_changes subscriptions and unsubscribe. A
// callback runs without the service's lock held.
#include <algorithm>

#include "kforge/common/log.h"
#include "kforge/jobs/job_access.h"
#include "kforge/jobs/job_service_impl.h"

namespace kforge::jobs {

void JobServiceImpl::publish_progress(const std::string& id, JobProgress progress) {
  std::vector<ProgressCallback> subs;
  JobChange change;
  {
    MutexLock lock(mu_);
    auto it = active_.find(id);
    if (it == active_.end()) return;
    // Progress only moves forward, whatever order phases report in.
    progress.fraction = std::max(progress.fraction, it->second.last_fraction);
    it->second.last_fraction = progress.fraction;
    Active& a = it->second;
    a.record.phase = progress.phase;
    const int64_t now = clock_.unix_ms();
    if (progress.phase == "loading" && a.loading_ms == 0) a.loading_ms = now;
    if (progress.phase == "correctness" && a.checking_ms == 0) a.checking_ms = now;
    if (progress.phase.starts_with("timing") && a.timing_ms == 0) a.timing_ms = now;
    for (const auto& [sub, cb] : it->second.progress_subs)
      subs.push_back(cb);
    change = {id, a.record.submitter, a.record.state, progress.phase};
  }
  for (auto& cb : subs)
    cb(progress);
  publish_change(change);
}

void JobServiceImpl::publish_change(const JobChange& change) {
  std::vector<ChangeCallback> listeners;
  {
    MutexLock lock(mu_);
    for (const auto& [sub, cb] : change_subs_)
      listeners.push_back(cb);
  }
  for (auto& cb : listeners)
    cb(change);
}

StatusOr<uint64_t> JobServiceImpl::on_job_changes(ChangeCallback changed) {
  if (shared_ != nullptr) {
    return Status(ErrorCode::kUnimplemented,
                  "with a shared queue other nodes run jobs too: poll GET /jobs");
  }
  MutexLock lock(mu_);
  const uint64_t sub = next_subscription_++;
  change_subs_[sub] = std::move(changed);
  return sub;
}

StatusOr<uint64_t> JobServiceImpl::when_done(const std::string& id, DoneCallback done) {
  uint64_t sub = 0;
  {
    MutexLock lock(mu_);
    sub = next_subscription_++;
    auto it = active_.find(id);
    if (it != active_.end()) {
      it->second.done_subs[sub] = std::move(done);
      subscription_[sub] = id;
      return sub;
    }
    if (shared_ != nullptr) {
      // Registered before the store is read, so a finish on another node cannot slip between.
      watched_[id].done_subs[sub] = done;
      subscription_[sub] = id;
    }
  }
  // Not active: finished (or unknown). finish() stores before it removes from active_.
  auto stored = store_->get_job(id);
  if (shared_ != nullptr) {
    if (stored.is_ok() && *stored && !is_terminal((*stored)->state)) return sub;
    // Finished or unknown: answer now, unless an event already did.
    DoneCallback mine;
    {
      MutexLock lock(mu_);
      subscription_.erase(sub);
      if (auto w = watched_.find(id); w != watched_.end()) {
        if (auto d = w->second.done_subs.find(sub); d != w->second.done_subs.end()) {
          mine = std::move(d->second);
          w->second.done_subs.erase(d);
        }
        if (w->second.client.empty() && w->second.done_subs.empty() &&
            w->second.progress_subs.empty()) {
          watched_.erase(w);
        }
      }
    }
    KF_RETURN_IF_ERROR(stored.status());
    if (!*stored) return unknown_job(id);
    if (mine) mine(**stored);
    return sub;
  }
  KF_RETURN_IF_ERROR(stored.status());
  if (!*stored) return unknown_job(id);
  if (!is_terminal((*stored)->state)) {
    return failed_precondition("job '" + id + "' is " + std::string(to_string((*stored)->state)) +
                               " but not scheduled on this server");
  }
  done(**stored);
  return sub;
}

StatusOr<uint64_t> JobServiceImpl::on_progress(const std::string& id, ProgressCallback progress) {
  const std::string not_unfinished = "job '" + id + "' is not queued or running";
  {
    MutexLock lock(mu_);
    auto it = active_.find(id);
    if (it != active_.end()) {
      uint64_t sub = next_subscription_++;
      it->second.progress_subs[sub] = std::move(progress);
      subscription_[sub] = id;
      return sub;
    }
    if (shared_ == nullptr) return failed_precondition(not_unfinished);
  }
  // Shared queue: a job of the queue, or of another node (which reports no progress here;
  // the subscription moves to this node's run if this node claims it).
  KF_ASSIGN_OR_RETURN(auto stored, store_->get_job(id));
  if (!stored || is_terminal(stored->state)) return failed_precondition(not_unfinished);
  MutexLock lock(mu_);
  uint64_t sub = next_subscription_++;
  if (auto it = active_.find(id); it != active_.end()) {
    it->second.progress_subs[sub] = std::move(progress);
  } else {
    watched_[id].progress_subs[sub] = std::move(progress);
  }
  subscription_[sub] = id;
  return sub;
}

void JobServiceImpl::unsubscribe(uint64_t subscription) {
  MutexLock lock(mu_);
  if (change_subs_.erase(subscription) > 0) return;
  auto s = subscription_.find(subscription);
  if (s == subscription_.end()) return;
  auto it = active_.find(s->second);
  if (it != active_.end()) {
    it->second.done_subs.erase(subscription);
    it->second.progress_subs.erase(subscription);
  }
  if (auto w = watched_.find(s->second); w != watched_.end()) {
    w->second.done_subs.erase(subscription);
    w->second.progress_subs.erase(subscription);
    if (w->second.client.empty() && w->second.done_subs.empty() &&
        w->second.progress_subs.empty()) {
      watched_.erase(w);
    }
  }
  subscription_.erase(s);
}

}  // namespace kforge::jobs
