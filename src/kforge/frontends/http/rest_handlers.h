// The REST API (docs/rest-api.md): one handler per resource, registered on a Router.
//
//   POST /evaluate, POST /compare, POST / (legacy = /compare)   submit, then wait (default)
//                                                                 or ?wait=false -> 202
//   POST /batch                                                  one reference, N candidates
//   GET  /batch/{id}                                             a batch's jobs and results
//   POST /kernelbench                                            KernelBench problems, samples
//   GET  /job/{id}                                               a job and its result
//   GET  /job/{id}/events, GET /jobs/events                      progress and changes (SSE)
//   GET  /jobs                                                   the jobs, filtered, paged
//   GET  /health                                                 liveness, devices, job counts
//   GET  /stats                                                  counters
//   POST /admin/cleanup-jobs                                     delete old finished jobs
//
// Handlers run on an io thread only to read the request line; everything that may block
// (JSON parsing, validation, JobService calls that read or write the store) runs on the
// BlockingExecutor, and waiting for a job is a JobService callback, so no thread waits.
//
// Lifetime: `service` and the executor's pool must outlive the server and every task the
// handlers posted (join the pool before destroying the service).
//
// Example:
//   Router router;
//   KF_RETURN_IF_ERROR(add_rest_routes(router, service, make_blocking_executor(pool), {}));
#pragma once

#include <chrono>
#include <string>

#include "kforge/common/status.h"
#include "kforge/frontends/http/blocking_executor.h"
#include "kforge/frontends/http/router.h"
#include "kforge/jobs/job_service.h"
#include "kforge/model/request.h"

namespace kforge::frontends::http {

struct RestOptions {
  model::RequestLimits limits;
  // A waiting submit answers 202 (with the job id, to poll) once the job's own `timeout`
  // plus this allowance for queueing has passed without a result.
  std::chrono::milliseconds queue_wait_allowance{std::chrono::minutes(10)};
  // Age of the finished jobs POST /admin/cleanup-jobs deletes when the request names none
  // (the old server's 300 s).
  std::chrono::seconds default_cleanup_age{300};
  // The GPU type submit answers name in `gpu_type` and `X-GPU-Type` (the old server's
  // GPU_TYPE: a100, h100, h200); empty: neither is sent.
  std::string gpu_type;
};

// Registers the REST routes. Fails only if one of them is already registered.
Status add_rest_routes(Router& router, jobs::JobService& service, BlockingExecutor blocking,
                       RestOptions options);

}  // namespace kforge::frontends::http
