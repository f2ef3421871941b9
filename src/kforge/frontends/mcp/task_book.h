// Durable tasks (the extension io.modelcontextprotocol/tasks, kernel_tasks.h) for the tool
// calls that are made of many jobs: batch_compare (one compare job per candidate) and
// run_benchmark_suite (the multi-op pipeline's jobs), and for validate_kernel (one job, but
// the old tool's answer is not the job's view). An evaluation task IS its job; these are not,
// so their record lives here: one JSON file per task in a directory (kforge serve and
// kforge mcp use <data dir>/mcp-tasks), written atomically on every change, so a task and the
// job ids it is made of survive a restart of the server. The jobs themselves are durable in the
// engine's store and are recovered by it; after a restart the first tasks/get (or tasks/cancel)
// of a task that was still working resumes it: a batch (or a validation) watches its jobs
// again, a bench re-plans from its stored arguments, waits for the jobs it had already
// submitted and submits the rest.
//
// Task ids are "task-" + 32 lowercase hex characters (128 random bits): bearer-grade, and the
// only ids that ever touch the file system (anything else is not a book id). Finished tasks are
// kept for kKeepFinished after they ended (their ttlMs), then deleted when the book is opened.
//
// Thread-safety: all methods are thread-safe. put/get/update/open block on disk I/O: call
// them on the blocking executor, never on a JobService callback thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "kforge/common/json.h"
#include "kforge/common/status.h"
#include "kforge/common/thread_annotations.h"
#include "kforge/jobs/job_service.h"

namespace kforge::frontends::mcp {

struct TaskRecord {
  std::string id;
  std::string tool;                // the tool that made it: batch_compare, run_benchmark_suite
  std::string status = "working";  // working | completed | cancelled
  std::string message;             // statusMessage
  int64_t created_ms = 0;
  int64_t updated_ms = 0;
  std::string client;  // who called the tool (the jobs' quota key)
  // On whose behalf (model/principal.h): the jobs' submitter; tasks/* of another principal
  // answer as for an unknown task. "" (anonymous) in records written before it existed.
  std::string submitter;
  Json arguments = Json::object();  // the call's normalized arguments (to resume it)
  Json jobs = Json::array();        // the job ids, in plan order ("" = not submitted yet)
  Json state = Json::object();      // the tool's own (batch_id, jobs finished, ...)
  Json result;                      // the CallToolResult once completed, else null

  // A new working task of `tool`, called by `client` on behalf of `submitter` with
  // `arguments`: a fresh id, created and updated now.
  static TaskRecord fresh(std::string tool, std::string client, std::string submitter,
                          Json arguments);

  // The caller its jobs are submitted as (when it is resumed).
  jobs::Caller caller() const;

  bool terminal() const { return status != "working"; }
  Json to_json() const;
  static StatusOr<TaskRecord> from_json(const Json& j);
};

class TaskBook {
 public:
  static constexpr std::chrono::hours kKeepFinished{24 * 7};
  // (Re)starts the work of a working task in this process: called when a task is created and
  // when one found working after a restart is resumed. Returns how to cancel it.
  using Starter = std::function<StatusOr<std::function<void()>>(const TaskRecord& task)>;

  // Creates `dir` when missing and deletes finished tasks older than kKeepFinished. Blocks.
  static StatusOr<std::unique_ptr<TaskBook>> open(std::filesystem::path dir);

  // Whether `id` has the form of a book task id ("task-" + 32 lowercase hex).
  static bool is_book_id(std::string_view id);
  static std::string new_id();
  static int64_t now_ms();

  // How tasks made by `tool` are (re)started.
  void set_starter(const std::string& tool, Starter starter);

  // Writes a new task (durable on return) and starts it; the error of either.
  Status create(const TaskRecord& task);
  // The task as stored; nullopt when unknown. Blocks.
  StatusOr<std::optional<TaskRecord>> get(const std::string& id);
  // Applies `change` to a stored task and writes it back; ignored once the task is terminal
  // (a late progress after a cancel). Blocks.
  Status update(const std::string& id, const std::function<void(TaskRecord&)>& change);
  // Resumes a working task that no run of this process serves (after a restart). Blocks.
  Status ensure_running(const TaskRecord& task);
  // Cancels a working task's run (resuming it first when needed); a no-op on a terminal one.
  Status cancel(const std::string& id);
  // Forgets a run of this process once its task is terminal.
  void ended(const std::string& id);

 private:
  explicit TaskBook(std::filesystem::path dir) : dir_(std::move(dir)) {}
  std::filesystem::path path_of(const std::string& id) const;
  StatusOr<std::optional<TaskRecord>> read_locked(const std::string& id) REQUIRES(mu_);
  Status write_locked(const TaskRecord& task) REQUIRES(mu_);
  Status start(const TaskRecord& task);

  const std::filesystem::path dir_;
  Mutex mu_;  // serialises the files and the maps
  std::map<std::string, Starter> starters_ GUARDED_BY(mu_);
  std::map<std::string, std::function<void()>> live_ GUARDED_BY(mu_);  // runs of this process
  std::set<std::string> starting_ GUARDED_BY(mu_);
};

}  // namespace kforge::frontends::mcp
