// Private reference caches for the jobs of a batch (jobs/reference_reuse.h; docs/security.md
// "Batches' reference results").
//
// A batch's reference results live in the server's directory `<data>/cache/reference/
// <batch_id>/`, which no job process sees. A judge is a warm process, jailed before its job
// (and its batch) is known, so instead of binding the batch's directory into its jail, the
// supervisor stages the one file the job may reuse into the judge's own scratch directory
// (already bound into its jail) before the job starts, points the job spec's
// `reference_reuse.dir` there, and moves what the judge wrote back to the batch's directory
// when the job has ended. A judge thus sees its own batch's file for its own key, never
// another batch's; the file's SHA-256 (kept by the server) still decides whether it is used.
//
// Example (python_worker.cc):
//   StagedReference staged = stage_reference(message["job"], child->judge_dir);
//   ... run the job ...
//   staged.collect();
//
// Thread-safety: a StagedReference belongs to the one thread running its job.
#pragma once

#include <filesystem>

#include "kforge/common/json.h"

namespace kforge::workers {

class StagedReference {
 public:
  StagedReference() = default;
  StagedReference(std::filesystem::path staging, std::filesystem::path batch_dir,
                  std::string file_name)
      : staging_(std::move(staging)),
        batch_dir_(std::move(batch_dir)),
        file_name_(std::move(file_name)) {}

  // Moves the file the judge wrote (a regular file with one link, not the batch's own file
  // staged for it) to the batch's directory, replacing the batch's file. Failures are logged:
  // the next judge then computes the reference again. Idempotent; a no-op when nothing was
  // staged.
  void collect();

 private:
  std::filesystem::path staging_;    // <judge scratch>/reference; empty: nothing staged
  std::filesystem::path batch_dir_;  // <data>/cache/reference/<batch_id>
  std::string file_name_;            // <key>.pt
};

// Stages the reference file of `job_spec`'s `reference_reuse` ({dir, key, sha256}) into
// `judge_dir`/reference (created with the owner of `judge_dir`, mode 0700): the batch's file,
// when it has one, is linked (or copied) there, and `reference_reuse.dir` is rewritten to the
// staging directory. A spec without `reference_reuse` is left as it is. When staging fails,
// `reference_reuse` is removed from the spec (the job computes its reference itself) and the
// failure is logged.
StagedReference stage_reference(Json& job_spec, const std::filesystem::path& judge_dir);

}  // namespace kforge::workers
