// JobServiceImpl's shared-queue coordinator (job_service_impl.h, "Shared queue"): claims
// queued jobs for this node's idle devices, renews leases, recovers the jobs of nodes whose
// lease expired and wakes when_done waiters for jobs finished on any node.
#include <algorithm>
#include <chrono>

#include "kforge/common/log.h"
#include "kforge/jobs/job_service_impl.h"

namespace kforge::jobs {

void JobServiceImpl::claim_for_idle_devices() {
  for (const auto& d : devices_) {
    {
      MutexLock lock(mu_);
      if (stopping_) return;
      const bool busy = std::any_of(active_.begin(), active_.end(), [&d](const auto& entry) {
        return entry.second.record.device == d.device.name;
      });
      if (busy) continue;
    }
    // A job asks for this device, or (on a GPU) for whichever GPU frees first.
    std::vector<std::string> targets = {d.device.name};
    if (d.device.is_gpu) targets.emplace_back(scheduler::kAnyGpu);
    auto claimed = shared_->claim(targets, d.device.name, clock_.unix_ms());
    if (!claimed.is_ok()) {
      KF_LOG_WARN("claiming a job for {}: {}", d.device.name, claimed.status().message());
      return;
    }
    if (!*claimed) continue;
    model::JobRecord record = std::move(**claimed);
    const std::string id = record.id;
    {
      MutexLock lock(mu_);
      Active active;
      active.record = std::move(record);
      active.record.state = model::JobState::kQueued;  // until its runner starts it
      active.claimed = true;
      active.target = d.device.name;
      // The candidate's kernel_type as stored (the canonical request form), without
      // validating the whole request here: run_job reads and checks it once.
      const Json& stored = active.record.request;
      const char* side =
          active.record.kind == model::JobKind::kCompare ? "custom_kernel" : "kernel";
      if (stored.contains(side) && stored[side].is_object()) {
        const Json& type = stored[side].value("kernel_type", Json());
        if (type.is_string() && model::kernel_type_from(type.get<std::string>())) {
          active.kernel_type = type.get<std::string>();
        }
      }
      if (auto w = watched_.find(id); w != watched_.end()) {
        active.progress_subs = std::move(w->second.progress_subs);
        w->second.progress_subs.clear();
      }
      active_[id] = std::move(active);
    }
    KF_LOG_INFO("job={} claimed for {} (node {})", id, d.device.name, shared_->node_id());
    scheduler_->enqueue(id, d.device.name);
  }
}

void JobServiceImpl::resolve_watched(const std::vector<std::string>& ids) {
  for (const auto& id : ids) {
    bool waited_for = false;
    {
      MutexLock lock(mu_);
      auto it = watched_.find(id);
      if (it == watched_.end()) continue;
      waited_for = !it->second.done_subs.empty();
    }
    std::optional<model::JobRecord> done;
    if (waited_for) {
      auto stored = store_->get_job(id);
      if (!stored.is_ok()) continue;  // the next event or poll tries again
      if (*stored && !is_terminal((*stored)->state)) continue;
      done = std::move(*stored);
    }
    Watched w;
    {
      MutexLock lock(mu_);
      auto it = watched_.find(id);
      if (it == watched_.end()) continue;
      if (!waited_for && !it->second.done_subs.empty()) continue;  // a waiter came: next time
      w = std::move(it->second);
      watched_.erase(it);
      if (!w.client.empty()) quota_.release(w.client, w.request_bytes);
      for (const auto& [sub, _] : w.done_subs)
        subscription_.erase(sub);
      for (const auto& [sub, _] : w.progress_subs)
        subscription_.erase(sub);
    }
    if (!done) continue;  // deleted meanwhile, or nobody waits: nothing to answer
    for (auto& [sub, cb] : w.done_subs)
      cb(*done);
  }
}

void JobServiceImpl::coordinator_loop() {
  using std::chrono::milliseconds;
  constexpr milliseconds kPollEvery{2000};  // waiters' safety net when an event is missed
  constexpr milliseconds kMaxWait{500};     // claims are retried at least this often
  auto next_beat = std::chrono::steady_clock::now();
  auto next_poll = next_beat + kPollEvery;
  while (true) {
    {
      MutexLock lock(mu_);
      if (stopping_) return;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= next_beat) {
      next_beat = now + options_.heartbeat;
      std::vector<std::string> running;
      {
        MutexLock lock(mu_);
        for (const auto& [id, a] : active_) {
          if (a.claimed) running.push_back(id);
        }
      }
      if (auto beat = shared_->heartbeat(running); beat.is_ok()) {
        for (const auto& c : *beat)
          cancel_if_local(c.id, c.reason);
      } else {
        KF_LOG_WARN("node {}: lease renewal failed: {}", shared_->node_id(),
                    beat.status().message());
      }
      if (auto n = shared_->recover_expired(options_.max_attempts, clock_.unix_ms()); !n.is_ok()) {
        KF_LOG_WARN("recovering jobs of dead nodes: {}", n.status().message());
      } else if (*n > 0) {
        recovered_ += *n;
        KF_LOG_INFO("recovered {} job(s) whose node stopped renewing its lease", *n);
      }
    }
    claim_for_idle_devices();
    const auto wait = std::min(
        kMaxWait, std::max(milliseconds(1), std::chrono::duration_cast<milliseconds>(
                                                next_beat - std::chrono::steady_clock::now())));
    auto events = shared_->wait_events(wait);
    if (!events.is_ok()) {
      KF_LOG_WARN("node {}: job events: {}", shared_->node_id(), events.status().message());
      std::this_thread::sleep_for(kMaxWait);
      continue;
    }
    // A cancellation request: the next heartbeat (now) hands over the reasons.
    if (!events->cancel.empty()) next_beat = std::chrono::steady_clock::now();
    resolve_watched(events->finished);
    if (std::chrono::steady_clock::now() >= next_poll) {
      next_poll = std::chrono::steady_clock::now() + kPollEvery;
      std::vector<std::string> watched;
      {
        MutexLock lock(mu_);
        for (const auto& [id, w] : watched_)
          watched.push_back(id);
      }
      if (auto finished = shared_->finished_among(watched); finished.is_ok()) {
        resolve_watched(*finished);
      }
    }
  }
}

}  // namespace kforge::jobs
