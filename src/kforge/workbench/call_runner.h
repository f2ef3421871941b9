// Internal to workbench/: one tool call in progress (Workbench::call creates one). It finds or
// creates the caller's session, gates the tool, runs it (synchronously, or through jobs for
// the execution tools), then accounts the call: context tokens, the JSON-lines log, the
// development log, the 70 % summary and the stored session.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "kforge/common/thread_annotations.h"
#include "kforge/model/job.h"
#include "kforge/workbench/job_builder.h"
#include "kforge/workbench/outcome.h"
#include "kforge/workbench/workbench.h"

namespace kforge::workbench {

class CallRunner : public std::enable_shared_from_this<CallRunner> {
 public:
  CallRunner(Workbench& wb, Caller caller, Tool tool, Json args, std::function<void(Reply)> done);
  void run();

 private:
  using SlotPtr = std::shared_ptr<Workbench::Slot>;

  // ---- sessions (workbench.cc) ----
  // The session this call works on: named by `session_id`, bound to the caller, or new.
  // nullptr (without error) for list_sessions of an unbound caller.
  StatusOr<SlotPtr> resolve_slot();
  StatusOr<SlotPtr> load_slot(const std::string& id);
  // A new session for the caller, not stored yet (Workbench::Slot::stored).
  StatusOr<SlotPtr> create_slot();
  // Stores the new session of slot_: its workspace directory, then its row. No-op when it is stored
  // already.
  Status store_locked() REQUIRES(slot_->mu);
  // Binds the caller to slot_'s session; a new caller starts a new context.
  void bind_locked() REQUIRES(slot_->mu) EXCLUDES(wb_.mu_);
  std::string default_device();

  // ---- answering (workbench.cc) ----
  // Accounts the call on the session (slot_->session) and decorates the reply.
  void finalize_locked(Session& s, Reply& reply) REQUIRES(slot_->mu);
  void answer(Reply reply);
  Reply error_reply(const Status& status) const;
  Status persist_locked(const Session& s) REQUIRES(slot_->mu);

  // ---- synchronous tools (workbench_tools.cc), on slot_->session ----
  Reply dispatch_locked(Session& s) REQUIRES(slot_->mu);
  Reply overview(const Session& s);
  Reply triton_syntax();
  Reply torch_op_info();
  Reply kernel_template();
  Reply gpu_status(const Session& s);
  Reply current_status(const Session& s) REQUIRES(slot_->mu);
  Reply context_usage(const Session& s);
  Reply list_sessions();
  // The most recent `limit` workbench sessions the caller's principal may see, newest first.
  StatusOr<std::vector<store::WorkbenchSessionRecord>> visible_recent_sessions(size_t limit);
  Reply resume(const Session& s);
  Reply set_kernel_name(Session& s);
  Reply write_test_code(Session& s);
  Reply write_kernel_code(Session& s);
  Reply force_write(Session& s);
  Reply best_kernel(Session& s);

  // ---- execution tools (workbench_exec.cc) ----
  bool is_stateless() const;
  // Plans the jobs of the execution tool on slot_->session and stores a new session; the
  // device they run on, or why they cannot run.
  StatusOr<std::string> plan_execution_locked(Session& s) REQUIRES(slot_->mu);
  // Submits the planned jobs (without the session's lock) and watches them.
  void submit_planned(const std::string& device);
  void job_finished(size_t index, const model::JobRecord& job);
  void all_jobs_finished();
  Reply record_results(Session& s, std::vector<CaseOutcome>& outcomes);

  Workbench& wb_;
  const Caller caller_;
  const Tool tool_;
  const Json args_;
  std::function<void(Reply)> done_;
  SlotPtr slot_;
  State state_before_ = State::kStart;
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  // The call ran jobs for the session: a new one is stored even if nothing else changed.
  bool ran_jobs_ = false;

  // Execution state.
  Purpose purpose_ = Purpose::kRun;
  int version_ = 0;          // the version the jobs run (0: the stateless form)
  std::string kernel_file_;  // how tracebacks name the kernel
  std::vector<PlannedJob> planned_;
  Mutex exec_mu_;
  std::vector<model::JobRecord> finished_ GUARDED_BY(exec_mu_);  // index = planned_ index
  size_t remaining_ GUARDED_BY(exec_mu_) = 0;
  std::vector<uint64_t> subscriptions_ GUARDED_BY(exec_mu_);
};

}  // namespace kforge::workbench
