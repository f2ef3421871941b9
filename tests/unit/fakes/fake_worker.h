// An in-process Worker for engine tests: "runs" a job by echoing its spec into a result,
// optionally holding each job until the test releases it. Honours cancellation and
// timeouts like a real worker (the job ends when the token fires or the timeout passes).
#pragma once

#include <condition_variable>
#include <mutex>
#include <string>
#include <vector>

#include "kforge/workers/worker.h"

namespace kforge::testing {

class FakeWorker final : public workers::Worker {
 public:
  std::string_view type() const override { return "python"; }
  void prepare() override;
  workers::WorkerOutcome run(const workers::WorkerJob& job, workers::CancelToken& cancel,
                             const workers::ProgressSink& progress) override;
  workers::WorkerState state() const override { return workers::WorkerState::kReady; }
  Json status() const override;
  void shutdown() override {}
  void expect_jobs(int queued) override;

  // When held, run() blocks until release() (or cancellation / timeout).
  void hold(bool held);
  void release_all();
  // Blocks until `n` jobs have started; returns false after 10 s.
  bool wait_started(size_t n);
  std::vector<std::string> started_jobs() const;
  // Every expect_jobs() value, in order.
  std::vector<int> announced() const;
  bool fail_next = false;  // the next run() reports a worker failure

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool held_ = false;
  uint64_t release_generation_ = 0;
  std::vector<std::string> started_;
  std::vector<int> announced_;
  int prepared_ = 0;
};

}  // namespace kforge::testing
