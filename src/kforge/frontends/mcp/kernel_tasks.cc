#include "kforge/frontends/mcp/kernel_tasks.h"

#include <algorithm>
#include <chrono>

#include "kforge/common/iso8601.h"
#include "kforge/common/log.h"
#include "kforge/frontends/mcp/kernel_tool_results.h"
#include "kforge/frontends/mcp/protocol/jsonrpc.h"
#include "kforge/frontends/mcp/protocol/modern.h"
#include "kforge/frontends/mcp/session_principal.h"
#include "kforge/jobs/job_access.h"

namespace kforge::frontends::mcp {
namespace {

constexpr int64_t kPollIntervalMs = 1000;

int64_t last_update_ms(const model::JobRecord& job) {
  return std::max({job.created_ms, job.started_ms, job.finished_ms});
}

const char* task_status(model::JobState state) {
  switch (state) {
    case model::JobState::kQueued:
    case model::JobState::kRunning:
      return "working";
    case model::JobState::kCancelled:
      return "cancelled";
    case model::JobState::kSucceeded:
    case model::JobState::kFailed:
      return "completed";  // a failed evaluation is a tool result with isError, not a failure
  }
  return "working";
}

Json task_fields(const model::JobRecord& job) {
  Json t = {{"taskId", job.id},
            {"status", task_status(job.state)},
            {"createdAt", iso8601_ms(job.created_ms)},
            {"lastUpdatedAt", iso8601_ms(last_update_ms(job))},
            {"ttlMs", nullptr}};
  std::string message = std::string(model::to_string(job.state));
  if (!job.phase.empty()) message += ": " + job.phase;
  if (job.state == model::JobState::kCancelled && !job.error.empty()) message += ": " + job.error;
  t["statusMessage"] = message;
  if (!model::is_terminal(job.state)) t["pollIntervalMs"] = kPollIntervalMs;
  return t;
}

// The task id of a tasks/* request, or an answer already sent (-32021 without the opt-in,
// -32602 for a missing id).
const std::string* task_id_or_refuse(RequestContext& ctx, const Json& params) {
  if (!wants_task(ctx)) {
    ctx.respond_error(modern::kMissingRequiredClientCapability,
                      "Missing required client capability: " + ctx.method() +
                          " needs the extension " + std::string(kTasksExtension),
                      Json{{"requiredCapabilities",
                            {{"extensions", {{std::string(kTasksExtension), Json::object()}}}}}});
    return nullptr;
  }
  const Json* id = jsonrpc::param(params, "taskId");
  if (id == nullptr || !id->is_string()) {
    ctx.respond_error(jsonrpc::kInvalidParams, "taskId: is required and must be a string");
    return nullptr;
  }
  return &id->get_ref<const std::string&>();
}

// The job of a task, or an answer already sent (-32602 for an unknown id, and for another
// principal's job).
std::optional<model::JobRecord> job_or_refuse(RequestContext& ctx, jobs::JobService& service,
                                              const std::string& task_id) {
  auto job = jobs::get_visible(service, task_id, principal_of(ctx.session()));
  if (job.is_ok()) return std::move(job).value();
  if (job.status().code() == ErrorCode::kNotFound) {
    ctx.respond_error(jsonrpc::kInvalidParams, "Task not found: " + task_id,
                      Json{{"taskId", task_id}});
  } else {
    ctx.respond_status(job.status());
  }
  return std::nullopt;
}

Json book_task_fields(const TaskRecord& task) {
  Json t = {
      {"taskId", task.id},
      {"status", task.status},
      {"statusMessage", task.message},
      {"createdAt", iso8601_ms(task.created_ms)},
      {"lastUpdatedAt", iso8601_ms(task.updated_ms)},
      {"ttlMs",
       std::chrono::duration_cast<std::chrono::milliseconds>(TaskBook::kKeepFinished).count()}};
  if (!task.terminal()) t["pollIntervalMs"] = kPollIntervalMs;
  return t;
}

// tasks/get|update|cancel of a book task ("task-..."): answered here. Another principal's
// task is answered as an unknown one.
void handle_book_task(RequestContext& ctx, TaskBook& book, const std::string& id) {
  const std::string& method = ctx.method();
  auto task = book.get(id);
  if (!task.is_ok()) return ctx.respond_status(task.status());
  if (!*task || !principal_of(ctx.session()).may_access((*task)->submitter)) {
    return ctx.respond_error(jsonrpc::kInvalidParams, "Task not found: " + id,
                             Json{{"taskId", id}});
  }
  if (method == "tasks/cancel") {
    if (Status s = book.cancel(id); !s.is_ok()) {
      KF_LOG_WARN("mcp: tasks/cancel of {}: {}", id, s.to_string());
    }
  }
  if (method != "tasks/get") return ctx.respond(Json::object());
  // A task still working that no run of this process serves was cut by a restart: resume it.
  if (Status s = book.ensure_running(**task); !s.is_ok()) {
    KF_LOG_WARN("mcp: resuming task {}: {}", id, s.to_string());
  }
  Json t = book_task_fields(**task);
  if ((*task)->status == "completed") t["result"] = (*task)->result;
  ctx.respond(std::move(t));
}

}  // namespace

bool wants_task(const RequestContext& ctx) {
  if (!ctx.session().is_stateless()) return false;
  const Json* meta = jsonrpc::param(ctx.params(), "_meta");
  if (meta == nullptr || !meta->is_object()) return false;
  const Json caps = meta->value(std::string(modern::kMetaClientCapabilities), Json::object());
  const Json* extensions = jsonrpc::param(caps, "extensions");
  return extensions != nullptr && extensions->is_object() && extensions->contains(kTasksExtension);
}

jobs::Caller job_caller(const Session& session, bool answered_by_call) {
  jobs::Caller caller(session.client(), principal_of(session));
  caller.process_bound = answered_by_call && session.ends_with_process();
  return caller;
}

Json create_task_result(const model::JobRecord& job) {
  Json r = task_fields(job);
  r["resultType"] = "task";
  return r;
}

Json create_task_result(const TaskRecord& task) {
  Json r = book_task_fields(task);
  r["resultType"] = "task";
  return r;
}

Json task_of(const model::JobRecord& job, std::string_view protocol_version) {
  Json t = task_fields(job);
  if (job.state == model::JobState::kSucceeded || job.state == model::JobState::kFailed) {
    t["result"] = finished_job_result(job, {}).to_json(protocol_version);
  }
  return t;
}

Status add_kernel_tasks(Catalog& catalog, jobs::JobService& service,
                        std::shared_ptr<TaskBook> book) {
  catalog.extensions[std::string(kTasksExtension)] = Json::object();
  jobs::JobService* svc = &service;
  catalog.extension_methods["tasks/get"] = [svc, book](RequestContext& ctx, const Json& params) {
    const std::string* id = task_id_or_refuse(ctx, params);
    if (id == nullptr) return;
    if (book != nullptr && TaskBook::is_book_id(*id)) return handle_book_task(ctx, *book, *id);
    auto job = job_or_refuse(ctx, *svc, *id);
    if (job) ctx.respond(task_of(*job, ctx.protocol_version()));
  };
  catalog.extension_methods["tasks/update"] = [svc, book](RequestContext& ctx, const Json& params) {
    const std::string* id = task_id_or_refuse(ctx, params);
    if (id == nullptr) return;
    if (book != nullptr && TaskBook::is_book_id(*id)) return handle_book_task(ctx, *book, *id);
    // kforge's jobs never ask for input: answers are acknowledged and ignored.
    if (job_or_refuse(ctx, *svc, *id)) ctx.respond(Json::object());
  };
  catalog.extension_methods["tasks/cancel"] = [svc, book](RequestContext& ctx, const Json& params) {
    const std::string* id = task_id_or_refuse(ctx, params);
    if (id == nullptr) return;
    if (book != nullptr && TaskBook::is_book_id(*id)) return handle_book_task(ctx, *book, *id);
    auto job = job_or_refuse(ctx, *svc, *id);
    if (!job) return;
    if (!model::is_terminal(job->state)) {
      Status s = svc->cancel(*id, "cancelled by the MCP client (tasks/cancel)");
      if (!s.is_ok()) KF_LOG_WARN("mcp: tasks/cancel of job {}: {}", *id, s.to_string());
    }
    ctx.respond(Json::object());
  };
  return Status::ok();
}

}  // namespace kforge::frontends::mcp
