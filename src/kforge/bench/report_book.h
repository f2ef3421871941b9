// BenchReportBook: the finished reports of `POST /bench`, kept so
// that GET /bench/reports and the web UI can show them after the answer (docs/rest-api.md
// "GET /bench/reports").
//
// One JSON file per report under `dir` (<data-dir>/bench-reports/<report id>.json, written
// atomically): {"report_id", "submitter", "created_ms", "answer": {report, files}}. Bounded:
// at most `max_per_submitter` reports of each submitter (a principal name, model/principal.h;
// "" for the anonymous one) and `max_total` in all; keeping one more drops the submitter's
// oldest, then the book's oldest. The index (every report's summary) lives in memory and is
// read back from the files at open; an unreadable file is skipped with a warning.
//
// Visibility is the submitter, as for jobs: a user principal sees its own reports, an admin
// (and the anonymous principal of a server without tokens) every one; another principal's
// report is answered as an unknown one (kNotFound).
//
// Thread-safety: every method may be called from any thread. keep() and get() block on disk.
//
// Example:
//   KF_ASSIGN_OR_RETURN(auto book, BenchReportBook::open({.dir = data_dir / "bench-reports"}));
//   KF_ASSIGN_OR_RETURN(std::string id, book->keep(answer, principal.name));
//   KF_ASSIGN_OR_RETURN(Json page, book->list(principal, {.limit = 20}));
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "kforge/common/clock.h"
#include "kforge/common/json.h"
#include "kforge/common/status.h"
#include "kforge/common/thread_annotations.h"
#include "kforge/model/principal.h"

namespace kforge::bench {

// The most reports one listing returns.
inline constexpr int kMaxReportListLimit = 100;

struct ReportListQuery {
  std::string cursor{};  // next_cursor of the page before; "" for the newest
  int limit = 20;        // 1..kMaxReportListLimit
};

class BenchReportBook {
 public:
  struct Options {
    std::filesystem::path dir{};
    int max_per_submitter = 20;
    int max_total = 200;
  };

  // Creates `dir` when missing and reads the reports in it. kIo when it cannot be made or read.
  static StatusOr<std::unique_ptr<BenchReportBook>> open(
      Options options, const Clock& clock = SystemClock::instance());

  // Keeps a finished bench's answer ({report, files}: bench_answer) as `submitter`'s; returns
  // its id. kIo when it cannot be written.
  StatusOr<std::string> keep(const Json& answer, const std::string& submitter);

  // {"reports": [summary, ...], "next_cursor": "..." | null, "limit": n}, newest first, those
  // `principal` may see. A summary: report_id, submitter, created_at (Unix seconds), device,
  // device_name, interpreter, sizes, and per op its name, dtype, best kernel and speedup.
  // kInvalidArgument (field "query.cursor") for a cursor this book did not give.
  StatusOr<Json> list(const model::Principal& principal, const ReportListQuery& query) const;

  // The summary plus `report` and `files` of the answer. kNotFound (field "report_id") when
  // unknown or not `principal`'s.
  StatusOr<Json> get(const std::string& id, const model::Principal& principal) const;

  // The summary of a report (what list() shows of it).
  static Json summarize(const Json& report);

 private:
  struct Entry {
    std::string id;
    std::string submitter;
    int64_t created_ms = 0;
    Json summary;
  };

  BenchReportBook(Options options, const Clock& clock)
      : options_(std::move(options)), clock_(clock) {}
  std::filesystem::path file_of(const std::string& id) const;
  // Drops the oldest entries past the bounds (their files too).
  void evict_locked(const std::string& submitter) REQUIRES(mu_);
  static Json entry_view(const Entry& e);

  const Options options_;
  const Clock& clock_;
  mutable Mutex mu_;
  std::vector<Entry> entries_ GUARDED_BY(mu_);  // oldest first (created_ms, then id)
};

}  // namespace kforge::bench
