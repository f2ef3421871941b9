#include "kforge/frontends/mcp/batch_tool.h"

#include <fmt/format.h>

#include <memory>
#include <mutex>

#include "kforge/common/log.h"
#include "kforge/jobs/batch.h"
#include "kforge/jobs/job_view.h"
#include "kforge/model/batch.h"

namespace kforge::frontends::mcp {
namespace {

constexpr const char* kToolName = "batch_compare";

struct BatchToolContext {
  jobs::JobService& service;
  http::BlockingExecutor blocking;
  model::RequestLimits limits;
};
using ContextPtr = std::shared_ptr<const BatchToolContext>;

int64_t unix_ms_now() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// The wait for every job of one call; the last job to finish answers.
class BatchCall {
 public:
  BatchCall(ContextPtr ctx, std::shared_ptr<ToolCall> call, jobs::BatchRecord batch)
      : ctx_(std::move(ctx)),
        call_(std::move(call)),
        batch_(std::move(batch)),
        results_(batch_.job_ids.size()) {}

  // Subscribes to every job; `self` keeps this alive in the callbacks.
  static void start(const std::shared_ptr<BatchCall>& self) {
    RequestContext& rc = self->call_->context();
    rc.on_cancel([self] {
      if (!self->end()) return;
      self->ctx_->blocking([self] {
        for (const auto& id : self->batch_.job_ids)
          (void)self->ctx_->service.cancel(id, "cancelled by the MCP client");
      });
    });
    for (size_t i = 0; i < self->batch_.job_ids.size(); ++i) {
      auto sub = self->ctx_->service.when_done(
          self->batch_.job_ids[i],
          [self, i](const jobs::JobRecord& done) { self->finished(i, done); });
      if (!sub.is_ok()) {
        jobs::JobRecord gone;
        gone.id = self->batch_.job_ids[i];
        gone.state = jobs::JobState::kFailed;
        gone.error = sub.status().message();
        self->finished(i, gone);
        continue;
      }
      std::lock_guard lock(self->mu_);
      if (self->ended_) {
        self->ctx_->service.unsubscribe(*sub);
      } else {
        self->subs_.push_back(*sub);
      }
    }
  }

 private:
  void finished(size_t index, const jobs::JobRecord& done) {
    Json body;
    {
      std::lock_guard lock(mu_);
      if (ended_ || !results_[index].is_null()) return;
      results_[index] = jobs::job_result_view(done);
      ++finished_;
      call_->context().report_progress(static_cast<double>(finished_),
                                       static_cast<double>(results_.size()),
                                       fmt::format("candidate {} (job {}) finished: {}", index,
                                                   done.id, jobs::to_string(done.state)));
      if (finished_ < results_.size()) return;
      Json ids = Json::array();
      for (const auto& id : batch_.job_ids)
        ids.push_back(id);
      body = {{"batch_id", batch_.id}, {"jobs", ids}, {"results", results_}};
    }
    if (!end()) return;
    size_t correct = 0;
    for (const Json& r : body["results"]) {
      const Json* exec =
          r.is_object() && r.contains("kernel_exec_result") ? &r["kernel_exec_result"] : nullptr;
      if (exec != nullptr && exec->value("correctness", false)) ++correct;
    }
    call_->finish(ToolResult::structured_value(
        std::move(body), fmt::format("batch {}: {} of {} candidate(s) correct", batch_.id, correct,
                                     batch_.job_ids.size())));
  }

  bool end() {
    std::vector<uint64_t> subs;
    {
      std::lock_guard lock(mu_);
      if (ended_) return false;
      ended_ = true;
      subs.swap(subs_);
    }
    for (uint64_t s : subs)
      ctx_->service.unsubscribe(s);
    return true;
  }

  const ContextPtr ctx_;
  const std::shared_ptr<ToolCall> call_;
  const jobs::BatchRecord batch_;
  std::mutex mu_;
  std::vector<Json> results_;   // guarded by mu_
  size_t finished_ = 0;         // guarded by mu_
  std::vector<uint64_t> subs_;  // guarded by mu_
  bool ended_ = false;          // guarded by mu_
};

void run_batch(const ContextPtr& ctx, const std::shared_ptr<ToolCall>& call) {
  auto request = model::parse_batch_request(call->arguments(), ctx->limits);
  if (!request.is_ok()) {
    call->finish(ToolResult::error(std::string("Invalid arguments for ") + kToolName + ": " +
                                   request.status().to_string()));
    return;
  }
  auto batch = jobs::submit_batch(ctx->service, nullptr, std::move(request).value(),
                                  call->context().session().client(), unix_ms_now());
  if (!batch.is_ok()) {
    call->finish(ToolResult::error(std::string(kToolName) +
                                   ": the batch was not accepted: " + batch.status().to_string()));
    return;
  }
  call->context().report_progress(
      0, static_cast<double>(batch->job_ids.size()),
      fmt::format("batch {}: {} candidate(s) queued", batch->id, batch->job_ids.size()));
  BatchCall::start(std::make_shared<BatchCall>(ctx, call, std::move(batch).value()));
}

// Null means "not given" at any depth (as for the other kernel tools); {"request": body} is the
// REST body.
void drop_nulls(Json& value) {
  if (value.is_object()) {
    for (auto it = value.begin(); it != value.end();) {
      if (it->is_null()) {
        it = value.erase(it);
      } else {
        drop_nulls(*it);
        ++it;
      }
    }
  } else if (value.is_array()) {
    for (Json& item : value)
      drop_nulls(item);
  }
}

Json normalize(Json arguments) {
  drop_nulls(arguments);
  if (arguments.is_object() && arguments.size() == 1 && arguments.contains("request") &&
      arguments["request"].is_object()) {
    return arguments["request"];
  }
  return arguments;
}

Json kernel_object_schema(const char* what) {
  return Json{
      {"type", "object"},
      {"description", what},
      {"properties",
       {{"source_code", {{"type", "string"}}},
        {"kernel_type",
         {{"type", "string"}, {"description", "torch, torch_cuda, triton, cuda or multi_kernel"}}},
        {"io", {{"type", "object"}}},
        {"metadata", {{"type", "object"}}}}}};
}

Json input_schema(const model::RequestLimits& limits) {
  Json candidates = {
      {"type", "array"},
      {"description", "The candidate kernels (each like ref_kernel), judged on the same inputs"},
      {"items", kernel_object_schema("A candidate kernel")},
      {"minItems", 1},
      {"maxItems", limits.max_batch_candidates}};
  return Json{
      {"type", "object"},
      {"properties",
       {{"ref_kernel",
         kernel_object_schema("The reference kernel (KernelCode: source_code, kernel_type, io)")},
        {"candidates", candidates},
        {"device", {{"type", "string"}, {"description", "cpu, cuda:N, gpu (default: a GPU)"}}},
        {"num_correct_trials", {{"type", "integer"}, {"minimum", 1}}},
        {"num_trials", {{"type", "integer"}, {"minimum", 1}}},
        {"timeout", {{"type", "number"}}},
        {"measure_performance", {{"type", "boolean"}}},
        {"atol", {{"type", "number"}, {"minimum", 0}}},
        {"rtol", {{"type", "number"}, {"minimum", 0}}},
        {"seed", {{"type", "integer"}, {"minimum", 0}}},
        {"num_warmup", {{"type", "integer"}, {"minimum", 0}}},
        {"enable_device_metrics", {{"type", "boolean"}}},
        {"timing", {{"type", "object"}}}}},
      {"required", {"ref_kernel", "candidates"}},
      {"additionalProperties", false}};
}

}  // namespace

Status add_batch_tool(ToolRegistry& tools, jobs::JobService& service,
                      http::BlockingExecutor blocking, model::RequestLimits limits) {
  auto ctx = std::make_shared<const BatchToolContext>(
      BatchToolContext{service, std::move(blocking), limits});
  ToolSpec spec;
  spec.name = kToolName;
  spec.title = "Compare many candidates with one reference";
  spec.description =
      "Judge N candidate kernels against one reference on the same seeded inputs (POST /batch): "
      "each candidate is a compare job of its own (its job id is in 'jobs'; get_job_status "
      "works for each), the reference's outputs and timing are computed once for the batch. "
      "Returns {batch_id, jobs, results}: one compare_kernels result per candidate, in order. "
      "Progress counts finished candidates. Arguments are the compare options plus ref_kernel "
      "and candidates (kernel objects: source_code, kernel_type, io).";
  spec.input_schema = input_schema(limits);
  spec.normalize_arguments = normalize;
  spec.annotations = Json{{"readOnlyHint", false},
                          {"destructiveHint", false},
                          {"idempotentHint", false},
                          {"openWorldHint", false}};
  spec.long_running = true;
  return tools.add(std::move(spec),
                   [ctx](std::shared_ptr<ToolCall> call) { run_batch(ctx, call); });
}

}  // namespace kforge::frontends::mcp
