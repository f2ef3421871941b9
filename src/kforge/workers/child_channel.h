// One worker child process as the supervisor sees it: its protocol socket, its captured
// stdout/stderr, and the loop that runs one job on it (send the job, collect progress and
// the result, enforce the timeout, the memory limit and cancellation).
//
// Shared by both workers: Python children (forked by the zygote) and native CUDA worker
// processes (started directly). How the exit status of the process is learned differs, so
// it is abstracted by ExitSource.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "kforge/common/json.h"
#include "kforge/common/status.h"
#include "kforge/worker_protocol/output_capture.h"
#include "kforge/worker_protocol/process.h"
#include "kforge/worker_protocol/protocol.h"
#include "kforge/worker_protocol/unique_fd.h"
#include "kforge/workers/cancel_token.h"
#include "kforge/workers/device_gate.h"
#include "kforge/workers/sandbox_policy.h"
#include "kforge/workers/worker.h"

namespace kforge::workers {

// Where exit statuses of children come from (the zygote's `exited` messages, or a pidfd).
class ExitSource {
 public:
  virtual ~ExitSource() = default;
  // A descriptor to poll for readability, or -1.
  virtual int poll_fd() const = 0;
  // Called when poll_fd() is readable; processes whatever arrived.
  virtual void on_readable() = 0;
  // The exit status of `pid` once known.
  virtual std::optional<worker_protocol::ExitStatus> exit_of(pid_t pid) = 0;
  // False once the source itself is gone (zygote died): no exit status will come.
  virtual bool alive() const = 0;
};

struct ChildChannel {
  int child_id = 0;
  pid_t pid = -1;
  worker_protocol::UniqueFd proto;  // our end of the protocol socket (non-blocking)
  worker_protocol::UniqueFd out;    // read end of the child's stdout pipe (non-blocking)
  worker_protocol::UniqueFd err;    // read end of the child's stderr pipe (non-blocking)
  // A job process is untrusted: its frames are bounded tighter than the spec sent to it.
  worker_protocol::FrameDecoder decoder{worker_protocol::kMaxChildFrameBytes};
  bool ready = false;
  Json ready_message;
  // AfterResult::kKeepChild keeps the child only while its cgroup holds at most this many
  // processes at the result (the judge, the job's candidate, the spares): a job that left
  // more (a reference's daemon, a fork bomb) is torn down as any other.
  size_t keep_max_processes = 0;
  size_t first_processes = 0;  // its processes when a job first took it (PythonWorker)
  std::chrono::steady_clock::time_point started_at;
  // Its cgroup, scratch directory and jail (null before the sandbox is prepared). Declared
  // after the descriptors, so it is destroyed before them: its cgroup is killed before the
  // descriptors close.
  std::unique_ptr<ChildSandbox> sandbox;
  // Without pipelining: its registration with the device's gate (warm_beside), from its
  // start until the pool waits for it to be ready (as a job takes it). Declared last, so it
  // goes first (its last SIGCONT reaches the cgroup and process group still there). A
  // registered channel must not move (the registration signals through `this`).
  std::unique_ptr<DeviceGate::Warming> warming;
  // A kept judge's next candidate, woken as a job starts so that it warms during the job:
  // registered with the device's gate from then until a job takes the parked judge, so it
  // is stopped during timed regions (its own job's included). Signalled through a pidfd, so
  // a spare that died and was reaped is never confused with a later process of its pid.
  std::unique_ptr<DeviceGate::Warming> spare_warming;

  ~ChildChannel();
  ChildChannel() = default;
  ChildChannel(const ChildChannel&) = delete;
  ChildChannel& operator=(const ChildChannel&) = delete;
  ChildChannel(ChildChannel&&) = default;
  ChildChannel& operator=(ChildChannel&&) = default;

  // Sends the protocol's `sandbox` message (the first message of every child).
  Status send_sandbox();
  // SIGKILL to everything the child started: its cgroup when it has one (whatever the
  // processes did with sessions and process groups), else its process group; returns once
  // they are gone (at most 2 s).
  void kill_all();
  // The same SIGKILL, without waiting for the processes to be gone (kill_all waits later).
  void start_kill();
  // `sig` to everything the child started (its cgroup when it has one, and its process
  // group): SIGSTOP while it waits for an exclusive grant, SIGCONT when it gets it.
  void signal_all(int sig);
  // Registers this child's warm-up with `gate` (DeviceGate::warming) for as long as the
  // returned registration lives: everything it started is stopped (SIGSTOP) while an
  // exclusive grant is in and continued (SIGCONT) after.
  std::unique_ptr<DeviceGate::Warming> warm_beside(DeviceGate& gate);
  // The same for one process of it only (a spare candidate, pid in the server's namespace):
  // null where the process is gone or no pidfd can be had.
  static std::unique_ptr<DeviceGate::Warming> warm_process_beside(DeviceGate& gate, pid_t pid);
};

// The descriptors a new child gets: a protocol socket pair and stdout/stderr pipes. The
// "theirs" ends go to the child (by exec or SCM_RIGHTS); attach() then closes them here (or
// EOF would never come) and moves our ends, non-blocking, into a ChildChannel.
struct ChildPipes {
  worker_protocol::UniqueFd proto_ours, proto_theirs;
  worker_protocol::UniqueFd out_r, out_w;
  worker_protocol::UniqueFd err_r, err_w;

  static StatusOr<ChildPipes> create();
  Status attach(ChildChannel& channel);
};

struct ChildLimits {
  size_t output_cap_bytes = size_t{64} * 1024;
  // Without a cgroup: proportional set size of the child's process group; 0 = unlimited.
  // With one, the kernel enforces the cgroup's memory.max and the supervisor reads its
  // OOM-kill count.
  int64_t memory_limit_bytes = 0;
};

// How a job on a child ended, before it is turned into a result.
struct ChildJobEnd {
  enum class Kind { kResult, kTimeout, kCancelled, kCrashed, kMemoryLimit, kProtocolError };
  Kind kind = Kind::kCrashed;
  Json result;        // the `result` message's result (kind kResult)
  Json partial;       // last `partial` from a progress message, or null
  std::string phase;  // last phase reported ("" before any progress)
  std::optional<worker_protocol::ExitStatus> exit;
  std::string detail;  // protocol error text
  worker_protocol::OutputCapture stdout_capture;
  worker_protocol::OutputCapture stderr_capture;
  double wall_ms = 0;
  int64_t peak_rss_bytes = 0;  // the cgroup's memory peak, or the group's peak PSS
  int64_t cgroup_oom_kills = 0;
  int64_t pids_limit_hits = 0;
  // Time spent waiting for the device: the shared admission the worker took before the job
  // (added by the worker) and every `device_request` to its `device_grant` (0: never asked).
  double device_wait_ms = 0;
  // The exclusive grants the job held: [{"granted_at_ms","released_at_ms"}], wall clock
  // (ms since the epoch), so the grants of jobs that ran together can be compared.
  Json device_grants = Json::array();
  // From the result (or the job's end) until its processes were gone and their output
  // drained: the teardown (a CUDA context's destruction among it) the answer waited for.
  double teardown_ms = 0;
  // A deferred teardown (run_job_on_child's `defer_teardown`, a job that sent its result):
  // the processes were sent SIGKILL but may still be ending. The worker hands the child and
  // `held` to its Teardowns, which waits for them and only then gives `held` back.
  bool teardown_deferred = false;
  // AfterResult::kKeepChild and a result came: nothing was killed; the caller ends the
  // job's candidate and keeps the child, or tears it down.
  bool kept = false;
  // With a deferred teardown or a kept child: the device ticket the job still held (its
  // grant or its shared admission), or null.
  std::unique_ptr<DeviceGate::Ticket> held;
};

// Waits until the child sends `ready` (checking its protocol version). Output the child
// writes meanwhile is discarded (it is warm-up noise, not the job's). kUnavailable with the
// child's stderr when it dies first; kDeadlineExceeded on timeout.
Status wait_child_ready(ChildChannel& child, ExitSource& exits,
                        std::chrono::steady_clock::time_point deadline);

// Sends the job and runs the loop until the child returns a result, dies, times out, hits
// the memory limit or is cancelled. The child's process group is killed before return in
// every case, and its pipes drained.
// `gate`: the device's grant (pipelined stages); the child's `device_request` (exclusive)
// takes a ticket and is answered with `device_grant` when it is first in line; the ticket is
// given back on `device_release` (after which the child may ask again) or, at the latest,
// once the child is killed. Null: `device_request` is granted at once (the job already has
// the device to itself).
// `admitted`: the shared ticket the worker took before it sent the job (Python jobs with
// pipelined stages: their candidate code runs from the start). It is given back when the
// child asks for the exclusive grant (or when the job ends); while such a job waits for its
// exclusive grant its processes are stopped (SIGSTOP), and continued (SIGCONT) when it is
// granted, so that none of its GPU work can start beside another job's timed region.
// `after_result`, once the child sent its result: kTeardownNow kills its processes and waits
// for them here; kDeferTeardown sends them SIGKILL and reads the output already written, but
// leaves the wait for them to be gone (a CUDA context's teardown: tens of ms) to the caller
// (ChildJobEnd::teardown_deferred), so the answer need not wait for it; kKeepChild kills
// nothing (a judge kept for another job: the caller ends the job's candidate and parks the
// child, ChildJobEnd::kept). Jobs that end any other way are torn down here as before.
enum class AfterResult { kTeardownNow, kDeferTeardown, kKeepChild };
ChildJobEnd run_job_on_child(ChildChannel& child, const Json& job_message,
                             std::chrono::milliseconds timeout, CancelToken& cancel,
                             const ProgressSink& progress, ExitSource& exits,
                             const ChildLimits& limits, DeviceGate* gate = nullptr,
                             std::unique_ptr<DeviceGate::Ticket> admitted = nullptr,
                             AfterResult after_result = AfterResult::kTeardownNow);

// A kept judge (AfterResult::kKeepChild) between its jobs: the message of `type` it was to
// send next (`idle` once its candidate is gone, `ready` once the next one is warm; a
// `ready` also sets child.ready and child.ready_message). next_message_of reads what has
// arrived without blocking; frames after the one found stay for the next call. kGone: the
// child closed its socket, broke the protocol or said `sandbox_failed`.
enum class ChildMessage { kArrived, kNotYet, kGone };
ChildMessage next_message_of(ChildChannel& child, std::string_view type);
// The same, waiting until `deadline`; true once it arrived.
bool await_message_of(ChildChannel& child, std::string_view type,
                      std::chrono::steady_clock::time_point deadline);

// How a child ended, for people: the exit status and what the signal usually means.
std::string describe_exit(const std::optional<worker_protocol::ExitStatus>& exit);

// An integer field of a child's message (`ready`'s jobs_done, candidate_pid, ...), or 0
// (absent, null or not an integer).
int64_t message_int(const Json& message, const char* key);

// Turns a ChildJobEnd into kernel_exec_result: the worker's result (or the last partial
// result, or a skeleton), plus the failure reason, captured output and process facts.
// `spec` is the job spec (for kernel types in the metadata); `timeout` for the message.
Json assemble_result(const Json& spec, ChildJobEnd& end, std::chrono::milliseconds timeout,
                     const Json& worker_info);

}  // namespace kforge::workers
