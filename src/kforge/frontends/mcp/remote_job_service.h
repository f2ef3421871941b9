// RemoteJobService: the JobService facade over a running `kforge serve`'s REST API, so
// `kforge mcp --server URL` offers the same tools without an engine of its own.
//
//   submit      POST /evaluate?wait=false or /compare?wait=false (the canonical request)
//   get         GET /job/{id}
//   when_done,  one poller thread GETs each watched job every `poll_interval`; progress is
//   on_progress reported on state changes (queued -> running -> finished)
//   stats, health, cleanup   GET /stats, GET /health, POST /admin/cleanup-jobs
//   cancel      POST /job/{id}/cancel (the server kills the job's process group)
//
// Thread-safety: all methods are thread-safe; callbacks run on the poller thread (or on the
// calling thread when the job has already finished) without locks held.
#pragma once

#include <chrono>
#include <condition_variable>
#include <map>
#include <thread>

#include "kforge/common/thread_annotations.h"
#include "kforge/frontends/mcp/rest_client.h"
#include "kforge/jobs/job_service.h"

namespace kforge::frontends::mcp {

class RemoteJobService : public jobs::JobService {
 public:
  RemoteJobService(RestClient client,
                   std::chrono::milliseconds poll_interval = std::chrono::milliseconds(250));
  ~RemoteJobService() override;

  StatusOr<model::JobRecord> submit(model::JobRequest request, const jobs::Caller& caller) override;
  StatusOr<model::JobRecord> get(const std::string& id) override;
  StatusOr<uint64_t> when_done(const std::string& id, DoneCallback done) override;
  StatusOr<uint64_t> on_progress(const std::string& id, ProgressCallback progress) override;
  void unsubscribe(uint64_t subscription) override;
  Status cancel(const std::string& id, const std::string& reason) override;
  Json stats() override;
  Json health() override;
  StatusOr<int64_t> cleanup(std::chrono::seconds older_than) override;

 private:
  struct Watch {
    std::string job_id;
    DoneCallback done;  // one of done / progress is set
    ProgressCallback progress;
    std::string last_state;
  };
  void poll_loop();

  const RestClient client_;
  const std::chrono::milliseconds poll_interval_;
  Mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, Watch> watches_ GUARDED_BY(mu_);
  uint64_t next_id_ GUARDED_BY(mu_) = 1;
  bool stopping_ GUARDED_BY(mu_) = false;
  std::thread poller_;
};

// A job view (jobs::job_response) read back into a JobRecord.
StatusOr<model::JobRecord> job_record_from_view(const Json& view);

}  // namespace kforge::frontends::mcp
