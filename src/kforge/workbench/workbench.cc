#include "kforge/workbench/workbench.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

#include "kforge/common/files.h"
#include "kforge/common/hash.h"
#include "kforge/common/log.h"
#include "kforge/workbench/call_runner.h"
#include "kforge/workbench/context_meter.h"
#include "kforge/workbench/names.h"
#include "kforge/workbench/narrative.h"
#include "kforge/workbench/workspace.h"

namespace kforge::workbench {
namespace {

// The arguments as the JSON-lines log keeps them: long strings become their size and hash
// (the code itself is in the workspace files).
Json log_arguments(const Json& args) {
  Json out = Json::object();
  for (const auto& [key, value] : args.items()) {
    if (value.is_string() && value.get<std::string>().size() > 200) {
      const std::string& text = value.get_ref<const std::string&>();
      out[key] = fmt::format("<{} chars, {} lines, sha256 {}>", text.size(),
                             std::count(text.begin(), text.end(), '\n') + 1,
                             sha256_hex(text).substr(0, 16));
    } else {
      out[key] = value;
    }
  }
  return out;
}

// null means "not given" (the Triton-kernel and evaluation servers accepted null for every
// optional argument).
Json without_nulls(Json args) {
  if (!args.is_object()) return Json::object();
  for (auto it = args.begin(); it != args.end();) {
    it = it->is_null() ? args.erase(it) : std::next(it);
  }
  return args;
}

std::string first_line(const std::string& text) {
  const size_t end = text.find('\n');
  std::string line = end == std::string::npos ? text : text.substr(0, end);
  return line.size() > 300 ? line.substr(0, 300) + " ..." : line;
}

}  // namespace

// ---------------------------------------------------------------------------- Workbench

Workbench::Workbench(WorkbenchOptions options, jobs::JobService& service,
                     std::shared_ptr<store::WorkbenchStore> store,
                     std::shared_ptr<const Knowledge> knowledge, Executor executor,
                     const Clock& clock)
    : options_(std::move(options)),
      service_(service),
      store_(std::move(store)),
      knowledge_(std::move(knowledge)),
      executor_(std::move(executor)),
      clock_(clock) {}

Workbench::~Workbench() = default;

StatusOr<std::unique_ptr<Workbench>> Workbench::create(WorkbenchOptions options,
                                                       jobs::JobService& service,
                                                       std::shared_ptr<store::WorkbenchStore> store,
                                                       std::shared_ptr<const Knowledge> knowledge,
                                                       Executor executor, const Clock& clock) {
  if (options.root.empty()) return invalid_argument("workbench: empty workspace root");
  if (options.min_versions < 1) return invalid_argument("workbench: min_versions must be >= 1");
  if (options.context_budget_tokens < 1000) {
    return invalid_argument("workbench: the context budget must be at least 1000 tokens");
  }
  options.root = std::filesystem::absolute(options.root);
  KF_RETURN_IF_ERROR(make_dirs(options.root));
  return std::unique_ptr<Workbench>(new Workbench(std::move(options), service, std::move(store),
                                                  std::move(knowledge), std::move(executor),
                                                  clock));
}

void Workbench::call(const Caller& caller, Tool tool, const Json& arguments,
                     std::function<void(Reply)> done) {
  std::make_shared<CallRunner>(*this, caller, tool, arguments, std::move(done))->run();
}

// --------------------------------------------------------------------------- CallRunner

CallRunner::CallRunner(Workbench& wb, Caller caller, Tool tool, Json args,
                       std::function<void(Reply)> done)
    : wb_(wb),
      caller_(std::move(caller)),
      tool_(tool),
      args_(without_nulls(std::move(args))),
      done_(std::move(done)) {}

void CallRunner::run() {
  auto slot = resolve_slot();
  if (!slot.is_ok()) {
    answer(error_reply(slot.status()));
    return;
  }
  slot_ = *slot;
  if (!slot_) {  // list_sessions before any session
    answer(list_sessions());
    return;
  }
  MutexLock lock(slot_->mu);
  Session& s = slot_->session;
  bind_locked();
  state_before_ = s.state;
  if (Status gated = gate(tool_, s.state, is_stateless()); !gated.is_ok()) {
    Reply reply = error_reply(gated);
    finalize_locked(s, reply);
    lock.unlock();
    answer(std::move(reply));
    return;
  }
  if (is_execution_tool(tool_)) {
    // Planned under the session's lock; the jobs are submitted without it.
    StatusOr<std::string> device = plan_execution_locked(s);
    if (!device.is_ok()) {
      Reply reply = error_reply(device.status());
      finalize_locked(s, reply);
      lock.unlock();
      answer(std::move(reply));
      return;
    }
    lock.unlock();
    submit_planned(*device);
    return;
  }
  Reply reply = dispatch_locked(s);
  finalize_locked(s, reply);
  lock.unlock();
  answer(std::move(reply));
}

StatusOr<CallRunner::SlotPtr> CallRunner::resolve_slot() {
  const bool new_session =
      tool_ == Tool::kSetKernelName && args_.value("new_session", false) == true;
  if (new_session) return create_slot();
  if (args_.contains("session_id") && args_["session_id"].is_string()) {
    const std::string id = args_["session_id"].get<std::string>();
    if (!is_session_id(id)) {
      return invalid_argument("session_id '" + id +
                                  "' is not a workbench session id (wb_ and 16 hex digits; "
                                  "list_sessions() shows them)",
                              "session_id");
    }
    return load_slot(id);
  }
  {
    MutexLock lock(wb_.mu_);
    auto bound = wb_.bindings_.find(caller_.client);
    if (bound != wb_.bindings_.end()) {
      auto it = wb_.slots_.find(bound->second);
      // Never another principal's, whatever the binding key (MCP sessions of the stateless
      // revision share one).
      if (it != wb_.slots_.end() && caller_.principal.may_access(it->second->owner)) {
        return it->second;
      }
    }
  }
  if (tool_ == Tool::kListSessions) return SlotPtr();
  return create_slot();
}

StatusOr<CallRunner::SlotPtr> CallRunner::load_slot(const std::string& id) {
  // Another principal's session is answered as an unknown one.
  const Status unknown(ErrorCode::kNotFound,
                       "no workbench session '" + id + "' (list_sessions() shows the recent ones)",
                       "session_id");
  MutexLock lock(wb_.mu_);
  if (auto it = wb_.slots_.find(id); it != wb_.slots_.end()) {
    if (!caller_.principal.may_access(it->second->owner)) return unknown;
    return it->second;
  }
  KF_ASSIGN_OR_RETURN(auto record, wb_.store_->get_session(id));
  if (!record || !caller_.principal.may_access(Session::owner_of(*record))) {
    return unknown;
  }
  KF_ASSIGN_OR_RETURN(auto versions, wb_.store_->versions(id));
  KF_ASSIGN_OR_RETURN(Session session, Session::from_records(*record, versions));
  // A workspace deleted by hand is recreated; the versions stay in the store.
  KF_RETURN_IF_ERROR(Workspace::open(session.workspace).status());
  auto slot = std::make_shared<Workbench::Slot>(std::move(session), true);
  wb_.slots_[id] = slot;
  return slot;
}

std::string CallRunner::default_device() {
  if (!wb_.options_.device.empty()) return wb_.options_.device;
  const Json health = wb_.service_.health();
  for (const auto& d : health.value("devices", Json::array())) {
    std::string name = d.value("name", "");
    if (name.starts_with("cuda")) return name;
  }
  return "cpu";
}

StatusOr<CallRunner::SlotPtr> CallRunner::create_slot() {
  Session s;
  s.id = new_session_id();
  s.workspace = (wb_.options_.root / s.id).string();  // made by store_locked
  s.settings.min_versions = wb_.options_.min_versions;
  s.settings.context_budget_tokens = wb_.options_.context_budget_tokens;
  s.settings.device = default_device();
  s.created_ms = s.updated_ms = wb_.clock_.unix_ms();
  s.owner = caller_.principal.name;
  // Every MCP process or conversation starts here, most only to ask: stored, each would
  // leave an empty session in list_sessions and a directory in the workspace root.
  auto slot = std::make_shared<Workbench::Slot>(std::move(s), false);
  MutexLock lock(wb_.mu_);
  wb_.slots_[slot->id] = slot;
  return slot;
}

Status CallRunner::store_locked() {
  if (slot_->stored) return Status::ok();
  Session& s = slot_->session;  // not const: clang 14 loses the lock through a const alias
  // Created exclusively: a directory of that name is never another session's.
  KF_ASSIGN_OR_RETURN(Workspace ws, Workspace::create(wb_.options_.root, s.id));
  if (Status inserted = wb_.store_->insert_session(s.record()); !inserted.is_ok()) {
    // It holds only the empty subdirectories just made; the next call tries again.
    std::error_code ignored;
    std::filesystem::remove_all(ws.dir(), ignored);
    return inserted;
  }
  slot_->stored = true;
  return Status::ok();
}

void CallRunner::bind_locked() {
  if (!slot_->bound || slot_->bound_client != caller_.client) {
    Session& s = slot_->session;
    if (s.context.calls > 0 || s.context.epoch > 1) {
      // The session continues in a context that has not seen it: count from zero.
      s.context.epoch += 1;
      s.context.tokens = 0;
      s.context.calls = 0;
    }
    slot_->bound = true;
    slot_->bound_client = caller_.client;
  }
  MutexLock lock(wb_.mu_);
  wb_.bindings_[caller_.client] = slot_->id;
}

Status CallRunner::persist_locked(const Session& s) {
  return wb_.store_->update_session(s.record());
}

Reply CallRunner::error_reply(const Status& status) const {
  Reply r;
  r.is_error = true;
  r.text = std::string(tool_name(tool_)) + " failed: " + status.message();
  r.structured =
      Json{{"error", status.message()}, {"code", std::string(error_code_name(status.code()))}};
  if (!status.field_path().empty()) r.structured["argument"] = status.field_path();
  return r;
}

void CallRunner::finalize_locked(Session& s, Reply& reply) {
  const int64_t now = wb_.clock_.unix_ms();
  s.updated_ms = now;
  const std::string step = next_step(s);
  reply.text += fmt::format("\n\n[session {} | state {} | {} version(s)]\nNext: {}.", s.id,
                            to_string(s.state), s.versions.size(), step);
  // Context accounting (context_meter.h): the call's arguments and the answer's text.
  int64_t tokens = estimate_tokens(std::string(tool_name(tool_)) + args_.dump()) +
                   estimate_tokens(reply.text) + kCallOverheadTokens;
  const int64_t budget = s.settings.context_budget_tokens;
  auto over = [&] {
    return static_cast<double>(s.context.tokens + tokens) >=
           kSummaryThreshold * static_cast<double>(budget);
  };
  std::vector<std::string> warnings;
  // A new session is stored once it has something to keep (workbench.h): a name (and with it
  // a state past start), jobs, or a summary that tells the agent to resume it.
  const bool has_content = !s.kernel_name.empty() || s.state != State::kStart ||
                           !s.versions.empty() || ran_jobs_ || over();
  if (!slot_->stored && has_content) {
    if (Status stored = store_locked(); !stored.is_ok()) {
      warnings.push_back("the session could not be saved: " + stored.message());
    }
  }
  std::optional<Workspace> ws;  // none while the session is not stored
  if (slot_->stored) {
    StatusOr<Workspace> opened = Workspace::open(s.workspace);
    if (opened.is_ok()) {
      ws = std::move(opened).value();
    } else {
      warnings.push_back("workspace: " + opened.status().message());
    }
  }
  bool summarized = false;
  if (over()) {
    const std::string notice = fmt::format(
        "\n\nCONTEXT: about {} % of this session's {}-token budget is used. The state of the "
        "work is summarised in {}/docs/summarization.md. Start a new session (a new chat) and "
        "call resume_session(session_id=\"{}\") there to continue; every kernel version, test "
        "and log stays in {}.",
        static_cast<int>(100.0 * static_cast<double>(s.context.tokens + tokens) /
                         static_cast<double>(budget)),
        budget, s.workspace, s.id, s.workspace);
    reply.text += notice;
    tokens += estimate_tokens(notice);
    summarized = true;
  }
  s.context.tokens += tokens;
  s.context.total_tokens += tokens;
  s.context.calls += 1;
  if (summarized) {
    s.context.summary_written_ms = now;
    if (ws) {
      if (Status w = ws->write_summary(render_summary(s, SummaryReason::kContextBudget));
          !w.is_ok()) {
        warnings.push_back(w.message());
      }
    }
  }
  reply.structured["session"] = {{"id", s.id},
                                 {"state", std::string(to_string(s.state))},
                                 {"kernel_name", s.kernel_name},
                                 {"versions", s.versions.size()},
                                 {"workspace", s.workspace},
                                 {"stored", slot_->stored}};
  reply.structured["next_step"] = step;
  reply.structured["context"] = {
      {"used_tokens", s.context.tokens},
      {"budget_tokens", budget},
      {"percent", 100.0 * static_cast<double>(s.context.tokens) / static_cast<double>(budget)}};
  if (summarized) {
    reply.structured["context"]["summary_file"] = s.workspace + "/docs/summarization.md";
    reply.structured["context"]["action"] =
        "start a new session and call resume_session(session_id=\"" + s.id + "\")";
  }
  const auto elapsed =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started_)
          .count();
  Json line = {{"at", format_time(now)},
               {"at_ms", now},
               {"tool", std::string(tool_name(tool_))},
               {"client", caller_.client_name},
               {"mcp_session", caller_.client},
               {"arguments", log_arguments(args_)},
               {"result", {{"is_error", reply.is_error}, {"summary", first_line(reply.text)}}},
               {"duration_ms", elapsed},
               {"state_before", std::string(to_string(state_before_))},
               {"state_after", std::string(to_string(s.state))},
               {"version", version_ > 0 ? Json(version_) : Json()},
               {"versions", s.versions.size()},
               {"tokens", tokens},
               {"context_tokens", s.context.tokens}};
  if (ws) {
    // After the lines of the calls made before the session was stored, in order.
    slot_->pending_log.push_back(std::move(line));
    for (const Json& pending : slot_->pending_log) {
      if (Status w = ws->append_log(s.id, pending); !w.is_ok()) warnings.push_back(w.message());
    }
    slot_->pending_log.clear();
    if (!s.kernel_name.empty()) {
      if (Status w = ws->write_dev_log(s.kernel_name, render_dev_log(s, *wb_.knowledge_));
          !w.is_ok()) {
        warnings.push_back(w.message());
      }
    }
  } else if (!slot_->stored) {
    slot_->pending_log.push_back(std::move(line));
  }
  if (slot_->stored) {
    if (Status p = persist_locked(s); !p.is_ok()) {
      warnings.push_back("the session could not be saved: " + p.message());
    }
  }
  for (const auto& w : warnings) {
    KF_LOG_WARN("workbench session {}: {}", s.id, w);
    reply.text += "\nwarning: " + w;
  }
  if (!warnings.empty()) reply.structured["warnings"] = warnings;
}

void CallRunner::answer(Reply reply) {
  auto done = std::move(done_);
  done_ = nullptr;
  if (done) done(std::move(reply));
}

}  // namespace kforge::workbench
