#include "kforge/bench/report_book.h"

#include <algorithm>
#include <map>
#include <system_error>

#include "kforge/common/files.h"
#include "kforge/common/log.h"
#include "kforge/common/random.h"
#include "kforge/jobs/job_view.h"
#include "kforge/model/job_query.h"

namespace kforge::bench {
namespace {

bool older(int64_t a_ms, const std::string& a_id, int64_t b_ms, const std::string& b_id) {
  return a_ms != b_ms ? a_ms < b_ms : a_id < b_id;
}

// A report id as keep() makes them: "br_" and 16 lower-case hex digits (so a file name).
bool is_report_id(const std::string& id) {
  return id.size() == 19 && id.rfind("br_", 0) == 0 &&
         std::all_of(id.begin() + 3, id.end(),
                     [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

Json string_or_null(const Json& object, const char* key) {
  auto it = object.find(key);
  return it != object.end() && it->is_string() ? *it : Json(nullptr);
}

}  // namespace

Json BenchReportBook::summarize(const Json& report) {
  Json ops = Json::array();
  for (const Json& op : report.value("ops", Json::array())) {
    if (!op.is_object()) continue;
    const Json best = op.value("best", Json::object());
    ops.push_back(Json{
        {"op", op.value("op", "")},
        {"dtype", op.value("dtype", "")},
        {"best", best.is_object() ? string_or_null(best, "kernel") : Json(nullptr)},
        {"speedup", best.is_object() ? best.value("speedup", Json()) : Json()},
        {"speedup_verdict", best.is_object() ? best.value("speedup_verdict", Json()) : Json()},
        {"correct_versions", best.is_object() ? best.value("correct_versions", Json()) : Json()},
        {"versions", best.is_object() ? best.value("versions", Json()) : Json()}});
  }
  return Json{{"device", report.value("device", "")},
              {"device_name", report.value("device_name", "")},
              {"interpreter", report.value("interpreter", false)},
              {"sizes", report.value("sizes", Json::array())},
              {"ops", std::move(ops)}};
}

StatusOr<std::unique_ptr<BenchReportBook>> BenchReportBook::open(Options options,
                                                                 const Clock& clock) {
  if (options.max_per_submitter < 1 || options.max_total < 1) {
    return invalid_argument("the bounds must be at least 1", "max_per_submitter");
  }
  KF_RETURN_IF_ERROR(make_dirs(options.dir));
  std::unique_ptr<BenchReportBook> book(new BenchReportBook(std::move(options), clock));
  MutexLock lock(book->mu_);  // uncontended: nobody else has the book yet
  std::error_code ec;
  for (const auto& file : std::filesystem::directory_iterator(book->options_.dir, ec)) {
    const std::string id = file.path().stem().string();
    if (file.path().extension() != ".json" || !is_report_id(id)) continue;
    auto text = read_file(file.path());
    auto json = text.is_ok() ? parse_json(*text) : StatusOr<Json>(text.status());
    if (!json.is_ok() || !json->is_object() || json->value("report_id", "") != id ||
        !json->contains("answer")) {
      KF_LOG_WARN("bench reports: skipping {}: {}", file.path().string(),
                  json.is_ok() ? "not a kept report" : json.status().to_string());
      continue;
    }
    book->entries_.push_back(Entry{id, json->value("submitter", ""),
                                   json->value("created_ms", int64_t{0}),
                                   summarize((*json)["answer"].value("report", Json::object()))});
  }
  if (ec)
    return Status(ErrorCode::kIo, "read " + book->options_.dir.string() + ": " + ec.message());
  std::sort(book->entries_.begin(), book->entries_.end(), [](const Entry& a, const Entry& b) {
    return older(a.created_ms, a.id, b.created_ms, b.id);
  });
  for (const Entry& e : std::vector<Entry>(book->entries_))
    book->evict_locked(e.submitter);
  return book;
}

std::filesystem::path BenchReportBook::file_of(const std::string& id) const {
  return options_.dir / (id + ".json");
}

StatusOr<std::string> BenchReportBook::keep(const Json& answer, const std::string& submitter) {
  Entry entry{"br_" + random_hex(8), submitter, clock_.unix_ms(),
              summarize(answer.value("report", Json::object()))};
  const Json file = {{"report_id", entry.id},
                     {"submitter", submitter},
                     {"created_ms", entry.created_ms},
                     {"answer", answer}};
  MutexLock lock(mu_);
  KF_RETURN_IF_ERROR(write_file_atomic(file_of(entry.id),
                                       file.dump(-1, ' ', false, Json::error_handler_t::replace)));
  const std::string id = entry.id;
  auto at = std::upper_bound(
      entries_.begin(), entries_.end(), entry,
      [](const Entry& a, const Entry& b) { return older(a.created_ms, a.id, b.created_ms, b.id); });
  entries_.insert(at, std::move(entry));
  evict_locked(submitter);
  return id;
}

void BenchReportBook::evict_locked(const std::string& submitter) {
  auto drop = [this](std::vector<Entry>::iterator it) REQUIRES(mu_) {
    std::error_code ec;
    std::filesystem::remove(file_of(it->id), ec);
    if (ec) KF_LOG_WARN("bench reports: cannot remove {}: {}", it->id, ec.message());
    return entries_.erase(it);
  };
  const auto mine = [&submitter](const Entry& e) { return e.submitter == submitter; };
  auto count = std::count_if(entries_.begin(), entries_.end(), mine);
  for (auto it = entries_.begin(); it != entries_.end() && count > options_.max_per_submitter;) {
    if (mine(*it)) {
      it = drop(it);
      --count;
    } else {
      ++it;
    }
  }
  while (entries_.size() > static_cast<size_t>(options_.max_total))
    drop(entries_.begin());
}

Json BenchReportBook::entry_view(const Entry& e) {
  Json view = {{"report_id", e.id},
               {"submitter", e.submitter},
               {"created_at", jobs::epoch_seconds(e.created_ms)}};
  view.update(e.summary);
  return view;
}

StatusOr<Json> BenchReportBook::list(const model::Principal& principal,
                                     const ReportListQuery& query) const {
  if (query.limit < 1 || query.limit > kMaxReportListLimit) {
    return invalid_argument("must be an integer from 1 to " + std::to_string(kMaxReportListLimit),
                            "query.limit");
  }
  std::optional<model::JobKey> after;
  if (!query.cursor.empty()) {
    KF_ASSIGN_OR_RETURN(after, model::decode_job_cursor(query.cursor, "query.cursor"));
  }
  Json reports = Json::array();
  Json next = nullptr;
  MutexLock lock(mu_);
  const Entry* last = nullptr;
  for (auto it = entries_.rbegin(); it != entries_.rend(); ++it) {
    if (!principal.may_access(it->submitter)) continue;
    if (after && !older(it->created_ms, it->id, after->created_ms, after->id)) continue;
    if (reports.size() == static_cast<size_t>(query.limit)) {  // one more: a next page
      next = model::encode_job_cursor({last->created_ms, last->id});
      break;
    }
    reports.push_back(entry_view(*it));
    last = &*it;
  }
  return Json{{"reports", std::move(reports)}, {"next_cursor", next}, {"limit", query.limit}};
}

StatusOr<Json> BenchReportBook::get(const std::string& id,
                                    const model::Principal& principal) const {
  const auto unknown = Status(ErrorCode::kNotFound, "no bench report '" + id + "'", "report_id");
  Json view;
  {
    MutexLock lock(mu_);
    auto it = std::find_if(entries_.begin(), entries_.end(),
                           [&id](const Entry& e) { return e.id == id; });
    if (it == entries_.end() || !principal.may_access(it->submitter)) return unknown;
    view = entry_view(*it);
  }
  auto text = read_file(file_of(id));
  if (!text.is_ok()) {
    return text.status().code() == ErrorCode::kNotFound ? unknown : text.status();
  }
  KF_ASSIGN_OR_RETURN(Json file, parse_json(*text));
  const Json answer = file.value("answer", Json::object());
  view["report"] = answer.value("report", Json::object());
  view["files"] = answer.value("files", Json::object());
  return view;
}

}  // namespace kforge::bench
