// POST /bench: runs the multi-op pipeline (docs/bench.md) on this server's JobService and
// answers with the report and the rendered logs (bench/bench_request.h has the body).
//
// The answer comes when the last job has ended (a bench takes minutes on a GPU): 200 with
// {report, files}. With `Accept: text/event-stream` the answer is a stream instead: a
// `progress` event per finished job ({done, total, message}), then one `result` event (the
// same JSON) or one `error` event (the REST error body: {"error", "code", "field", ...}). A
// client that goes away, or a server that stops, cancels the bench's jobs.
//
// With a BenchReportBook, every finished report is kept there (the answer then carries its
// `report_id`) and two more routes read them: GET /bench/reports (newest first, `limit`,
// `cursor`) and GET /bench/reports/{id}, scoped by principal as jobs are (report_book.h).
//
// Example:
//   KF_RETURN_IF_ERROR(add_bench_route(router, service, blocking, {.kforge_version = "0.1"}));
#pragma once

#include <memory>

#include "kforge/bench/bench_request.h"
#include "kforge/bench/report_book.h"
#include "kforge/common/status.h"
#include "kforge/frontends/http/blocking_executor.h"
#include "kforge/frontends/http/router.h"
#include "kforge/jobs/job_service.h"

namespace kforge::frontends::http {

// Registers POST /bench, and the report routes when `reports` is given. `service` and the
// pool behind `blocking` must outlive every request.
Status add_bench_route(Router& router, jobs::JobService& service, BlockingExecutor blocking,
                       bench::BenchPolicy policy,
                       std::shared_ptr<bench::BenchReportBook> reports = nullptr);

}  // namespace kforge::frontends::http
