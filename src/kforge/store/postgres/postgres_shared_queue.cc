// PostgresStore's SharedQueue half (store/shared_queue.h): claims under leases, heartbeats,
// recovery of the jobs of nodes that stopped or died, cancellation across nodes, events.
#include <poll.h>

#include <cerrno>
#include <string_view>
#include <utility>

#include "kforge/store/postgres/job_rows.h"
#include "kforge/store/postgres/postgres_store.h"

namespace kforge::store {

using job_rows::decode_job;
using job_rows::kChannel;
using job_rows::kColumnsNoRequest;
using job_rows::lock_job;
using job_rows::Locked;
using job_rows::notify;
using job_rows::text_array;
using model::JobRecord;
using model::JobState;
using pg::Param;
using pg::Rows;

StatusOr<std::optional<JobRecord>> PostgresStore::claim(const std::vector<std::string>& targets,
                                                        const std::string& device,
                                                        int64_t started_ms) {
  MutexLock lock(mu_);
  std::optional<JobRecord> claimed;
  const Status status = conn_->transaction("claim a job for " + device, [&]() -> Status {
    mu_.assert_held();  // the transaction runs this body before it returns
    // SKIP LOCKED: nodes claiming at once take different jobs instead of waiting on one.
    KF_ASSIGN_OR_RETURN(
        Rows rows,
        conn_->query(
            "WITH next AS (SELECT id AS next_id FROM jobs WHERE state = 'queued' AND device = "
            "ANY($1::text[]) ORDER BY created_ms, seq LIMIT 1 FOR UPDATE SKIP LOCKED)"
            " UPDATE jobs SET state = 'running', device = $2, started_ms = $3, "
            "attempts = attempts + 1, owner = $4, lease_until = clock_timestamp() + "
            "make_interval(secs => $5), cancel_reason = NULL FROM next WHERE jobs.id = "
            "next.next_id RETURNING " +
                std::string(kColumnsNoRequest),
            {text_array(targets), device, std::to_string(started_ms), options_.node_id,
             lease_seconds()},
            "claim a job for " + device));
    if (rows.size() == 0) return Status::ok();
    KF_ASSIGN_OR_RETURN(JobRecord job, decode_job(rows, 0));
    KF_RETURN_IF_ERROR(conn_
                           ->query("INSERT INTO job_runs (job_id, attempt, node, device, "
                                   "claimed_ms) VALUES ($1, $2, $3, $4, $5)",
                                   {job.id, std::to_string(job.attempts), options_.node_id, device,
                                    std::to_string(started_ms)},
                                   "record a run of job " + job.id)
                           .status());
    claimed = std::move(job);
    return Status::ok();
  });
  if (!status) return status;
  return claimed;
}

StatusOr<std::vector<SharedQueue::CancelRequest>> PostgresStore::heartbeat(
    const std::vector<std::string>& running) {
  if (running.empty()) return std::vector<CancelRequest>();
  MutexLock lock(mu_);
  KF_ASSIGN_OR_RETURN(
      Rows rows,
      conn_->query("UPDATE jobs SET lease_until = clock_timestamp() + "
                   "make_interval(secs => $2) WHERE owner = $1 AND state = "
                   "'running' AND id = ANY($3::text[]) RETURNING id, cancel_reason",
                   {options_.node_id, lease_seconds(), text_array(running)}, "renew leases"));
  std::vector<CancelRequest> out;
  for (int i = 0; i < rows.size(); ++i) {
    if (!rows.null(i, 1)) out.push_back({rows.text(i, 0), rows.text(i, 1)});
  }
  return out;
}

StatusOr<int64_t> PostgresStore::recover_expired(int max_attempts, int64_t now_ms) {
  return recover("lease_until < clock_timestamp()", {}, max_attempts, now_ms,
                 "stopped renewing its lease");
}

StatusOr<int64_t> PostgresStore::recover_own(int max_attempts, int64_t now_ms) {
  return recover("owner = $1", {options_.node_id}, max_attempts, now_ms,
                 "was restarted while running it");
}

StatusOr<std::vector<std::string>> PostgresStore::finished_among(
    const std::vector<std::string>& ids) {
  if (ids.empty()) return std::vector<std::string>();
  MutexLock lock(mu_);
  KF_ASSIGN_OR_RETURN(
      Rows rows, conn_->query("SELECT x FROM unnest($1::text[]) AS x WHERE NOT EXISTS (SELECT 1 "
                              "FROM jobs WHERE id = x AND state IN ('queued', 'running'))",
                              {text_array(ids)}, "find finished jobs"));
  std::vector<std::string> out;
  out.reserve(static_cast<size_t>(rows.size()));
  for (int i = 0; i < rows.size(); ++i)
    out.push_back(rows.text(i, 0));
  return out;
}

StatusOr<int64_t> PostgresStore::recover(const std::string& where,
                                         const std::vector<std::string>& params, int max_attempts,
                                         int64_t now_ms, const std::string& why) {
  MutexLock lock(mu_);
  int64_t recovered = 0;
  const Status status = conn_->transaction("recover jobs of dead nodes", [&]() -> Status {
    mu_.assert_held();  // the transaction runs this body before it returns
    KF_ASSIGN_OR_RETURN(
        Rows rows,
        conn_->query("SELECT id, attempts, COALESCE(owner, ''), cancel_reason FROM jobs WHERE "
                     "state = 'running' AND " +
                         where + " FOR UPDATE SKIP LOCKED",
                     std::vector<Param>(params.begin(), params.end()), "find jobs to recover"));
    for (int i = 0; i < rows.size(); ++i) {
      const std::string id = rows.text(i, 0);
      const int64_t attempts = rows.integer(i, 1);
      const std::string owner = rows.text(i, 2);
      KF_RETURN_IF_ERROR(conn_
                             ->query("UPDATE job_runs SET outcome = 'lease_expired', ended_ms = "
                                     "$3 WHERE job_id = $1 AND attempt = $2 AND outcome IS NULL",
                                     {id, std::to_string(attempts), std::to_string(now_ms)},
                                     "end a run of job " + id)
                             .status());
      std::string state = "queued";
      std::string error;
      if (!rows.null(i, 3)) {
        state = "cancelled";
        error = rows.text(i, 3);
      } else if (attempts >= max_attempts) {
        state = "failed";
        error = "interrupted " + std::to_string(attempts) + " times (node ";
        error += owner;
        error += " ";
        error += why;
        error += "); not retried";
      }
      KF_RETURN_IF_ERROR(
          conn_
              ->query("UPDATE jobs SET state = $2, error = $3, finished_ms = CASE WHEN $2 = "
                      "'queued' THEN 0 ELSE $4::bigint END, owner = NULL, lease_until = NULL, "
                      "cancel_reason = NULL WHERE id = $1",
                      {id, state, error, std::to_string(now_ms)}, "recover job " + id)
              .status());
      KF_RETURN_IF_ERROR(notify(*conn_, state == "queued" ? "queued" : "done", id));
      ++recovered;
    }
    return Status::ok();
  });
  if (!status) return status;
  return recovered;
}

StatusOr<bool> PostgresStore::request_cancel(const std::string& id, const std::string& reason,
                                             int64_t now_ms) {
  MutexLock lock(mu_);
  bool terminal = false;
  const Status status = conn_->transaction("cancel job " + id, [&]() -> Status {
    mu_.assert_held();  // the transaction runs this body before it returns
    KF_ASSIGN_OR_RETURN(Locked job, lock_job(*conn_, id));
    if (model::is_terminal(job.state)) {
      terminal = true;
      return Status::ok();
    }
    if (job.state == JobState::kQueued) {
      terminal = true;
      KF_RETURN_IF_ERROR(conn_
                             ->query("UPDATE jobs SET state = 'cancelled', error = $2, "
                                     "finished_ms = $3 WHERE id = $1",
                                     {id, reason, std::to_string(now_ms)}, "cancel job " + id)
                             .status());
      return notify(*conn_, "done", id);
    }
    KF_RETURN_IF_ERROR(conn_
                           ->query("UPDATE jobs SET cancel_reason = $2 WHERE id = $1", {id, reason},
                                   "ask to cancel job " + id)
                           .status());
    return notify(*conn_, "cancel", id);
  });
  if (!status) return status;
  return terminal;
}

Status PostgresStore::listen() {
  if (listener_ && listener_->ok()) return Status::ok();
  listener_.reset();
  KF_ASSIGN_OR_RETURN(auto conn, pg::Connection::open(options_.conninfo));
  KF_RETURN_IF_ERROR(conn->exec("LISTEN " + std::string(kChannel), "listen for job events"));
  listener_ = std::move(conn);
  return Status::ok();
}

StatusOr<SharedQueue::Events> PostgresStore::wait_events(std::chrono::milliseconds timeout) {
  MutexLock lock(listen_mu_);
  Events events;
  if (!listener_ || !listener_->ok()) {
    KF_RETURN_IF_ERROR(listen());
    events.queued = true;  // events may have been missed while it was down: look again
  }
  pollfd fd{listener_->socket(), POLLIN, 0};
  const int ready = ::poll(&fd, 1, static_cast<int>(timeout.count()));
  if (ready < 0 && errno != EINTR) return errno_error("poll the PostgreSQL listener", errno);
  if (ready > 0) {
    if (Status s = listener_->consume_input(); !s) {
      listener_.reset();
      return s;
    }
  }
  for (auto& n : listener_->take_notifications()) {
    const std::string_view p = n.payload;
    const size_t colon = p.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view event = p.substr(0, colon);
    std::string id(p.substr(colon + 1));
    if (event == "queued") {
      events.queued = true;
    } else if (event == "done") {
      events.finished.push_back(std::move(id));
    } else if (event == "cancel") {
      events.cancel.push_back(std::move(id));
    }
  }
  return events;
}

}  // namespace kforge::store
