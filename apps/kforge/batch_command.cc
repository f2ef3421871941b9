#include "batch_command.h"

#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <future>
#include <iostream>
#include <optional>

#include "kforge/bench/kernelbench.h"
#include "kforge/common/files.h"
#include "kforge/common/log.h"
#include "kforge/frontends/mcp/rest_client.h"
#include "kforge/jobs/batch.h"
#include "kforge/jobs/job_view.h"
#include "kforge/model/batch.h"

namespace kforge::app {
namespace {

namespace fs = std::filesystem;

int fail(const std::string& message, int code) {
  std::cerr << "kforge batch: " << message << '\n';
  return code;
}

// "candidates[2].source_code" -> the file it came from.
std::string in_cli_terms(const Status& s, const std::vector<fs::path>& files,
                         const std::string& problem) {
  const std::string& field = s.field_path();
  if (field.rfind("candidates[", 0) == 0) {
    const size_t index = std::stoul(field.substr(11));
    if (index < files.size()) return files[index].string() + " (" + field + "): " + s.message();
  }
  if (field.rfind("ref_kernel", 0) == 0) return problem + " (" + field + "): " + s.message();
  return s.to_string();
}

// Every candidate's answer, by index, from an embedded engine.
StatusOr<Json> run_embedded(const BatchConfig& c, const Json& body, size_t count) {
  EngineFlags flags = c.engine;
  if (!c.device.empty() && flags.devices == "all") flags.devices = c.device;
  KF_ASSIGN_OR_RETURN(auto started, start_embedded_engine(flags, c.data_dir, "batch-data"));
  app::Engine engine = std::move(started.engine);
  KF_RETURN_IF_ERROR(engine.service->start());
  model::RequestLimits limits;
  limits.max_batch_candidates = std::max(limits.max_batch_candidates, count);
  auto request = model::parse_batch_request(body, limits);
  if (!request.is_ok()) {
    engine.service->stop();
    return request.status();
  }
  auto batch = jobs::submit_batch(*engine.service, nullptr, std::move(request).value(), "cli");
  if (!batch.is_ok()) {
    engine.service->stop();
    return batch.status();
  }
  const size_t total = batch->job_ids.size();
  // Shared: the engine thread that sets it may still be inside set_value when get() returns.
  auto all = std::make_shared<std::promise<Json>>();
  std::future<Json> done = all->get_future();
  auto on_job = [total](size_t index, const model::JobRecord& job, const Json&, size_t finished) {
    std::cerr << "[" << finished << "/" << total << "] candidate " << index << " (job " << job.id
              << "): " << model::to_string(job.state) << '\n';
  };
  auto watch = jobs::BatchWatch::start(*engine.service, *batch, on_job,
                                       [all](Json views) { all->set_value(std::move(views)); });
  Json results = done.get();
  engine.service->stop();
  Json ids = Json::array();
  for (const auto& id : batch->job_ids)
    ids.push_back(id);
  return Json{{"batch_id", batch->id}, {"jobs", ids}, {"results", results}};
}

StatusOr<Json> run_remote(const BatchConfig& c, const Json& body, size_t count) {
  // The answer comes when every candidate has finished: allow each its whole timeout.
  const auto wait =
      std::chrono::seconds(static_cast<int64_t>(c.timeout_s * 1.5) * static_cast<int64_t>(count)) +
      std::chrono::minutes(10);
  KF_ASSIGN_OR_RETURN(auto client, frontends::mcp::RestClient::create(
                                       {c.server, c.token, std::chrono::milliseconds(wait)}));
  return client.call_json("POST", "/batch", &body);
}

std::string one_line(const Json& view) {
  const Json exec = view.value("kernel_exec_result", Json::object());
  if (!exec.is_object() || exec.empty()) {
    return std::string("not judged: ") + view.value("error", std::string("no result"));
  }
  if (exec.value("correctness", false)) {
    std::string line = "correct";
    if (auto s = exec.find("speedup"); s != exec.end() && s->is_number()) {
      line += fmt::format(", speedup {:.3g}x", s->get<double>());
      const Json ci = exec.value("speedup_ci", Json());
      if (ci.is_array() && ci.size() == 2 && ci[0].is_number() && ci[1].is_number()) {
        line += fmt::format(" (95% {:.3g}-{:.3g}x", ci[0].get<double>(), ci[1].get<double>());
        const Json verdict = exec.value("speedup_verdict", Json());
        line += verdict.is_string() ? ", " + verdict.get<std::string>() + ")" : std::string(")");
      }
    }
    if (auto r = exec.find("runtime_median"); r != exec.end() && r->is_number()) {
      line += ", median " + std::to_string(r->get<double>()) + " ms";
    }
    return line;
  }
  std::string why;
  for (const char* key : {"compilation_error", "runtime_error", "validation_error"}) {
    if (auto it = exec.find(key); it != exec.end() && it->is_string() && !it->empty()) {
      why = it->get<std::string>();
      break;
    }
  }
  why = why.substr(0, why.find('\n'));
  if (why.size() > 160) why = why.substr(0, 160) + "...";
  return exec.value("error_kind", std::string("incorrect")) + (why.empty() ? "" : ": " + why);
}

}  // namespace

CLI::App* add_batch_command(CLI::App& app, BatchConfig& c) {
  CLI::App* cmd = app.add_subcommand(
      "batch",
      "Judge a directory of KernelBench candidates (ModelNew) against one problem (Model) as "
      "one batch: the same inputs for all, the reference's results computed once");
  cmd->add_option("--problem", c.problem,
                  "The problem: a KernelBench reference (Model, "
                  "get_inputs, get_init_inputs)")
      ->required();
  cmd->add_option("--candidates", c.candidates_dir,
                  "Directory of candidates: every *.py in it is one (sorted by name)")
      ->required();
  cmd->add_option("--kernel-type", c.kernel_type,
                  "kernel_type of the candidates (torch_cuda: a ModelNew, load_inline allowed)")
      ->capture_default_str();
  cmd->add_option("--device", c.device, "cpu, cuda:N or gpu (default: a GPU, else cpu)");
  cmd->add_option("--correct-trials", c.correct_trials, "Correctness trials per candidate")
      ->capture_default_str();
  cmd->add_option("--num-trials", c.num_trials, "Timed trials at most per kernel")
      ->capture_default_str();
  cmd->add_option("--timeout", c.timeout_s, "Timeout of each candidate's job (seconds)")
      ->capture_default_str();
  cmd->add_option("--out", c.out, "Write the answer as JSON to this file");
  cmd->add_option("--server", c.server,
                  "Run the batch on this kforge serve (http://host:port, POST /batch) instead "
                  "of an embedded engine")
      ->envname("KFORGE_SERVER");
  cmd->add_option("--token", c.token, "API token of the --server")->envname("KFORGE_TOKEN");
  cmd->add_option("--data-dir", c.data_dir,
                  "Jobs database of the embedded engine (default ~/.cache/kforge/batch-data)");
  add_engine_flags(*cmd, c.engine, "Devices of the embedded engine (default: --device, else all)");
  cmd->add_option("--log-level", c.log_level, "trace, debug, info, warning, error (to stderr)")
      ->capture_default_str();
  return cmd;
}

int run_batch(const BatchConfig& c) {
  if (Status s = log::init(c.log_level); !s) return fail(s.to_string(), 2);
  auto problem = read_file(c.problem);
  if (!problem.is_ok()) return fail("--problem: " + problem.status().message(), 2);
  if (auto at = bench::kernelbench::invalid_utf8_at(*problem)) {
    return fail("--problem: not UTF-8 text (byte " + std::to_string(*at) + ")", 2);
  }
  std::error_code ec;
  if (!fs::is_directory(c.candidates_dir, ec)) {
    return fail("--candidates: " + c.candidates_dir + " is not a directory", 2);
  }
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(c.candidates_dir, ec)) {
    if (entry.is_regular_file() && entry.path().extension() == ".py") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  if (files.empty()) return fail("--candidates: no *.py file in " + c.candidates_dir, 2);
  Json candidates = Json::array();
  for (const auto& f : files) {
    auto source = read_file(f);
    if (!source.is_ok()) return fail(f.string() + ": " + source.status().message(), 2);
    if (auto at = bench::kernelbench::invalid_utf8_at(*source)) {
      return fail(f.string() + ": not UTF-8 text (byte " + std::to_string(*at) + ")", 2);
    }
    candidates.push_back({{"source_code", *source}, {"kernel_type", c.kernel_type}});
  }
  Json body = {{"ref_kernel", {{"source_code", *problem}, {"kernel_type", "torch"}}},
               {"candidates", std::move(candidates)},
               {"num_correct_trials", c.correct_trials},
               {"num_trials", c.num_trials},
               {"timeout", c.timeout_s}};
  if (!c.device.empty()) body["device"] = c.device;
  auto answer =
      c.server.empty() ? run_embedded(c, body, files.size()) : run_remote(c, body, files.size());
  if (!answer.is_ok()) {
    const Status& s = answer.status();
    return fail(in_cli_terms(s, files, c.problem), s.code() == ErrorCode::kInvalidArgument ? 2 : 1);
  }
  const Json& results = (*answer)["results"];
  Json out = {{"batch_id", (*answer)["batch_id"]}, {"problem", c.problem}};
  out["candidates"] = Json::array();
  for (size_t i = 0; i < files.size() && i < results.size(); ++i) {
    std::cout << files[i].filename().string() << ": " << one_line(results[i]) << '\n';
    out["candidates"].push_back(
        {{"file", files[i].string()}, {"job_id", (*answer)["jobs"][i]}, {"result", results[i]}});
  }
  if (!c.out.empty()) {
    if (Status s =
            write_file_atomic(c.out, out.dump(2, ' ', false, Json::error_handler_t::replace));
        !s) {
      return fail("--out: " + s.message(), 1);
    }
  }
  return 0;
}

}  // namespace kforge::app
