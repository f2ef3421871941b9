// The end of a job's processes, after its answer is out (issue 13, back-to-back latency).
//
// A job's processes are killed once they sent their result, but a CUDA process takes tens
// of ms to be gone (the driver destroys its context as it exits), and then its cgroup and
// scratch directory are removed. The answer need not wait for that: a worker hands the
// child here (run_job_on_child's deferred teardown) and answers at once. One thread per
// worker ends them in order: it waits for the processes to be gone, then gives back the
// device ticket the job held (so the device's next grant, and with it the next job's GPU
// work, still comes only once the dying processes are gone: the timing of the next job is
// not disturbed), then destroys the rest.
//
// Thread-safe. The destructor finishes every pending teardown first.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "kforge/common/json.h"
#include "kforge/common/thread_annotations.h"
#include "kforge/workers/device_gate.h"

namespace kforge::workers {

class Teardowns {
 public:
  // One job's teardown: `end` waits (blocking) until its processes are gone; `ticket` is
  // given back after it (null: none); destroying `end` then destroys what it holds (the
  // child: its cgroup directory, its scratch directory).
  struct Grave {
    std::function<void()> end;
    std::unique_ptr<DeviceGate::Ticket> ticket;
  };

  Teardowns();
  ~Teardowns();
  Teardowns(const Teardowns&) = delete;
  Teardowns& operator=(const Teardowns&) = delete;

  void add(Grave grave);
  // Blocks until every teardown added so far is done.
  void drain();

  // {"pending","done","last_ms","max_ms"}: teardowns waiting or running, finished, and how
  // long the last and the longest took (processes gone and ticket back).
  Json status() const;

 private:
  void loop();

  mutable Mutex mu_;
  std::condition_variable cv_;       // a grave added, or stop
  std::condition_variable idle_cv_;  // a grave done
  std::deque<Grave> graves_ GUARDED_BY(mu_);
  bool busy_ GUARDED_BY(mu_) = false;
  bool stop_ GUARDED_BY(mu_) = false;
  uint64_t done_ GUARDED_BY(mu_) = 0;
  double last_ms_ GUARDED_BY(mu_) = 0;
  double max_ms_ GUARDED_BY(mu_) = 0;
  std::thread thread_;  // last: started once the rest is initialised
};

// The ticket a deferred teardown holds until the job's processes are gone: the one the job
// still held (ChildJobEnd::held), else a shared place in `gate`'s queue (no exclusive grant,
// i.e. no timed region, starts before they are gone; correctness phases of other jobs may),
// else null (no gate, or the queue could not be joined).
std::unique_ptr<DeviceGate::Ticket> teardown_ticket(std::unique_ptr<DeviceGate::Ticket> held,
                                                    DeviceGate* gate, const std::string& job_id);

}  // namespace kforge::workers
