// One workbench session in memory: its kernel, state, settings, context accounting, notes and
// versions, and its conversion to and from the store's records (store/workbench_store.h).
//
// Version results (`Version::results`, owned here, stored as JSON):
//   {"run":        {"ok", "cases": [...], "at_ms"},
//    "validation": {"passed", "cases": [...], "at_ms"},
//    "timing":     {"ok", "cases": [{"label", "median_ms", ...}], "at_ms", "device"},
//    "benchmark":  {"correct", "cases": [{"label", "median_ms", "speedup", ...}], "at_ms", ...}}
// A version's verdict is its latest correctness result (a validation or a benchmark, which
// checks correctness first); its time is the geometric mean of the per-size medians of its
// latest timing (measure or benchmark).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "kforge/common/json.h"
#include "kforge/common/status.h"
#include "kforge/model/speedup.h"
#include "kforge/store/workbench_store.h"
#include "kforge/workbench/state.h"

namespace kforge::workbench {

struct Settings {
  int min_versions = 3;
  int64_t context_budget_tokens = 128000;
  std::string device;  // where the session's jobs run ("cpu", "cuda:0")
};

struct ContextUsage {
  int64_t tokens = 0;              // in the current context (since the session was last resumed)
  int64_t total_tokens = 0;        // over the session's life
  int64_t calls = 0;               // tool calls in the current context
  int epoch = 1;                   // 1 + how many times it was resumed in a new context
  int64_t summary_written_ms = 0;  // when docs/summarization.md was last written (0: never)
};

struct Version {
  int number = 0;
  std::string file;  // relative to the workspace: "kernel/<name>_v<N>.py"
  std::string source;
  Json results = Json::object();
  int64_t created_ms = 0;

  // The latest correctness verdict; nullopt while none was reached.
  std::optional<bool> correct() const;
  bool evaluated() const { return correct().has_value(); }
  // Geometric mean over input sizes of the latest timing's medians (ms); nullopt if untimed.
  std::optional<double> time_ms() const;
  // time_ms() with its standard error (from each size's spread and trials).
  std::optional<model::TimeEstimate> time_estimate() const;
  // "measure_kernel_time" or "benchmark_kernel": where time_ms() comes from.
  std::string time_source() const;
};

struct Session {
  std::string id;
  std::string kernel_name;
  State state = State::kStart;
  std::string workspace;  // absolute
  Settings settings;
  ContextUsage context;
  // {"test_file": "...", "last_errors": [{"at_ms","tool","version","error"}], "history":
  //  [{"at_ms","from","to","why"}], "last_benchmark": {...}}
  Json notes = Json::object();
  std::vector<Version> versions;
  int64_t created_ms = 0;
  int64_t updated_ms = 0;
  // The principal whose call created it (model/principal.h): only that principal (and
  // admins, and a server without tokens) may list, resume or use it. "" in sessions stored
  // before owners were recorded.
  std::string owner;

  const Version* latest() const { return versions.empty() ? nullptr : &versions.back(); }
  Version* find(int number);
  // The fastest correct version with a timing; else the latest correct one; else nullptr.
  const Version* best() const;
  // The other correct, timed versions whose time cannot be told from best()'s: the 95 %
  // interval of their ratio (model/speedup.h, the device's systematic error included) covers 1.
  std::vector<int> tied_with_best() const;
  // Why `end` cannot be reached yet ("" when it can): fewer than min_versions written, a
  // version without a correctness verdict, or no correct version.
  std::string end_blocker() const;

  // Records a state change in notes.history.
  void transition(State to, const std::string& why, int64_t now_ms);
  // Keeps the last few errors in notes.last_errors.
  void note_error(const std::string& tool, int version, const std::string& error, int64_t now_ms);

  store::WorkbenchSessionRecord record() const;
  // The owner a stored session records ("" when none, or not a string).
  static std::string owner_of(const store::WorkbenchSessionRecord& record);
  store::WorkbenchVersionRecord version_record(const Version& v) const;
  static StatusOr<Session> from_records(const store::WorkbenchSessionRecord& session,
                                        const std::vector<store::WorkbenchVersionRecord>& versions);
};

}  // namespace kforge::workbench
