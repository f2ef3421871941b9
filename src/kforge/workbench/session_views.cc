#include "kforge/workbench/session_views.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "kforge/jobs/job_view.h"
#include "kforge/model/job_query.h"
#include "kforge/workbench/narrative.h"

namespace kforge::workbench {
namespace {

// A benchmark's geometric-mean speedup over its sizes, or null.
Json speedup_of(const Version& v) {
  auto b = v.results.find("benchmark");
  if (b == v.results.end() || !b->is_object()) return nullptr;
  auto g = b->find("speedup_geomean");
  return g != b->end() && g->is_number() ? *g : Json(nullptr);
}

Json optional_number(const std::optional<double>& x) {
  return x ? Json(*x) : Json(nullptr);
}

Json version_view(const Version& v, bool best, bool tied) {
  const std::optional<bool> correct = v.correct();
  const std::optional<model::TimeEstimate> time = v.time_estimate();
  return Json{{"version", v.number},
              {"file", v.file},
              {"source", v.source},
              {"created_at", jobs::epoch_seconds(v.created_ms)},
              {"correct", correct ? Json(*correct) : Json(nullptr)},
              {"time_ms", time ? Json(time->ms) : Json(nullptr)},
              {"time_se_ms", time ? Json(time->se_ms) : Json(nullptr)},
              {"time_source", v.time_source()},
              {"speedup", speedup_of(v)},
              {"best", best},
              {"ties_best", tied},
              {"results", v.results}};
}

// What a listing can still say about a row the workbench cannot read back.
Json unreadable_summary(const store::WorkbenchSessionRecord& r, const Status& why) {
  return Json{{"session_id", r.id},
              {"kernel_name", r.kernel_name},
              {"state", r.state},
              {"owner", Session::owner_of(r)},
              {"created_at", jobs::epoch_seconds(r.created_ms)},
              {"updated_at", jobs::epoch_seconds(r.updated_ms)},
              {"error", "the stored session cannot be read: " + why.message()}};
}

}  // namespace

Json session_summary_view(const Session& s) {
  const Version* best = s.best();
  const auto correct = std::count_if(s.versions.begin(), s.versions.end(),
                                     [](const Version& v) { return v.correct() == true; });
  return Json{{"session_id", s.id},
              {"kernel_name", s.kernel_name},
              {"state", to_string(s.state)},
              {"owner", s.owner},
              {"device", s.settings.device},
              {"created_at", jobs::epoch_seconds(s.created_ms)},
              {"updated_at", jobs::epoch_seconds(s.updated_ms)},
              {"versions", s.versions.size()},
              {"correct_versions", correct},
              {"best_version", best != nullptr ? Json(best->number) : Json(nullptr)},
              {"best_time_ms", best != nullptr ? optional_number(best->time_ms()) : Json(nullptr)},
              {"best_speedup", best != nullptr ? speedup_of(*best) : Json(nullptr)}};
}

std::string encode_session_cursor(int64_t updated_ms, const std::string& id) {
  return model::encode_job_cursor(model::JobKey{updated_ms, id});
}

Status decode_session_cursor(std::string_view cursor, const std::string& field,
                             store::WorkbenchSessionQuery& query) {
  KF_ASSIGN_OR_RETURN(model::JobKey key, model::decode_job_cursor(cursor, field));
  query.after_updated_ms = key.created_ms;
  query.after_id = std::move(key.id);
  return Status::ok();
}

StatusOr<Json> list_session_views(store::WorkbenchStore& store, store::WorkbenchSessionQuery query,
                                  const model::Principal& principal) {
  const int page = std::clamp(query.limit, 1, kMaxSessionListLimit);
  Json out = {{"sessions", Json::array()}, {"next_cursor", nullptr}, {"limit", page}};
  if (principal.role == model::Role::kUser) {
    if (query.owner && *query.owner != principal.name) return out;  // not theirs to see
    query.owner = principal.name;
  }
  query.limit = page + 1;  // one more: is there a next page?
  KF_ASSIGN_OR_RETURN(auto records, store.list_sessions(query));
  const bool more = records.size() > static_cast<size_t>(page);
  if (more) records.resize(static_cast<size_t>(page));
  for (const auto& r : records) {
    auto versions = store.versions(r.id);
    if (!versions.is_ok()) return versions.status();
    auto session = Session::from_records(r, *versions);
    out["sessions"].push_back(session.is_ok() ? session_summary_view(*session)
                                              : unreadable_summary(r, session.status()));
  }
  if (more)
    out["next_cursor"] = encode_session_cursor(records.back().updated_ms, records.back().id);
  return out;
}

StatusOr<Json> session_view(store::WorkbenchStore& store, const Knowledge& knowledge,
                            const std::string& id, const model::Principal& principal) {
  KF_ASSIGN_OR_RETURN(auto record, store.get_session(id));
  if (!record || !principal.may_access(Session::owner_of(*record))) {
    return Status(ErrorCode::kNotFound, "no workbench session '" + id + "'", "session_id");
  }
  KF_ASSIGN_OR_RETURN(auto versions, store.versions(id));
  KF_ASSIGN_OR_RETURN(Session s, Session::from_records(*record, versions));
  Json view = session_summary_view(s);
  view["min_versions"] = s.settings.min_versions;
  view["context"] = Json{{"tokens", s.context.tokens},
                         {"total_tokens", s.context.total_tokens},
                         {"budget_tokens", s.settings.context_budget_tokens},
                         {"calls", s.context.calls},
                         {"epoch", s.context.epoch}};
  view["history"] = s.notes.value("history", Json::array());
  view["last_errors"] = s.notes.value("last_errors", Json::array());
  view["end_blocker"] = s.end_blocker();
  const Version* best = s.best();
  const std::vector<int> tied = s.tied_with_best();
  view["tied_with_best"] = tied;
  Json list = Json::array();
  for (const Version& v : s.versions) {
    list.push_back(
        version_view(v, best == &v, std::find(tied.begin(), tied.end(), v.number) != tied.end()));
  }
  view["versions"] = std::move(list);
  view["log"] = s.kernel_name.empty() ? std::string() : render_dev_log(s, knowledge);
  return view;
}

}  // namespace kforge::workbench
