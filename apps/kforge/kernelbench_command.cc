#include "kernelbench_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <set>
#include <sstream>

#include "kernelbench_driver.h"
#include "kforge/bench/kernelbench.h"
#include "kforge/common/files.h"
#include "kforge/common/hash.h"
#include "kforge/common/log.h"
#include "kforge/frontends/mcp/remote_job_service.h"
#include "kforge/frontends/mcp/rest_client.h"
#include "kforge/model/batch.h"

namespace kforge::app {
namespace {

namespace fs = std::filesystem;
namespace kb = bench::kernelbench;

constexpr size_t kMaxBatch = 64;  // POST /batch's default candidate limit
constexpr const char* kSamplesFile = "kernelbench_samples.jsonl";
constexpr const char* kSummaryFile = "kernelbench_summary.json";

int fail(const std::string& message, int code) {
  std::cerr << "kforge kernelbench: " << message << '\n';
  return code;
}

int option_error(const Status& s) {
  const std::string& field = s.field_path();
  std::string flag = field;
  std::replace(flag.begin(), flag.end(), '_', '-');
  return fail((field.empty() ? "" : "--" + flag + ": ") + s.message(), 2);
}

struct Problem {
  int level = 0;
  int id = 0;
  fs::path path;
  std::string source;
  std::string sha256;
};

// The folder holding level<L>/: the checkout's KernelBench/ or the path itself.
StatusOr<fs::path> dataset_root(const std::string& kb) {
  std::error_code ec;
  if (fs::is_directory(fs::path(kb) / "KernelBench", ec)) return fs::path(kb) / "KernelBench";
  if (fs::is_directory(kb, ec)) return fs::path(kb);
  return invalid_argument(kb + " is not a directory (a KernelBench checkout, or its KernelBench/)",
                          "kb");
}

// The problems in scope, by (level, id); errors name --level, --problems or --kb.
StatusOr<std::map<std::pair<int, int>, Problem>> find_problems(const fs::path& root,
                                                               const std::vector<int>& levels,
                                                               const std::vector<int>& wanted) {
  std::map<std::pair<int, int>, Problem> out;
  for (int level : levels) {
    const fs::path dir = root / ("level" + std::to_string(level));
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) {
      return invalid_argument("no folder " + dir.string() + " for level " + std::to_string(level),
                              "level");
    }
    std::map<int, fs::path> found;
    for (const auto& entry : fs::directory_iterator(dir, ec)) {
      auto id = kb::parse_problem_file_name(entry.path().filename().string());
      if (id && entry.is_regular_file() && !found.contains(*id)) found[*id] = entry.path();
    }
    std::vector<int> ids = wanted;
    if (ids.empty()) {
      for (const auto& [id, path] : found)
        ids.push_back(id);
    }
    for (int id : ids) {
      auto it = found.find(id);
      if (it == found.end()) {
        return invalid_argument(
            fmt::format("level {} has no problem {} (no {}/{}_*.py)", level, id, dir.string(), id),
            "problems");
      }
      KF_ASSIGN_OR_RETURN(std::string source, read_file(it->second));
      if (auto at = kb::invalid_utf8_at(source)) {
        return invalid_argument(
            fmt::format("{} is not UTF-8 text (byte {})", it->second.string(), *at), "kb");
      }
      out[{level, id}] = Problem{level, id, it->second, source, sha256_hex(source)};
    }
  }
  return out;
}

std::string key_of(int level, int problem, int sample) {
  return fmt::format("{}/{}/{}", level, problem, sample);
}
std::string key_of(const Json& r) {
  return key_of(r.value("level", 0), r.value("problem_id", 0), r.value("sample_id", 0));
}

// The last record of each sample in a previous run's JSONL; unreadable lines are skipped.
std::map<std::string, Json> previous_records(const fs::path& file) {
  std::map<std::string, Json> out;
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    auto record = parse_json(line);
    if (!record.is_ok() || !record->is_object()) continue;
    const std::string key = key_of(*record);  // before the move: `=` evaluates its right side first
    out[key] = std::move(record).value();
  }
  return out;
}

struct Plan {
  std::vector<ProblemBatch> batches;
  std::vector<Json> settled;  // records not judged now: reused, missing, unreadable
  size_t reused = 0;
  std::vector<std::string> ignored;  // *.py files of the run whose names are not the layout's
};

Plan make_plan(const KernelbenchConfig& c, const std::map<std::pair<int, int>, Problem>& problems,
               const std::map<std::string, Json>& previous, const std::string& settings,
               const Json& body) {
  Plan plan;
  std::map<std::pair<int, int>, std::set<int>> found;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(c.run_dir, ec)) {
    const std::string name = entry.path().filename().string();
    auto key = kb::parse_sample_file_name(name);
    if (!key) {
      if (entry.path().extension() == ".py") plan.ignored.push_back(name);
      continue;
    }
    if (c.samples && key->sample >= *c.samples) continue;
    found[{key->level, key->problem}].insert(key->sample);
  }
  std::sort(plan.ignored.begin(), plan.ignored.end());
  // Without --problems every problem of a level is in scope: a sample of a problem the
  // checkout does not have is a result saying so.
  for (const auto& [where, ids] : found) {
    const int level = where.first;  // a copy: clang's lambdas do not capture bindings
    const bool level_chosen = std::any_of(problems.begin(), problems.end(), [level](const auto& p) {
      return p.first.first == level;
    });
    if (!c.problems.empty() || !level_chosen || problems.contains(where)) continue;
    for (int s : ids) {
      const kb::SampleKey key{where.first, where.second, s};
      kb::SampleContext ctx{key, kb::sample_file_name(key), "", "", "", settings};
      plan.settled.push_back(
          kb::unjudged_record(ctx, "no_problem",
                              fmt::format("the KernelBench checkout has no problem {} in level {}",
                                          where.second, where.first)));
    }
  }
  for (const auto& [where, problem] : problems) {
    std::set<int> samples = found[where];
    if (c.samples) {
      for (int s = 0; s < *c.samples; ++s)
        samples.insert(s);
    } else {
      samples.insert(0);  // a problem without any sample is a failed sample 0, as in KernelBench
    }
    ProblemBatch batch;
    batch.body = body;
    batch.body["ref_kernel"] = {{"source_code", problem.source}, {"kernel_type", "torch"}};
    batch.kernel_type = c.kernel_type;
    for (int s : samples) {
      kb::SampleContext ctx{{where.first, where.second, s},
                            kb::sample_file_name({where.first, where.second, s}),
                            problem.path.filename().string(),
                            "",
                            problem.sha256,
                            settings};
      const fs::path file = fs::path(c.run_dir) / ctx.file;
      if (!fs::exists(file, ec)) {
        plan.settled.push_back(
            kb::unjudged_record(ctx, "missing", "no file " + ctx.file + " in the run directory"));
        continue;
      }
      auto source = read_file(file);
      if (!source.is_ok()) {
        plan.settled.push_back(kb::unjudged_record(ctx, "unreadable", source.status().message()));
        continue;
      }
      ctx.source_sha256 = sha256_hex(*source);
      if (source->find_first_not_of(" \t\r\n") == std::string::npos) {
        plan.settled.push_back(kb::unjudged_record(ctx, "unreadable", "the file is empty"));
        continue;
      }
      if (auto at = kb::invalid_utf8_at(*source)) {
        plan.settled.push_back(kb::unjudged_record(
            ctx, "unreadable", fmt::format("the file is not UTF-8 text (byte {})", *at)));
        continue;
      }
      if (auto it = previous.find(key_of(where.first, where.second, s));
          it != previous.end() && kb::is_reusable(it->second, ctx)) {
        plan.settled.push_back(it->second);
        ++plan.reused;
        continue;
      }
      batch.samples.push_back(std::move(ctx));
      batch.sources.push_back(std::move(source).value());
      if (batch.samples.size() == kMaxBatch) {
        ProblemBatch full = batch;
        plan.batches.push_back(std::move(full));
        batch.samples.clear();
        batch.sources.clear();
      }
    }
    if (!batch.samples.empty()) plan.batches.push_back(std::move(batch));
  }
  return plan;
}

// Appends records to the JSONL as they come, so an interrupted run keeps what finished.
class RecordLog {
 public:
  explicit RecordLog(const fs::path& path) : out_(path, std::ios::app) {}
  bool ok() const { return out_.good(); }
  void append(const Json& record) {
    out_ << record.dump(-1, ' ', false, Json::error_handler_t::replace) << '\n';
    out_.flush();
  }

 private:
  std::ofstream out_;
};

// The baselines cache: {"version": 1, "baselines": {"<hardware>|<problem sha256>": entry}}.
// An entry is kept once measured (the reference's times on that device for that source).
class BaselineCache {
 public:
  explicit BaselineCache(fs::path path) : path_(std::move(path)) {
    auto text = read_file(path_);
    if (!text.is_ok()) return;
    auto json = parse_json(*text);
    if (json.is_ok() && json->is_object() && (*json)["baselines"].is_object()) {
      entries_ = (*json)["baselines"];
    }
  }
  static std::string key(const Json& record) {
    const Json hw = record.value("hardware", Json());
    return (hw.is_string() ? hw.get<std::string>() : std::string("unknown")) + "|" +
           record.value("problem_sha256", std::string());
  }
  void add(const Json& record, bool replace) {
    Json entry = kb::baseline_entry(record);
    if (entry.is_null() || (!replace && entries_.contains(key(record)))) return;
    entry["level"] = record.value("level", 0);
    entry["problem"] = record.value("problem", std::string());
    entry["measured_at"] = std::chrono::duration_cast<std::chrono::seconds>(
                               std::chrono::system_clock::now().time_since_epoch())
                               .count();
    entries_[key(record)] = std::move(entry);
    changed_ = true;
  }
  const Json* find(const std::string& key) const {
    auto it = entries_.find(key);
    return it == entries_.end() ? nullptr : &*it;
  }
  Status save() const {
    if (!changed_) return Status();
    KF_RETURN_IF_ERROR(make_dirs(path_.parent_path()));
    return write_file_atomic(path_, Json{{"version", 1}, {"baselines", entries_}}.dump(2));
  }

 private:
  fs::path path_;
  Json entries_ = Json::object();
  bool changed_ = false;
};

// generate_baseline_time.py's JSON for the problems of this run on its hardware.
Json export_baselines(const BaselineCache& cache, const std::vector<Json>& records,
                      size_t& missing) {
  Json out = Json::object();
  std::set<std::string> done;
  for (const Json& r : records) {
    if (!r.value("hardware", Json()).is_string()) continue;
    const std::string key = BaselineCache::key(r);
    if (!done.insert(key).second) continue;
    if (const Json* entry = cache.find(key)) {
      Json e = *entry;
      for (const char* drop : {"level", "problem", "measured_at"})
        e.erase(drop);
      out["level" + std::to_string(r.value("level", 0))][r.value("problem", std::string())] = e;
    }
  }
  std::set<std::string> problems, exported;
  for (const Json& r : records)
    problems.insert(fmt::format("{}/{}", r.value("level", 0), r.value("problem", std::string())));
  for (const auto& [level, entries] : out.items()) {
    for (const auto& [name, e] : entries.items())
      exported.insert(level.substr(5) + "/" + name);
  }
  missing = problems.size() - exported.size();
  return out;
}

Status write_json(const fs::path& path, const Json& value) {
  KF_RETURN_IF_ERROR(make_dirs(path.parent_path()));
  return write_file_atomic(path, value.dump(4, ' ', false, Json::error_handler_t::replace) + "\n");
}

Status write_outputs(const KernelbenchConfig& c, const std::vector<int>& levels,
                     std::vector<Json>& records, const Json& summary) {
  const fs::path out = c.out.empty() ? fs::path(c.run_dir) : fs::path(c.out);
  std::sort(records.begin(), records.end(), [](const Json& a, const Json& b) {
    auto k = [](const Json& r) {
      return std::tuple(r.value("level", 0), r.value("problem_id", 0), r.value("sample_id", 0));
    };
    return k(a) < k(b);
  });
  std::string lines;
  for (const Json& r : records)
    lines += r.dump(-1, ' ', false, Json::error_handler_t::replace) + "\n";
  KF_RETURN_IF_ERROR(write_file_atomic(out / kSamplesFile, lines));
  for (int level : levels) {
    const fs::path file = levels.size() == 1
                              ? out / "eval_results.json"
                              : out / ("level_" + std::to_string(level)) / "eval_results.json";
    KF_RETURN_IF_ERROR(write_json(file, kb::eval_results(records, level)));
  }
  return write_json(out / kSummaryFile, summary);
}

// The jobs' service (an embedded engine, or a server's REST API) and how a batch is submitted.
struct Backend {
  std::optional<app::Engine> engine;
  std::unique_ptr<jobs::JobService> remote;
  std::optional<frontends::mcp::RestClient> client;
  jobs::JobService* service = nullptr;
  SubmitBatch submit;

  ~Backend() {
    if (engine) engine->service->stop();
  }
};

StatusOr<std::unique_ptr<Backend>> start_backend(const KernelbenchConfig& c) {
  auto b = std::make_unique<Backend>();
  if (!c.server.empty()) {
    KF_ASSIGN_OR_RETURN(auto client, frontends::mcp::RestClient::create(
                                         {c.server, c.token, std::chrono::seconds(120)}));
    b->client = client;
    b->remote = std::make_unique<frontends::mcp::RemoteJobService>(std::move(client));
    b->service = b->remote.get();
    const frontends::mcp::RestClient* rest = &*b->client;
    b->submit = [rest](const Json& body) -> StatusOr<jobs::BatchRecord> {
      KF_ASSIGN_OR_RETURN(Json answer, rest->call_json("POST", "/batch?wait=false", &body));
      jobs::BatchRecord record;
      record.id = answer.value("batch_id", std::string());
      for (const Json& id : answer.value("jobs", Json::array())) {
        if (id.is_string()) record.job_ids.push_back(id.get<std::string>());
      }
      if (record.job_ids.size() != body["candidates"].size()) {
        return internal_error("POST /batch answered " + std::to_string(record.job_ids.size()) +
                              " job ids for " + std::to_string(body["candidates"].size()) +
                              " candidates");
      }
      return record;
    };
    return b;
  }
  EngineFlags flags = c.engine;
  if (!c.device.empty() && flags.devices == "all") flags.devices = c.device;
  KF_ASSIGN_OR_RETURN(auto started, start_embedded_engine(flags, c.data_dir, "kernelbench-data"));
  b->engine = std::move(started.engine);
  KF_RETURN_IF_ERROR(b->engine->service->start());
  b->service = b->engine->service.get();
  jobs::JobService* service = b->service;
  b->submit = [service](const Json& body) -> StatusOr<jobs::BatchRecord> {
    model::RequestLimits limits;
    limits.max_batch_candidates = kMaxBatch;
    KF_ASSIGN_OR_RETURN(auto request, model::parse_batch_request(body, limits));
    return jobs::submit_batch(*service, nullptr, std::move(request), "cli");
  };
  return b;
}

}  // namespace

CLI::App* add_kernelbench_command(CLI::App& app, KernelbenchConfig& c) {
  CLI::App* cmd = app.add_subcommand(
      "kernelbench",
      "Evaluate a KernelBench generation run (runs/<run>/level_<L>_problem_<P>_sample_<S>_"
      "kernel.py) with KernelBench's settings: per-sample JSONL, its eval_results.json, fast_p "
      "and a baselines cache; resumable");
  cmd->add_option("--kb", c.kb,
                  "A KernelBench checkout (or its KernelBench/ folder): the problems, "
                  "KernelBench/level<L>/<P>_<Name>.py")
      ->required();
  cmd->add_option("--level", c.levels, "Levels to evaluate, e.g. 1 or 1,2")->capture_default_str();
  cmd->add_option("--run", c.run_dir, "The run directory holding the generated kernel files")
      ->required();
  cmd->add_option("--problems", c.problems,
                  "Problem ids, e.g. 1-20 or 3,5,7-9 (default: every problem of each level)");
  cmd->add_option("--samples", c.samples,
                  "Samples per problem: ids 0..N-1 are expected, a missing one is a failed "
                  "sample (default: the files found, and sample 0)")
      ->check(CLI::Range(1, 10000));
  cmd->add_option("--device", c.device, "cpu, cuda:N or gpu (default: a GPU, else cpu)");
  cmd->add_option("--kernel-type", c.kernel_type,
                  "kernel_type of the samples (torch_cuda: a ModelNew in any Python: torch, "
                  "load_inline, Triton kernels launched from forward)")
      ->capture_default_str();
  // The bounds are a request's (model::RequestLimits): checked here, named by their flag.
  const model::RequestLimits limits;
  cmd->add_option("--correct-trials", c.correct_trials, "Correctness trials per sample")
      ->check(CLI::Range(1, limits.max_correct_trials))
      ->capture_default_str();
  cmd->add_option("--atol", c.atol, "Absolute tolerance of the comparison (KernelBench's fp32)")
      ->capture_default_str();
  cmd->add_option("--rtol", c.rtol, "Relative tolerance of the comparison (KernelBench's fp32)")
      ->capture_default_str();
  cmd->add_option("--num-trials", c.num_trials, "Timed trials at most per kernel")
      ->check(CLI::Range(1, limits.max_trials))
      ->capture_default_str();
  cmd->add_option("--timeout", c.timeout_s, "Timeout of each sample's job (seconds)")
      ->check(CLI::Range(limits.min_timeout_s, limits.max_timeout_s))
      ->capture_default_str();
  cmd->add_option("--in-flight", c.in_flight, "Problems whose batches run at once")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  cmd->add_option("--fast-p", c.fast_p,
                  "More speedup thresholds p for fast_p, e.g. 0.5,1.5 (0, 1 and 2 are always "
                  "reported)");
  cmd->add_option("--out", c.out,
                  "Directory for the JSONL, eval_results.json and the summary (default: --run)");
  cmd->add_option("--baselines", c.baselines,
                  "The baselines cache: the reference's times per device and problem source "
                  "(default ~/.cache/kforge/kernelbench-baselines.json)");
  cmd->add_option("--baseline-json", c.baseline_json,
                  "Write this run's baselines as KernelBench's baseline JSON "
                  "(results/timing/<hardware>/baseline_time_torch.json's shape) to this file");
  cmd->add_flag("--rerun", c.rerun, "Judge every sample again (ignore earlier results)");
  cmd->add_flag("--quiet", c.quiet, "No progress output");
  cmd->add_option("--server", c.server,
                  "Run the batches on this kforge serve (http://host:port, POST /batch) instead "
                  "of an embedded engine")
      ->envname("KFORGE_SERVER");
  cmd->add_option("--token", c.token, "API token of the --server")->envname("KFORGE_TOKEN");
  cmd->add_option(
      "--data-dir", c.data_dir,
      "Jobs database of the embedded engine (default ~/.cache/kforge/kernelbench-data)");
  add_engine_flags(*cmd, c.engine, "Devices of the embedded engine (default: --device, else all)");
  cmd->add_option("--log-level", c.log_level, "trace, debug, info, warning, error (to stderr)")
      ->capture_default_str();
  return cmd;
}

int run_kernelbench(const KernelbenchConfig& c) {
  if (Status s = log::init(c.log_level); !s) return fail(s.to_string(), 2);
  auto levels = kb::parse_id_list(c.levels, "level");
  if (!levels.is_ok()) return option_error(levels.status());
  std::vector<int> wanted;
  if (!c.problems.empty()) {
    auto ids = kb::parse_id_list(c.problems, "problems");
    if (!ids.is_ok()) return option_error(ids.status());
    wanted = *ids;
  }
  auto extra_p = c.fast_p.empty() ? StatusOr<std::vector<double>>(std::vector<double>())
                                  : kb::parse_fast_p_list(c.fast_p, "fast_p");
  if (!extra_p.is_ok()) return option_error(extra_p.status());
  std::set<double> p_set(extra_p->begin(), extra_p->end());
  p_set.insert({0.0, 1.0, 2.0});
  const std::vector<double> fast_p(p_set.begin(), p_set.end());
  std::error_code ec;
  if (!fs::is_directory(c.run_dir, ec)) {
    return fail("--run: " + c.run_dir + " is not a directory", 2);
  }
  auto root = dataset_root(c.kb);
  if (!root.is_ok()) return option_error(root.status());
  auto problems = find_problems(*root, *levels, wanted);
  if (!problems.is_ok()) return option_error(problems.status());

  const fs::path out = c.out.empty() ? fs::path(c.run_dir) : fs::path(c.out);
  if (Status s = make_dirs(out); !s) return fail("--out: " + s.message(), 2);
  const std::string settings = fmt::format(
      "device={};server={};kernel_type={};correct_trials={};num_trials={};atol={:g};"
      "rtol={:g}",
      c.device.empty() ? "default" : c.device, c.server, c.kernel_type, c.correct_trials,
      c.num_trials, c.atol, c.rtol);
  Json body = {{"num_correct_trials", c.correct_trials},
               {"num_trials", c.num_trials},
               {"timeout", c.timeout_s},
               {"atol", c.atol},
               {"rtol", c.rtol},
               {"measure_performance", true}};
  if (!c.device.empty()) body["device"] = c.device;
  const auto previous =
      c.rerun ? std::map<std::string, Json>() : previous_records(out / kSamplesFile);
  Plan plan = make_plan(c, *problems, previous, settings, body);
  size_t to_judge = 0;
  for (const auto& b : plan.batches)
    to_judge += b.samples.size();
  if (!c.quiet) {
    std::cerr << fmt::format(
        "kforge kernelbench: {} problem(s), {} sample(s) to judge in {} batch(es), {} reused "
        "from an earlier run, {} missing or unreadable\n",
        problems->size(), to_judge, plan.batches.size(), plan.reused,
        plan.settled.size() - plan.reused);
    if (!plan.ignored.empty()) {
      std::cerr << "kforge kernelbench: ignored " << plan.ignored.size()
                << " *.py file(s) whose names are not level_<L>_problem_<P>_sample_<S>_"
                   "kernel.py, e.g. "
                << plan.ignored.front() << '\n';
    }
  }

  const sigset_t signals = block_termination_signals();
  std::vector<Json> records = plan.settled;
  bool interrupted = false;
  if (!plan.batches.empty()) {
    auto backend = start_backend(c);
    if (!backend.is_ok()) {
      return fail("cannot start: " + backend.status().to_string(),
                  backend.status().code() == ErrorCode::kInvalidArgument ? 2 : 1);
    }
    RecordLog log(out / kSamplesFile);
    if (!log.ok()) return fail("--out: cannot append to " + (out / kSamplesFile).string(), 1);
    DriveOptions options;
    options.in_flight = static_cast<size_t>(c.in_flight);
    options.quiet = c.quiet;
    DriveOutcome outcome =
        drive_batches(*(*backend)->service, (*backend)->submit, std::move(plan.batches), options,
                      signals, [&log](const Json& r) { log.append(r); });
    interrupted = outcome.interrupted;
    for (Json& r : outcome.records)
      records.push_back(std::move(r));
  }

  BaselineCache cache(c.baselines.empty() ? default_data_root() / "kernelbench-baselines.json"
                                          : fs::path(c.baselines));
  for (const Json& r : records)
    cache.add(r, c.rerun);
  if (Status s = cache.save(); !s)
    std::cerr << "kforge kernelbench: --baselines: " << s.message() << '\n';
  const Json summary = kb::summarize(records, fast_p);
  if (Status s = write_outputs(c, *levels, records, summary); !s) {
    return fail("--out: " + s.message(), 1);
  }
  if (!c.baseline_json.empty()) {
    size_t missing = 0;
    const Json baselines = export_baselines(cache, records, missing);
    if (Status s = write_json(c.baseline_json, baselines); !s) {
      return fail("--baseline-json: " + s.message(), 1);
    }
    if (missing > 0 && !c.quiet) {
      std::cerr << "kforge kernelbench: --baseline-json: no baseline for " << missing
                << " problem(s): none of their samples got the reference timed\n";
    }
  }
  std::cout << kb::render_summary(summary);
  if (!c.quiet) std::cerr << "kforge kernelbench: results in " << out.string() << "/\n";
  return interrupted ? 130 : 0;
}

}  // namespace kforge::app
