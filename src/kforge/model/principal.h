// Principal: on whose behalf a request is made, and which jobs it may see (docs/security.md
// "Who sees which jobs").
//
// A server with API tokens maps each token to a principal: its `name` (the label the token
// file gives it: never the token, nor a hash of it) is recorded as the `submitter` of every job
// it submits, and its role decides what else it may see. A server without tokens has one
// principal for every client, the anonymous one (name ""), which behaves as before tokens
// existed: it reads and cancels every job.
//
//   role       reads/cancels                 job ids in /stats   POST /admin/cleanup-jobs
//   anonymous  every job                     no                  yes
//   user       the jobs it submitted         no                  no (403)
//   admin      every job                     yes                 yes
//
// A job that a principal may not see is answered exactly as an unknown one (404), so ids
// cannot be probed. Value type; thread-compatible.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace kforge::model {

enum class Role { kAnonymous, kUser, kAdmin };

// Wire names: "anonymous", "user", "admin".
std::string_view to_string(Role r);
std::optional<Role> role_from(std::string_view s);

struct Principal {
  std::string name;  // recorded as a job's submitter; "" for the anonymous principal
  Role role = Role::kAnonymous;

  // May read and cancel a job recorded with `submitter`.
  bool may_access(std::string_view submitter) const {
    return role != Role::kUser || submitter == name;
  }
  // May see which jobs run (ids in /stats, /health) and every batch.
  bool sees_job_ids() const { return role == Role::kAdmin; }
  // May delete other principals' jobs (POST /admin/cleanup-jobs).
  bool may_administer() const { return role != Role::kUser; }

  bool operator==(const Principal&) const = default;
};

// True for a principal name a token file may give: 1 to 64 of [A-Za-z0-9._-].
bool is_principal_name(std::string_view name);

}  // namespace kforge::model
