#include "kforge/bench/kernelbench_request.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <tuple>

#include "kforge/common/hash.h"
#include "kforge/common/thread_annotations.h"

namespace kforge::bench::kernelbench {
namespace {

// Options of the body that are not the compare's.
constexpr const char* kOwnFields[] = {"problems", "kernel_type", "fast_p"};

// "problems[2]" + "level" -> "problems[2].level"; at the top level, the key alone.
std::string field_of(const std::string& at, const char* key) {
  return at.empty() ? std::string(key) : at + "." + key;
}

StatusOr<int> positive_int(const Json& object, const char* key, const std::string& at) {
  auto it = object.find(key);
  if (it == object.end()) return invalid_argument("is required", field_of(at, key));
  if (!it->is_number_integer() || it->get<int64_t>() < 0 || it->get<int64_t>() > 100000) {
    return invalid_argument("must be an integer from 0 to 100000", field_of(at, key));
  }
  return static_cast<int>(it->get<int64_t>());
}

StatusOr<std::string> required_string(const Json& object, const char* key, const std::string& at) {
  auto it = object.find(key);
  if (it == object.end()) return invalid_argument("is required", field_of(at, key));
  if (!it->is_string()) return invalid_argument("must be a string", field_of(at, key));
  return it->get<std::string>();
}

// A /batch error in the client's terms: "candidates[3].x" -> "problems[p].samples[3].x".
Status in_request_terms(const Status& s, size_t problem) {
  const std::string& field = s.field_path();
  const std::string at = fmt::format("problems[{}]", problem);
  std::string renamed = field;
  if (field.rfind("candidates", 0) == 0) {
    renamed = at + ".samples" + field.substr(10);
  } else if (field.rfind("ref_kernel", 0) == 0) {
    renamed = at + ".ref_code";
  }
  return Status(s.code(), s.message(), renamed);
}

StatusOr<ProblemRequest> parse_problem(const Json& p, size_t index, const Json& options,
                                       const std::string& kernel_type,
                                       const model::RequestLimits& limits) {
  const std::string at = fmt::format("problems[{}]", index);
  if (!p.is_object()) return invalid_argument("must be an object", at);
  KF_ASSIGN_OR_RETURN(int level, positive_int(p, "level", at));
  KF_ASSIGN_OR_RETURN(int problem_id, positive_int(p, "problem_id", at));
  KF_ASSIGN_OR_RETURN(std::string ref, required_string(p, "ref_code", at));
  std::string name;
  if (p.contains("name")) {
    KF_ASSIGN_OR_RETURN(name, required_string(p, "name", at));
  }
  auto samples = p.find("samples");
  if (samples == p.end() || !samples->is_array() || samples->empty()) {
    return invalid_argument("must be a non-empty array of {sample_id, source_code}",
                            at + ".samples");
  }
  ProblemRequest out;
  Json body = options;
  body["ref_kernel"] = {{"source_code", ref}, {"kernel_type", "torch"}};
  body["candidates"] = Json::array();
  const std::string problem_sha = sha256_hex(ref);
  std::set<int> seen;
  for (size_t i = 0; i < samples->size(); ++i) {
    const Json& s = (*samples)[i];
    const std::string sat = fmt::format("{}.samples[{}]", at, i);
    if (!s.is_object()) return invalid_argument("must be an object", sat);
    KF_ASSIGN_OR_RETURN(int sample_id, positive_int(s, "sample_id", sat));
    KF_ASSIGN_OR_RETURN(std::string source, required_string(s, "source_code", sat));
    if (!seen.insert(sample_id).second) {
      return invalid_argument(fmt::format("sample {} appears twice", sample_id),
                              sat + ".sample_id");
    }
    const SampleKey key{level, problem_id, sample_id};
    out.samples.push_back(SampleContext{key, sample_file_name(key), name, sha256_hex(source),
                                        problem_sha, "request"});
    body["candidates"].push_back(
        {{"source_code", std::move(source)}, {"kernel_type", kernel_type}});
  }
  auto batch = model::parse_batch_request(body, limits);
  if (!batch.is_ok()) return in_request_terms(batch.status(), index);
  out.batch = std::move(batch).value();
  return out;
}

}  // namespace

StatusOr<KernelbenchRequest> parse_kernelbench_request(const Json& body,
                                                       const model::RequestLimits& limits) {
  if (!body.is_object()) return invalid_argument("the body must be a JSON object", "");
  auto problems = body.find("problems");
  if (problems == body.end() || !problems->is_array() || problems->empty()) {
    return invalid_argument("must be a non-empty array of problems", "problems");
  }
  if (problems->size() > kMaxProblems) {
    return invalid_argument(
        fmt::format("{} problems; at most {} per request", problems->size(), kMaxProblems),
        "problems");
  }
  std::string kernel_type = "torch_cuda";
  if (body.contains("kernel_type")) {
    KF_ASSIGN_OR_RETURN(kernel_type, required_string(body, "kernel_type", ""));
  }
  KernelbenchRequest out;
  std::set<double> ps = {0.0, 1.0, 2.0};
  if (auto f = body.find("fast_p"); f != body.end()) {
    if (!f->is_array()) return invalid_argument("must be an array of numbers ≥ 0", "fast_p");
    for (size_t i = 0; i < f->size(); ++i) {
      const Json& p = (*f)[i];
      if (!p.is_number() || !(p.get<double>() >= 0) || !std::isfinite(p.get<double>())) {
        return invalid_argument("must be a number ≥ 0", fmt::format("fast_p[{}]", i));
      }
      ps.insert(p.get<double>());
    }
  }
  out.fast_p.assign(ps.begin(), ps.end());
  Json options = body;
  for (const char* own : kOwnFields)
    options.erase(own);
  if (!options.contains("num_trials")) options["num_trials"] = 100;  // KernelBench's
  if (!options.contains("num_correct_trials")) options["num_correct_trials"] = 5;
  if (!options.contains("measure_performance")) options["measure_performance"] = true;
  if (!options.contains("atol")) options["atol"] = 1e-4;  // KernelBench's fp32 tolerance
  if (!options.contains("rtol")) options["rtol"] = 1e-4;
  std::set<std::tuple<int, int>> seen;
  for (size_t i = 0; i < problems->size(); ++i) {
    KF_ASSIGN_OR_RETURN(ProblemRequest p,
                        parse_problem((*problems)[i], i, options, kernel_type, limits));
    const SampleKey& key = p.samples.front().key;
    if (!seen.emplace(key.level, key.problem).second) {
      return invalid_argument(
          fmt::format("level {} problem {} appears twice", key.level, key.problem),
          fmt::format("problems[{}].problem_id", i));
    }
    out.problems.push_back(std::move(p));
  }
  return out;
}

Json kernelbench_answer(const std::vector<std::string>& batch_ids, std::vector<Json> records,
                        const std::vector<double>& fast_p) {
  auto key = [](const Json& r) {
    return std::tuple(r.value("level", 0), r.value("problem_id", 0), r.value("sample_id", 0));
  };
  std::sort(records.begin(), records.end(),
            [&key](const Json& a, const Json& b) { return key(a) < key(b); });
  Json summary = summarize(records, fast_p);
  return Json{
      {"batches", batch_ids}, {"samples", std::move(records)}, {"summary", std::move(summary)}};
}

StatusOr<std::shared_ptr<KernelbenchRun>> KernelbenchRun::start(
    jobs::JobService& service, jobs::BatchBook* book, KernelbenchRequest request,
    const jobs::Caller& caller, OnSample on_sample, OnDone on_done) {
  size_t total = 0;
  for (const auto& p : request.problems)
    total += p.samples.size();
  auto run = std::make_shared<KernelbenchRun>(service, total, request.fast_p, std::move(on_sample),
                                              std::move(on_done));
  for (size_t i = 0; i < request.problems.size(); ++i) {
    ProblemRequest& problem = request.problems[i];
    auto batch = jobs::submit_batch(service, book, std::move(problem.batch), caller);
    if (!batch.is_ok()) {
      run->end("another problem of the request was refused");
      const Status& s = batch.status();
      return Status(s.code(),
                    fmt::format("problem {} (level {} problem {}) was refused: {}", i,
                                problem.samples.front().key.level,
                                problem.samples.front().key.problem, s.message()),
                    fmt::format("problems[{}]", i));
    }
    {
      MutexLock lock(run->mu_);
      run->batches_.push_back(*batch);
    }
    auto on_job = [run, samples = problem.samples](size_t index, const model::JobRecord& job,
                                                   const Json& view, size_t) {
      if (index < samples.size()) run->finished(samples[index], job.id, view);
    };
    auto watch = jobs::BatchWatch::start(service, *batch, std::move(on_job), [](const Json&) {});
    MutexLock lock(run->mu_);
    // The watch's callback holds the run: the run holds the watch only while it is running.
    if (!run->ended_) run->watches_.push_back(std::move(watch));
  }
  return run;
}

void KernelbenchRun::finished(const SampleContext& sample, const std::string& job_id,
                              const Json& view) {
  Json record = judged_record(sample, job_id, view);
  std::vector<std::string> ids;
  std::vector<Json> all;
  std::vector<std::shared_ptr<jobs::BatchWatch>> watches;  // dropped after the lock
  size_t finished = 0;
  {
    MutexLock lock(mu_);
    if (ended_) return;
    records_.push_back(record);
    finished = records_.size();
    if (finished == total_) {
      ended_ = true;
      all = std::move(records_);
      watches = std::move(watches_);
      for (const auto& b : batches_)
        ids.push_back(b.id);
    }
  }
  if (on_sample_) on_sample_(record, finished, total_);
  if (finished == total_) on_done_(kernelbench_answer(ids, std::move(all), fast_p_));
}

bool KernelbenchRun::end(const std::string& reason) {
  std::vector<jobs::BatchRecord> batches;
  std::vector<std::shared_ptr<jobs::BatchWatch>> watches;
  {
    MutexLock lock(mu_);
    if (ended_) return false;
    ended_ = true;
    batches = batches_;
    watches = std::move(watches_);
  }
  for (auto& w : watches)
    if (w) w->end();
  for (const auto& b : batches)
    for (const auto& id : b.job_ids)
      service_.cancel(id, reason).ignore();
  return true;
}

}  // namespace kforge::bench::kernelbench
