// GET /jobs (job_list.h): the query's parsing here, the handler below it.
#include "kforge/frontends/http/job_list.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "kforge/common/iso8601.h"
#include "kforge/frontends/http/rest_context.h"
#include "kforge/jobs/job_view.h"
#include "kforge/model/kernel_spec.h"

namespace kforge::frontends::http {
namespace {

constexpr std::string_view kParameters[] = {"status", "kernel_type", "device", "submitter", "since",
                                            "until",  "limit",       "cursor", "format"};
constexpr size_t kMaxFilterLength = 128;

std::string field(std::string_view name) {
  return "query." + std::string(name);
}

// A time filter: Unix epoch seconds, or ISO 8601 with milliseconds; as Unix ms.
StatusOr<int64_t> parse_time(const std::string& text, std::string_view name) {
  double seconds = 0;
  const char* end = text.data() + text.size();
  const auto [stop, err] = std::from_chars(text.data(), end, seconds);
  if (!text.empty() && err == std::errc() && stop == end && std::isfinite(seconds) &&
      seconds >= 0 && seconds < 1e11) {
    return static_cast<int64_t>(std::llround(seconds * 1000.0));
  }
  if (const int64_t ms = parse_iso8601_ms(text); ms > 0) return ms;
  return invalid_argument(
      "must be Unix epoch seconds or an ISO 8601 time such as "
      "2026-11-25T21:38:43.123Z, got '" +
          text + "'",
      field(name));
}

StatusOr<std::vector<model::JobState>> parse_states(const std::string& text) {
  std::vector<model::JobState> states;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string name = text.substr(start, comma - start);
    const std::optional<model::JobState> state = model::job_state_from(name);
    if (!state) {
      return invalid_argument("'" + name +
                                  "' is not a job state (queued, running, success, failed, "
                                  "cancelled; several separated by commas)",
                              "query.status");
    }
    states.push_back(*state);
    start = comma + 1;
  }
  return states;
}

// A plain filter value (device, submitter): at most kMaxFilterLength characters.
StatusOr<std::string> parse_text(const std::string& text, std::string_view name) {
  if (text.size() > kMaxFilterLength) {
    return invalid_argument("must be at most " + std::to_string(kMaxFilterLength) + " characters",
                            field(name));
  }
  return text;
}

}  // namespace

StatusOr<int> parse_limit_param(const std::string& text, int max_limit) {
  int limit = 0;
  const char* end = text.data() + text.size();
  const auto [stop, err] = std::from_chars(text.data(), end, limit);
  if (text.empty() || err != std::errc() || stop != end || limit < 1 || limit > max_limit) {
    return invalid_argument(
        "must be an integer from 1 to " + std::to_string(max_limit) + ", got '" + text + "'",
        "query.limit");
  }
  return limit;
}

StatusOr<JobListRequest> parse_job_list_request(const HttpRequest& request) {
  for (const auto& [name, value] : request.query) {
    if (std::find(std::begin(kParameters), std::end(kParameters), name) == std::end(kParameters)) {
      return invalid_argument(
          "is not a parameter of GET /jobs (status, kernel_type, device, "
          "submitter, since, until, limit, cursor, format)",
          field(name));
    }
  }
  JobListRequest out;
  model::JobQuery& q = out.query;
  if (const std::string* v = request.query_param("status")) {
    KF_ASSIGN_OR_RETURN(q.states, parse_states(*v));
  }
  if (const std::string* v = request.query_param("kernel_type")) {
    if (!model::kernel_type_from(*v)) {
      return invalid_argument("'" + *v + "' is not a kernel_type", "query.kernel_type");
    }
    q.kernel_type = *v;
  }
  if (const std::string* v = request.query_param("device")) {
    KF_ASSIGN_OR_RETURN(q.device, parse_text(*v, "device"));
  }
  if (const std::string* v = request.query_param("submitter")) {
    KF_ASSIGN_OR_RETURN(q.submitter, parse_text(*v, "submitter"));
  }
  if (const std::string* v = request.query_param("since")) {
    KF_ASSIGN_OR_RETURN(q.created_from_ms, parse_time(*v, "since"));
  }
  if (const std::string* v = request.query_param("until")) {
    KF_ASSIGN_OR_RETURN(q.created_before_ms, parse_time(*v, "until"));
  }
  if (q.created_from_ms && q.created_before_ms && *q.created_before_ms <= *q.created_from_ms) {
    return invalid_argument("must be later than since", "query.until");
  }
  if (const std::string* v = request.query_param("limit")) {
    KF_ASSIGN_OR_RETURN(q.limit, parse_limit_param(*v, model::kMaxJobListLimit));
  }
  if (const std::string* v = request.query_param("cursor")) {
    KF_ASSIGN_OR_RETURN(q.after, model::decode_job_cursor(*v, "query.cursor"));
  }
  if (const std::string* v = request.query_param("format")) {
    if (*v != "json" && *v != "jsonl") {
      return invalid_argument("must be json or jsonl, got '" + *v + "'", "query.format");
    }
    out.jsonl = *v == "jsonl";
  }
  const model::Principal& who = request.principal;
  if (q.submitter && !who.may_access(*q.submitter)) out.sees_none = true;
  if (who.role == model::Role::kUser) q.submitter = who.name;
  return out;
}

void handle_list_jobs(const RestContextPtr& ctx, const HttpRequest& request, Responder responder) {
  auto parsed = parse_job_list_request(request);
  if (!parsed.is_ok()) {
    responder.send(HttpResponse::error(parsed.status()));
    return;
  }
  ctx->blocking([ctx, list = std::move(parsed).value(), responder = std::move(responder)] {
    const int page = list.query.limit;
    std::vector<model::JobRecord> jobs;
    if (!list.sees_none) {
      model::JobQuery query = list.query;
      ++query.limit;  // one more than a page says whether another page follows
      auto found = ctx->service.list_jobs(query);
      if (!found.is_ok()) {
        responder.send(HttpResponse::error(found.status()));
        return;
      }
      jobs = std::move(found).value();
    }
    Json next = nullptr;
    if (static_cast<int>(jobs.size()) > page) {
      jobs.resize(static_cast<size_t>(page));
      next = model::encode_job_cursor({jobs.back().created_ms, jobs.back().id});
    }
    HttpResponse response;
    if (!next.is_null()) response.headers.emplace_back("X-Next-Cursor", next.get<std::string>());
    if (list.jsonl) {
      response.content_type = "application/jsonl; charset=utf-8";
      for (const model::JobRecord& job : jobs) {
        response.body += dump_json(jobs::job_list_view(job));
        response.body += '\n';
      }
    } else {
      Json items = Json::array();
      for (const model::JobRecord& job : jobs)
        items.push_back(jobs::job_list_view(job));
      response.body =
          dump_json(Json{{"jobs", std::move(items)}, {"next_cursor", next}, {"limit", page}});
    }
    responder.send(std::move(response));
  });
}

}  // namespace kforge::frontends::http
