#include "kernelbench_driver.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <iostream>
#include <memory>
#include <optional>

#include "engine_flags.h"
#include "kforge/common/clock.h"
#include "kforge/common/thread_annotations.h"

namespace kforge::app {
namespace {

namespace kb = bench::kernelbench;
using Clock = std::chrono::steady_clock;

// How long cancelled jobs get to report before their samples are recorded as cancelled.
constexpr auto kCancelGrace = std::chrono::seconds(60);
// After this long with no sample finished, the progress says which jobs are still out and
// what each is doing (and again after each further spell): a stalled run shows where.
constexpr auto kQuietSpell = std::chrono::seconds(30);
constexpr size_t kWaitingShown = 6;  // jobs named in such a line

struct Event {
  size_t batch = 0;
  std::optional<size_t> index;  // the job's place in the batch; nullopt: the batch finished
  std::string job_id;
  Json view;
};

struct ActiveBatch {
  std::vector<kb::SampleContext> samples;  // in the batch's order
  std::vector<std::string> job_ids;
  std::vector<bool> reported;
  std::shared_ptr<jobs::BatchWatch> watch;
  bool done = false;
};

// One line per sample (with the seconds since the start), or on a terminal one line kept up
// to date.
class Progress {
 public:
  Progress(size_t total, bool quiet) : total_(total), quiet_(quiet), tty_(isatty(2) == 1) {}

  void record(const Json& r) {
    ++done_;
    if (r.value("correct", false)) ++correct_;
    if (r.value("status", std::string()) != "judged") ++not_judged_;
    if (quiet_) return;
    const std::string verdict = verdict_of(r);
    if (tty_) {
      std::cerr << fmt::format("\r\033[K[{}/{}] correct {}, not judged {} | {}: {}", done_, total_,
                               correct_, not_judged_, r.value("file", std::string()),
                               verdict.substr(0, 60))
                << std::flush;
    } else {
      std::cerr << fmt::format("[{}/{} {:.1f} s] {}: {}\n", done_, total_, seconds(),
                               r.value("file", std::string()), verdict);
    }
  }
  void note(const std::string& line) {
    if (quiet_) return;
    std::cerr << (tty_ && done_ > 0 ? "\r\033[K" : "") << line << '\n';
  }
  // Seconds since the run started (the progress's own clock: every line counts from it).
  double seconds() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }
  void finish() {
    if (!quiet_ && tty_ && done_ > 0) std::cerr << '\n';
  }

 private:
  static std::string verdict_of(const Json& r) {
    if (r.value("status", std::string()) != "judged") {
      std::string why = r.value("reason", Json()).is_string() ? r["reason"].get<std::string>() : "";
      return r.value("status", std::string()) +
             (why.empty() ? "" : ": " + why.substr(0, why.find('\n')));
    }
    if (!r.value("correct", false))
      return r.value("error_kind", Json()).is_string() ? r["error_kind"].get<std::string>()
                                                       : "incorrect";
    std::string line = "correct";
    if (const Json s = r.value("speedup", Json()); s.is_number())
      line += fmt::format(", speedup {:.3g}x", s.get<double>());
    if (const Json f = r.value("flags", Json::array()); !f.empty())
      line += fmt::format(", {} honesty flag(s)", f.size());
    return line;
  }

  const size_t total_;
  const bool quiet_;
  const bool tty_;
  const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
  size_t done_ = 0, correct_ = 0, not_judged_ = 0;
};

// "candidates[3].source_code" -> 3.
std::optional<size_t> candidate_index(const Status& s) {
  const std::string& field = s.field_path();
  if (s.code() != ErrorCode::kInvalidArgument || field.rfind("candidates[", 0) != 0)
    return std::nullopt;
  size_t index = 0;
  for (size_t i = 11; i < field.size() && field[i] >= '0' && field[i] <= '9'; ++i)
    index = index * 10 + static_cast<size_t>(field[i] - '0');
  return index;
}

class Driver {
 public:
  Driver(jobs::JobService& service, const SubmitBatch& submit, const DriveOptions& options,
         size_t total, const std::function<void(const Json&)>& on_record)
      : service_(service),
        submit_(submit),
        options_(options),
        progress_(total, options.quiet),
        on_record_(on_record) {}

  DriveOutcome run(std::vector<ProblemBatch> batches, const sigset_t& signals) {
    SignalWatch watch(signals, [this](int) {
      interrupted_.store(true);
      cv_.notify_all();
    });
    size_t next = 0, running = 0;
    std::optional<Clock::time_point> cancel_deadline;
    while (true) {
      while (!interrupted_.load() && running < options_.in_flight && next < batches.size()) {
        if (start(std::move(batches[next++]))) ++running;
      }
      if (running == 0 && (next == batches.size() || interrupted_.load())) break;
      std::deque<Event> events;
      {
        MutexLock lock(mu_);
        lock.wait_for(cv_, std::chrono::milliseconds(200), [&]() REQUIRES(mu_) {
          return !events_.empty() || (interrupted_.load() && !cancel_deadline);
        });
        events.swap(events_);
      }
      for (Event& e : events) {
        if (handle(e)) --running;
      }
      if (interrupted_.load() && !cancel_deadline) {
        progress_.note("kforge kernelbench: interrupted: cancelling the jobs in flight");
        cancel_in_flight();
        cancel_deadline = Clock::now() + kCancelGrace;
      }
      if (cancel_deadline && Clock::now() > *cancel_deadline) {
        abandon_in_flight();
        break;
      }
      if (!options_.quiet && !cancel_deadline && Clock::now() - last_news_ > kQuietSpell) {
        say_waiting();
      }
    }
    progress_.finish();
    outcome_.interrupted = interrupted_.load();
    return std::move(outcome_);
  }

 private:
  void emit(Json record) {
    last_news_ = Clock::now();
    progress_.record(record);
    on_record_(record);
    outcome_.records.push_back(std::move(record));
  }

  // Submits `batch`; false when nothing of it is left running (every sample already recorded).
  bool start(ProblemBatch batch) {
    std::vector<size_t> included(batch.samples.size());
    for (size_t i = 0; i < included.size(); ++i)
      included[i] = i;
    while (!included.empty()) {
      Json body = batch.body;
      body["candidates"] = Json::array();
      for (size_t i : included)
        body["candidates"].push_back(
            {{"source_code", batch.sources[i]}, {"kernel_type", batch.kernel_type}});
      auto submitted = submit_(body);
      if (submitted.is_ok()) {
        ActiveBatch active;
        for (size_t i : included)
          active.samples.push_back(batch.samples[i]);
        active.job_ids = submitted->job_ids;
        active.reported.assign(active.job_ids.size(), false);
        const size_t slot = active_.size();
        active_.push_back(std::move(active));
        watch(slot, *submitted);
        return true;
      }
      const Status& s = submitted.status();
      if (auto k = candidate_index(s); k && *k < included.size()) {
        emit(kb::unjudged_record(batch.samples[included[*k]], "unreadable",
                                 "not a valid candidate: " + s.message()));
        included.erase(included.begin() + static_cast<std::ptrdiff_t>(*k));
        continue;
      }
      for (size_t i : included)
        emit(kb::unjudged_record(batch.samples[i], "not_judged",
                                 "the batch was refused: " + s.to_string()));
      return false;
    }
    return false;
  }

  void watch(size_t slot, const jobs::BatchRecord& record) {
    auto on_job = [this, slot](size_t index, const model::JobRecord& job, const Json& view,
                               size_t) {
      MutexLock lock(mu_);
      events_.push_back(Event{slot, index, job.id, view});
      cv_.notify_all();
    };
    auto on_all = [this, slot](const Json&) {
      MutexLock lock(mu_);
      events_.push_back(Event{slot, std::nullopt, "", Json()});
      cv_.notify_all();
    };
    active_[slot].watch = jobs::BatchWatch::start(service_, record, on_job, on_all);
  }

  // True when `e` finished its batch.
  bool handle(const Event& e) {
    ActiveBatch& batch = active_[e.batch];
    if (!e.index) {
      batch.done = true;
      return true;
    }
    if (*e.index >= batch.samples.size() || batch.reported[*e.index]) return false;
    batch.reported[*e.index] = true;
    emit(kb::judged_record(batch.samples[*e.index], e.job_id, e.view));
    return false;
  }

  // "still waiting after 30 s for 4 job(s): level_1_problem_23_sample_0_kernel.py (running:
  // timing_candidate, 95 s), ...": the jobs not reported yet, with their state, progress phase
  // and how long they have run.
  void say_waiting() {
    last_news_ = Clock::now();
    const int64_t now_ms = SystemClock::instance().unix_ms();
    std::vector<std::string> waiting;
    size_t out = 0;
    for (const ActiveBatch& batch : active_) {
      if (batch.done) continue;
      for (size_t i = 0; i < batch.job_ids.size(); ++i) {
        if (batch.reported[i]) continue;
        if (++out > kWaitingShown) continue;
        std::string what = "state unknown";
        if (auto job = service_.get(batch.job_ids[i]); job.is_ok()) {
          what = std::string(model::to_string(job->state));
          if (!job->phase.empty()) what += ": " + job->phase;
          if (job->started_ms > 0)
            what += fmt::format(", {} s", std::max<int64_t>(0, now_ms - job->started_ms) / 1000);
        }
        waiting.push_back(fmt::format("{} ({})", batch.samples[i].file, what));
      }
    }
    if (out == 0) return;
    std::string line =
        fmt::format("kforge kernelbench: {} s in, waiting for {} job(s): {}",
                    static_cast<int64_t>(progress_.seconds()), out, fmt::join(waiting, ", "));
    if (out > kWaitingShown) line += fmt::format(" and {} more", out - kWaitingShown);
    progress_.note(line);
  }

  void cancel_in_flight() {
    for (ActiveBatch& batch : active_) {
      if (batch.done) continue;
      for (size_t i = 0; i < batch.job_ids.size(); ++i) {
        if (!batch.reported[i]) service_.cancel(batch.job_ids[i], "interrupted").ignore();
      }
    }
  }

  // The cancelled jobs did not report in time: their samples are recorded as cancelled.
  void abandon_in_flight() {
    for (ActiveBatch& batch : active_) {
      if (batch.done) continue;
      if (batch.watch) batch.watch->end();
      batch.done = true;
      for (size_t i = 0; i < batch.samples.size(); ++i) {
        if (batch.reported[i]) continue;
        Json r = kb::unjudged_record(batch.samples[i], "cancelled",
                                     "interrupted; the job did not report its cancellation");
        r["job_id"] = batch.job_ids[i];
        emit(std::move(r));
      }
    }
  }

  jobs::JobService& service_;
  const SubmitBatch& submit_;
  const DriveOptions options_;
  Progress progress_;
  const std::function<void(const Json&)>& on_record_;
  std::atomic<bool> interrupted_{false};
  Clock::time_point last_news_ = Clock::now();  // the last record, or the last waiting line
  Mutex mu_;
  std::condition_variable cv_;
  std::deque<Event> events_ GUARDED_BY(mu_);
  std::deque<ActiveBatch> active_;  // the driving thread's only (watch callbacks use events_)
  DriveOutcome outcome_;
};

}  // namespace

DriveOutcome drive_batches(jobs::JobService& service, const SubmitBatch& submit,
                           std::vector<ProblemBatch> batches, const DriveOptions& options,
                           const sigset_t& signals,
                           const std::function<void(const Json&)>& on_record) {
  size_t total = 0;
  for (const auto& b : batches)
    total += b.samples.size();
  Driver driver(service, submit, options, total, on_record);
  return driver.run(std::move(batches), signals);
}

}  // namespace kforge::app
