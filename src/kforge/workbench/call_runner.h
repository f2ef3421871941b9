// Internal to workbench/: one tool call in progress (Workbench::call creates one). It finds or
// creates the caller's session, gates the tool, runs it (synchronously, or through jobs for
// the execution tools), then accounts the call: context tokens, the JSON-lines log, the
// development log, the 70 % summary and the stored session.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

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
  // Stores a new session (slot locked): its workspace directory, then its row. No-op when
  // it is stored already.
  Status store_locked(Workbench::Slot& slot);
  // Binds the caller to the session (slot locked); a new caller starts a new context.
  void bind_locked(Workbench::Slot& slot);
  std::string default_device();

  // ---- answering (workbench.cc) ----
  // Accounts the call on the session (slot locked) and decorates the reply.
  void finalize_locked(Session& s, Reply& reply);
  void answer(Reply reply);
  Reply error_reply(const Status& status) const;
  Status persist_locked(const Session& s);

  // ---- synchronous tools (workbench_tools.cc), slot locked ----
  Reply dispatch_locked(Session& s);
  Reply overview(const Session& s);
  Reply triton_syntax();
  Reply torch_op_info();
  Reply kernel_template();
  Reply gpu_status(const Session& s);
  Reply current_status(const Session& s);
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
  // Plans and submits the jobs; releases `lock` before submitting.
  void execute(std::unique_lock<std::mutex> lock);
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
  std::mutex exec_mu_;
  std::vector<model::JobRecord> finished_;  // guarded by exec_mu_, index = planned_ index
  size_t remaining_ = 0;                    // guarded by exec_mu_
  std::vector<uint64_t> subscriptions_;     // guarded by exec_mu_
};

}  // namespace kforge::workbench
