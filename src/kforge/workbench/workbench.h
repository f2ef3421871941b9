// Workbench: the guided kernel-writing workflow behind the MCP tools (docs/workbench.md). Frontends
// call `call()` with a tool and its (schema-checked) arguments; the workbench keeps the sessions,
// gates tools by state, writes the workspace files and logs, counts context tokens, and runs every
// run/validate/measure/benchmark as kforge jobs through the JobService (no agent code runs in the
// server).
//
// Sessions and callers: a caller is one MCP session (`client`). Its first workbench call
// makes a new session (state start) and binds the caller to it; `resume_session(session_id)`
// or a `session_id` argument on any tool binds it to an existing one (after a server restart
// too: sessions live in the store). Binding a session to a different caller starts a new
// context for it (the agent's context window is new), so its token count restarts.
//
// A new session is stored (its row and its workspace directory made) only when it first has
// something to keep: a kernel name (set_kernel_name), jobs (an execution tool's stateless
// form) or a context summary. Until then it lives in this process alone, so an MCP process
// or conversation that only asks (get_overview, get_current_status, ...) leaves nothing in
// list_sessions or on disk; the log lines of its calls are written when it is stored.
//
// Thread-safety: call() may be used from any thread; calls on one session are serialised
// (an execution tool holds its session only while it starts and while it records results,
// not while its jobs run). `done` runs once, on the calling thread or on `executor`.
//
// Example:
//   auto wb = Workbench::create(options, service, store, knowledge, executor);
//   (*wb)->call({"mcp-session-1"}, Tool::kGetOverview, Json::object(),
//               [](Reply r) { ... r.text ... });
#pragma once

#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "kforge/common/clock.h"
#include "kforge/common/json.h"
#include "kforge/common/status.h"
#include "kforge/common/thread_annotations.h"
#include "kforge/jobs/job_service.h"
#include "kforge/store/workbench_store.h"
#include "kforge/workbench/knowledge.h"
#include "kforge/workbench/session.h"
#include "kforge/workbench/state.h"

namespace kforge::workbench {

struct WorkbenchOptions {
  std::filesystem::path root;  // workspaces: <root>/<session id>/
  int min_versions = 3;        // default per session (set_kernel_name may override)
  int64_t context_budget_tokens = 128000;
  std::string device;  // default device of sessions; "" = the first GPU, else cpu
};

// A tool's answer: the text the agent reads, the same facts as structured JSON, and whether
// it is an error the agent must act on.
struct Reply {
  std::string text;
  Json structured = Json::object();
  bool is_error = false;
};

struct Caller {
  std::string client;  // the MCP session's key ("" for stdio)
  // What the client calls itself (its clientInfo: "claude-code 2.1.3"), for the JSONL log.
  std::string client_name;
  // Who submits the call's jobs (the per-client queue quota's key: "peer <address>",
  // "stdio"); "workbench" when empty.
  std::string submitter;
  // On whose behalf (model/principal.h): recorded as the jobs' submitter.
  model::Principal principal;
  // Only this process can receive the call's results (jobs::Caller::process_bound: a
  // `kforge mcp` on stdio): its jobs are not run again after a restart.
  bool process_bound = false;
  // Called for every job an execution tool submits (progress reporting, cancellation).
  std::function<void(const std::string& job_id, const std::string& what)> job_started;
};

// Runs blocking work (store, files, job submission) off the engine's callback threads.
using Executor = std::function<void(std::function<void()>)>;

class Workbench {
 public:
  static StatusOr<std::unique_ptr<Workbench>> create(WorkbenchOptions options,
                                                     jobs::JobService& service,
                                                     std::shared_ptr<store::WorkbenchStore> store,
                                                     std::shared_ptr<const Knowledge> knowledge,
                                                     Executor executor,
                                                     const Clock& clock = SystemClock::instance());
  ~Workbench();
  Workbench(const Workbench&) = delete;
  Workbench& operator=(const Workbench&) = delete;

  // Runs one tool call; `done` is called exactly once.
  void call(const Caller& caller, Tool tool, const Json& arguments,
            std::function<void(Reply)> done);

  const Knowledge& knowledge() const { return *knowledge_; }
  const WorkbenchOptions& options() const { return options_; }
  // The stored sessions, for read-only views (session_views.h).
  store::WorkbenchStore& store() const { return *store_; }

  // One session's live object: its mutex serialises the calls on it.
  struct Slot {
    Slot(Session s, bool is_stored)
        : id(s.id), owner(s.owner), session(std::move(s)), stored(is_stored) {}
    // The session's id and owner, which never change: read under Workbench::mu_ alone.
    const std::string id;
    const std::string owner;
    Mutex mu;
    Session session GUARDED_BY(mu);
    std::string bound_client GUARDED_BY(mu);  // the caller whose context it is in
    bool bound GUARDED_BY(mu) = false;        // false after a restart: the next caller is new
    // False while the session is new and has nothing to keep (see above): neither its row
    // nor its workspace exists yet.
    bool stored GUARDED_BY(mu) = true;
    // The JSON-lines log of its calls while it is not stored (bounded by the context budget:
    // past 70 % of it the session is stored).
    std::vector<Json> pending_log GUARDED_BY(mu);
  };

 private:
  Workbench(WorkbenchOptions options, jobs::JobService& service,
            std::shared_ptr<store::WorkbenchStore> store,
            std::shared_ptr<const Knowledge> knowledge, Executor executor, const Clock& clock);

  friend class CallRunner;

  WorkbenchOptions options_;
  jobs::JobService& service_;
  std::shared_ptr<store::WorkbenchStore> store_;
  std::shared_ptr<const Knowledge> knowledge_;
  Executor executor_;
  const Clock& clock_;

  Mutex mu_;
  std::map<std::string, std::string> bindings_ GUARDED_BY(mu_);         // client -> session id
  std::map<std::string, std::shared_ptr<Slot>> slots_ GUARDED_BY(mu_);  // by session id
};

}  // namespace kforge::workbench
