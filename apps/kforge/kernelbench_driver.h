// How `kforge kernelbench` runs its batches: one POST /batch-shaped batch per problem (its
// samples as the candidates, the reference's results computed once), at most `in_flight`
// problems at a time, on an embedded engine or a `kforge serve`. Every sample ends as a record
// (bench/kernelbench.h), handed to `on_record` as its job finishes; a sample the batch refused
// (its source is not a valid candidate) is a record too, and the rest of its batch still runs.
// SIGINT/SIGTERM cancel the jobs in flight and submit nothing more.
#pragma once

#include <signal.h>

#include <functional>
#include <string>
#include <vector>

#include "kforge/bench/kernelbench.h"
#include "kforge/jobs/batch.h"
#include "kforge/jobs/job_service.h"

namespace kforge::app {

struct ProblemBatch {
  std::vector<bench::kernelbench::SampleContext> samples;
  // A POST /batch body without "candidates"; the driver adds one per sample, in order.
  Json body;
  std::vector<std::string> sources;  // the samples' sources, in order
  std::string kernel_type;
};

// Submits one batch (a POST /batch body) and says which jobs it made.
using SubmitBatch = std::function<StatusOr<jobs::BatchRecord>(const Json& body)>;

struct DriveOptions {
  size_t in_flight = 4;  // problems whose batches run at once
  bool quiet = false;
};

struct DriveOutcome {
  std::vector<Json> records;  // one per sample of every batch, in the order they finished
  bool interrupted = false;
};

// Blocks until every batch has finished (or, after a signal in `signals`, until the jobs in
// flight are cancelled). `on_record` runs on the calling thread, once per record.
DriveOutcome drive_batches(jobs::JobService& service, const SubmitBatch& submit,
                           std::vector<ProblemBatch> batches, const DriveOptions& options,
                           const sigset_t& signals,
                           const std::function<void(const Json&)>& on_record);

}  // namespace kforge::app
