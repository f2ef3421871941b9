#include "kforge/frontends/mcp/task_book.h"

#include <algorithm>
#include <system_error>
#include <utility>
#include <vector>

#include "kforge/common/clock.h"
#include "kforge/common/files.h"
#include "kforge/common/log.h"
#include "kforge/common/random.h"

namespace kforge::frontends::mcp {
namespace {

constexpr std::string_view kPrefix = "task-";
constexpr size_t kHexDigits = 32;

StatusOr<std::string> string_field(const Json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_string()) return invalid_argument(std::string(key) + ": missing");
  return it->get<std::string>();
}

StatusOr<int64_t> int_field(const Json& j, const char* key) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_number_integer()) {
    return invalid_argument(std::string(key) + ": missing");
  }
  return it->get<int64_t>();
}

}  // namespace

Json TaskRecord::to_json() const {
  return Json{{"id", id},
              {"tool", tool},
              {"status", status},
              {"message", message},
              {"created_ms", created_ms},
              {"updated_ms", updated_ms},
              {"client", client},
              {"submitter", submitter},
              {"arguments", arguments},
              {"jobs", jobs},
              {"state", state},
              {"result", result}};
}

StatusOr<TaskRecord> TaskRecord::from_json(const Json& j) {
  if (!j.is_object()) return invalid_argument("a task record must be an object");
  TaskRecord t;
  KF_ASSIGN_OR_RETURN(t.id, string_field(j, "id"));
  KF_ASSIGN_OR_RETURN(t.tool, string_field(j, "tool"));
  KF_ASSIGN_OR_RETURN(t.status, string_field(j, "status"));
  KF_ASSIGN_OR_RETURN(t.message, string_field(j, "message"));
  KF_ASSIGN_OR_RETURN(t.created_ms, int_field(j, "created_ms"));
  KF_ASSIGN_OR_RETURN(t.updated_ms, int_field(j, "updated_ms"));
  KF_ASSIGN_OR_RETURN(t.client, string_field(j, "client"));
  if (auto it = j.find("submitter"); it != j.end()) {  // absent in records of older servers
    if (!it->is_string()) return invalid_argument("submitter: must be a string");
    t.submitter = it->get<std::string>();
  }
  t.arguments = j.value("arguments", Json::object());
  t.jobs = j.value("jobs", Json::array());
  t.state = j.value("state", Json::object());
  t.result = j.value("result", Json());
  if (t.status != "working" && t.status != "completed" && t.status != "cancelled") {
    return invalid_argument("status: unknown '" + t.status + "'");
  }
  if (!t.jobs.is_array()) return invalid_argument("jobs: must be an array");
  return t;
}

StatusOr<std::unique_ptr<TaskBook>> TaskBook::open(std::filesystem::path dir) {
  KF_RETURN_IF_ERROR(make_dirs(dir));
  std::unique_ptr<TaskBook> book(new TaskBook(std::move(dir)));
  const int64_t cutoff =
      now_ms() - std::chrono::duration_cast<std::chrono::milliseconds>(kKeepFinished).count();
  std::error_code ec;
  std::vector<std::filesystem::path> expired;
  for (const auto& entry : std::filesystem::directory_iterator(book->dir_, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() < 6 || name.substr(name.size() - 5) != ".json") continue;
    const std::string id = name.substr(0, name.size() - 5);
    if (!is_book_id(id)) continue;
    auto record = book->get(id);
    if (record.is_ok() && *record && (*record)->terminal() && (*record)->updated_ms < cutoff) {
      expired.push_back(entry.path());
    }
  }
  if (ec) return io_error("listing " + book->dir_.string() + ": " + ec.message());
  for (const auto& path : expired) {
    std::filesystem::remove(path, ec);
    if (ec) KF_LOG_WARN("mcp: removing the expired task {}: {}", path.string(), ec.message());
  }
  return book;
}

bool TaskBook::is_book_id(std::string_view id) {
  if (id.size() != kPrefix.size() + kHexDigits || id.substr(0, kPrefix.size()) != kPrefix) {
    return false;
  }
  return std::all_of(id.begin() + static_cast<std::ptrdiff_t>(kPrefix.size()), id.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

TaskRecord TaskRecord::fresh(std::string tool, std::string client, std::string submitter,
                             Json arguments) {
  TaskRecord task;
  task.id = TaskBook::new_id();
  task.tool = std::move(tool);
  task.created_ms = task.updated_ms = TaskBook::now_ms();
  task.client = std::move(client);
  task.submitter = std::move(submitter);
  task.arguments = std::move(arguments);
  return task;
}

jobs::Caller TaskRecord::caller() const {
  // Only the name is recorded on jobs; the role matters to readers, not to a submit.
  return jobs::Caller(
      client, {submitter, submitter.empty() ? model::Role::kAnonymous : model::Role::kUser});
}

std::string TaskBook::new_id() {
  return std::string(kPrefix) + random_hex(kHexDigits / 2);
}

int64_t TaskBook::now_ms() {
  return SystemClock::instance().unix_ms();
}

void TaskBook::set_starter(const std::string& tool, Starter starter) {
  MutexLock lock(mu_);
  starters_[tool] = std::move(starter);
}

std::filesystem::path TaskBook::path_of(const std::string& id) const {
  return dir_ / (id + ".json");
}

StatusOr<std::optional<TaskRecord>> TaskBook::read_locked(const std::string& id) {
  if (!is_book_id(id)) return std::optional<TaskRecord>();
  const auto path = path_of(id);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return std::optional<TaskRecord>();
  KF_ASSIGN_OR_RETURN(std::string text, read_file(path));
  Json j = Json::parse(text, nullptr, false);
  auto record = TaskRecord::from_json(j);
  if (!record.is_ok()) {
    return internal_error("the task file " + path.string() +
                          " is damaged: " + record.status().message());
  }
  return std::optional<TaskRecord>(std::move(record).value());
}

Status TaskBook::write_locked(const TaskRecord& task) {
  if (!is_book_id(task.id)) return invalid_argument("not a task id: " + task.id, "taskId");
  return write_file_atomic(path_of(task.id), task.to_json().dump());
}

Status TaskBook::create(const TaskRecord& task) {
  {
    MutexLock lock(mu_);
    KF_RETURN_IF_ERROR(write_locked(task));
  }
  return start(task);
}

StatusOr<std::optional<TaskRecord>> TaskBook::get(const std::string& id) {
  MutexLock lock(mu_);
  return read_locked(id);
}

Status TaskBook::update(const std::string& id, const std::function<void(TaskRecord&)>& change) {
  MutexLock lock(mu_);
  KF_ASSIGN_OR_RETURN(auto task, read_locked(id));
  if (!task) return not_found("task " + id + " is gone");
  if (task->terminal()) return Status::ok();
  change(*task);
  task->updated_ms = std::max(task->updated_ms, now_ms());
  return write_locked(*task);
}

Status TaskBook::start(const TaskRecord& task) {
  Starter starter;
  {
    MutexLock lock(mu_);
    if (live_.count(task.id) != 0 || !starting_.insert(task.id).second) return Status::ok();
    auto it = starters_.find(task.tool);
    if (it != starters_.end()) starter = it->second;
  }
  StatusOr<std::function<void()>> cancel =
      starter ? starter(task)
              : StatusOr<std::function<void()>>(
                    failed_precondition("this server cannot run tasks of " + task.tool));
  MutexLock lock(mu_);
  starting_.erase(task.id);
  auto now = read_locked(task.id);
  if (!cancel.is_ok()) {
    // It can never run here: it ends as a tool error saying why, instead of working forever.
    if (now.is_ok() && *now && !(*now)->terminal()) {
      TaskRecord failed = **now;
      const std::string why = task.tool + ": the task cannot run: " + cancel.status().to_string();
      failed.status = "completed";
      failed.message = why;
      failed.updated_ms = std::max(failed.updated_ms, now_ms());
      failed.result =
          Json{{"content", Json::array({{{"type", "text"}, {"text", why}}})}, {"isError", true}};
      KF_RETURN_IF_ERROR(write_locked(failed));
    }
    return cancel.status();
  }
  if (now.is_ok() && *now && !(*now)->terminal()) live_[task.id] = std::move(cancel).value();
  return Status::ok();
}

Status TaskBook::ensure_running(const TaskRecord& task) {
  if (task.terminal()) return Status::ok();
  {
    MutexLock lock(mu_);
    if (live_.count(task.id) != 0 || starting_.count(task.id) != 0) return Status::ok();
  }
  KF_LOG_INFO("mcp: resuming task {} ({}) after a restart", task.id, task.tool);
  return start(task);
}

Status TaskBook::cancel(const std::string& id) {
  KF_ASSIGN_OR_RETURN(auto task, get(id));
  if (!task || task->terminal()) return Status::ok();
  KF_RETURN_IF_ERROR(ensure_running(*task));
  std::function<void()> cancel;
  {
    MutexLock lock(mu_);
    auto it = live_.find(id);
    if (it != live_.end()) cancel = it->second;
  }
  if (cancel) cancel();
  return Status::ok();
}

void TaskBook::ended(const std::string& id) {
  MutexLock lock(mu_);
  live_.erase(id);
}

}  // namespace kforge::frontends::mcp
