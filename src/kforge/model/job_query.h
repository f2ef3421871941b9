// JobQuery: which jobs a listing returns (GET /jobs, Store::list_jobs), and the cursor that
// continues it.
//
// A listing is newest first: by created_ms descending, ties by id descending. Every given
// filter must hold (AND); `states` matches any of its states. `after` continues a listing: only
// jobs strictly after that key in the listing's order. The cursor is the key of a page's last
// job as text ("c1" and the hex of "<created_ms>:<id>"), opaque to clients and URL-safe.
//
// Example:
//   JobQuery q;
//   q.states = {JobState::kSucceeded};
//   q.after = JobKey{1795642723123, "4f2a..."};  // from decode_job_cursor(next_cursor)
//   q.limit = 51;                                 // one more than a page: is there a next?
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kforge/common/status.h"
#include "kforge/model/job.h"

namespace kforge::model {

// A job's place in a listing.
struct JobKey {
  int64_t created_ms = 0;
  std::string id;
  bool operator==(const JobKey&) const = default;
};

struct JobQuery {
  std::vector<JobState> states;              // any of these; empty: every state
  std::optional<std::string> kernel_type;    // the candidate's kernel_type ("triton", "cuda", ...)
  std::optional<std::string> device;         // as recorded: requested, or where it ran
  std::optional<std::string> submitter;      // a principal name; "" is the anonymous one
  std::optional<int64_t> created_from_ms;    // created_ms >= this (Unix ms)
  std::optional<int64_t> created_before_ms;  // created_ms < this (Unix ms)
  std::optional<JobKey> after;               // continue after this job
  int limit = 50;                            // at most this many jobs (>= 1)
};

// The most a listing returns at once (GET /jobs' `limit`).
inline constexpr int kMaxJobListLimit = 500;

// The cursor of `key` ("c1" + hex): URL-safe, no '+', '/' or '='.
std::string encode_job_cursor(const JobKey& key);

// The key a cursor stands for; kInvalidArgument naming `field` for text that no
// encode_job_cursor wrote.
StatusOr<JobKey> decode_job_cursor(std::string_view cursor, const std::string& field);

}  // namespace kforge::model
