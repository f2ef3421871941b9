// Reference reuse for the jobs of a batch (`POST /batch`; docs/worker-protocol.md
// "Reference reuse").
//
// Every job of a batch has the batch's seed, so its reference sees the same inputs: the first
// job's judge computes the reference's expected outputs (every correctness trial, the timing
// input sets) and its timing and kernel activity, and saves them in a file of the batch's
// directory under the reference directory, which no job process sees: the supervisor stages a
// judge's file in and out of the judge's own directory (workers/reference_staging.h). The
// judge reports the file's SHA-256 in its result; the server keeps that digest and gives it to
// the next judge of the batch with the same key, which uses the file only when its digest
// matches (else it computes everything itself), so what a job could write there never reaches
// another job's verdict unverified. A judge that computed something the file lacked (the first
// candidate failed early) writes a fuller file and reports the new digest.
//
// The key is SHA-256 of what the reference's results depend on: the reference, the
// candidate's IOContract (inputs come from it when it has one), the seed, the number of
// correctness trials, the timing options, measure_performance and the device.
//
// Thread-safety: all methods are thread-safe.
#pragma once

#include <filesystem>
#include <map>
#include <string>

#include "kforge/common/json.h"
#include "kforge/common/thread_annotations.h"
#include "kforge/model/request.h"

namespace kforge::jobs {

class ReferenceReuse {
 public:
  // `root`: the reference directory (one subdirectory per batch); empty disables reuse.
  explicit ReferenceReuse(std::filesystem::path root) : root_(std::move(root)) {}

  static std::string key_of(const model::JobRequest& request, const std::string& device);

  // The job spec's `reference_reuse` ({dir, key, sha256|null}) for a compare of a batch, or
  // null (not in a batch, no reference, reuse disabled).
  Json spec_for(const model::JobRequest& request, const std::string& device) const;

  // A job of a batch ran: keeps the digest its judge reported (result.reference_reuse.sha256)
  // and, after the batch's last job, forgets the batch and removes its files.
  void job_ended(const model::JobRequest& request, const std::string& device, const Json& result);

  // Removes every batch's files (at start: no digest survives a restart).
  void clear();

 private:
  struct Batch {
    std::map<std::string, std::string> digests;  // key -> sha256 of the judge's file
    int ended = 0;
  };
  const std::filesystem::path root_;
  mutable Mutex mu_;
  std::map<std::string, Batch> batches_ GUARDED_BY(mu_);
};

}  // namespace kforge::jobs
