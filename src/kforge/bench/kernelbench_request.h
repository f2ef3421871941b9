// POST /kernelbench and the MCP tool kernelbench_eval: a batch of KernelBench problems, each
// with its generated samples, judged the way `kforge kernelbench` judges a run directory (one
// batch per problem, the reference's results computed once) and answered with one record per
// sample and the summary (kernelbench.h).
//
// Body:
//   {"problems": [{"level": 1, "problem_id": 19, "name": "19_ReLU.py",
//                  "ref_code": "<the problem: Model, get_inputs, get_init_inputs>",
//                  "samples": [{"sample_id": 0, "source_code": "<a ModelNew>"}, ...]}, ...],
//    "kernel_type": "torch_cuda", "fast_p": [0.5, 1.5],
//    ...the compare options of POST /batch (device, num_correct_trials, num_trials, timeout,
//       atol, rtol, seed, timing, ...)}
// KernelBench's settings are the defaults: 5 correctness trials, 100 timed trials at most,
// atol = rtol = 1e-4 (its fp32 tolerance).
//
// Thread-safety: KernelbenchRun's methods are thread-safe; its callbacks run on the engine's
// threads, one at a time.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kforge/bench/kernelbench.h"
#include "kforge/common/thread_annotations.h"
#include "kforge/jobs/batch.h"
#include "kforge/model/batch.h"

namespace kforge::bench::kernelbench {

// At most this many problems in one request; each problem's samples are bounded by
// limits.max_batch_candidates.
constexpr size_t kMaxProblems = 512;

struct ProblemRequest {
  std::vector<SampleContext> samples;  // in the batch's candidate order
  model::BatchRequest batch;
};

struct KernelbenchRequest {
  std::vector<ProblemRequest> problems;
  std::vector<double> fast_p;  // 0, 1, 2 and the request's
};

// Errors name the field as the client sent it: "problems[2].samples[0].source_code",
// "problems[1].ref_code", "fast_p[0]", "num_trials".
StatusOr<KernelbenchRequest> parse_kernelbench_request(const Json& body,
                                                       const model::RequestLimits& limits);

// The answer: {"batches": [batch ids], "samples": [records, by level, problem, sample],
// "summary": summarize(...)}.
Json kernelbench_answer(const std::vector<std::string>& batch_ids, std::vector<Json> records,
                        const std::vector<double>& fast_p);

class KernelbenchRun : public std::enable_shared_from_this<KernelbenchRun> {
 public:
  // A sample's record as its job finishes, with how many have finished of how many.
  using OnSample = std::function<void(const Json& record, size_t finished, size_t total)>;
  using OnDone = std::function<void(Json answer)>;

  // Submits every problem's batch (in order; if one is refused, the jobs already submitted
  // are cancelled and the error names the problem) and watches them. `on_done` runs once,
  // after the last job, unless end() came first. Blocks while submitting.
  static StatusOr<std::shared_ptr<KernelbenchRun>> start(jobs::JobService& service,
                                                         jobs::BatchBook* book,
                                                         KernelbenchRequest request,
                                                         const jobs::Caller& caller,
                                                         OnSample on_sample, OnDone on_done);

  // Stops watching and cancels the jobs not finished; true for the call that ended the run.
  bool end(const std::string& reason);
  size_t total() const { return total_; }

  KernelbenchRun(jobs::JobService& service, size_t total, std::vector<double> fast_p,
                 OnSample on_sample, OnDone on_done)
      : service_(service),
        total_(total),
        fast_p_(std::move(fast_p)),
        on_sample_(std::move(on_sample)),
        on_done_(std::move(on_done)) {}

 private:
  void finished(const SampleContext& sample, const std::string& job_id, const Json& view);

  jobs::JobService& service_;
  const size_t total_;
  const std::vector<double> fast_p_;
  const OnSample on_sample_;
  const OnDone on_done_;
  Mutex mu_;
  std::vector<jobs::BatchRecord> batches_ GUARDED_BY(mu_);
  std::vector<std::shared_ptr<jobs::BatchWatch>> watches_ GUARDED_BY(mu_);
  std::vector<Json> records_ GUARDED_BY(mu_);
  bool ended_ GUARDED_BY(mu_) = false;
};

}  // namespace kforge::bench::kernelbench
