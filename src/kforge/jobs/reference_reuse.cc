#include "kforge/jobs/reference_reuse.h"

#include <system_error>

#include "kforge/common/hash.h"
#include "kforge/common/log.h"
#include "kforge/model/serialize.h"

namespace kforge::jobs {
namespace {

bool is_sha256_hex(const std::string& s) {
  if (s.size() != 64) return false;
  for (char c : s) {
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

// What of a candidate's io decides the reference's inputs and outputs: its non-meta arguments
// (tensors and scalars, in order). Its launch configuration and Triton constexpr (meta)
// arguments only shape the candidate's own kernel, so candidates that differ only there (block
// sizes, warp counts: the usual batch) share one reference run.
Json reference_side_io(const model::KernelCode& kernel) {
  if (!kernel.io) return Json();
  Json args = Json::array();
  for (const model::ArgSpec& a : kernel.io->args) {
    if (a.is_meta) continue;
    args.push_back(model::to_json(a));
  }
  return args;
}

}  // namespace

std::string ReferenceReuse::key_of(const model::JobRequest& r, const std::string& device) {
  Json what = {{"reference", r.reference ? model::to_json(*r.reference) : Json()},
               {"candidate_io", reference_side_io(r.kernel)},
               {"seed", r.seed.value_or(0)},
               {"num_correct_trials", r.num_correct_trials},
               {"timing", model::to_json(r.timing)},
               {"measure_performance", r.measure_performance},
               {"device", device}};
  return sha256_hex(what.dump());
}

Json ReferenceReuse::spec_for(const model::JobRequest& r, const std::string& device) const {
  if (root_.empty() || !r.batch || !r.reference) return Json();
  const std::string key = key_of(r, device);
  Json digest;
  {
    MutexLock lock(mu_);
    if (auto b = batches_.find(r.batch->id); b != batches_.end()) {
      if (auto d = b->second.digests.find(key); d != b->second.digests.end()) digest = d->second;
    }
  }
  return {{"dir", (root_ / r.batch->id).string()}, {"key", key}, {"sha256", digest}};
}

void ReferenceReuse::job_ended(const model::JobRequest& r, const std::string& device,
                               const Json& result) {
  if (root_.empty() || !r.batch) return;
  std::string digest;
  if (result.is_object()) {
    if (auto it = result.find("reference_reuse"); it != result.end() && it->is_object()) {
      if (auto d = it->find("sha256"); d != it->end() && d->is_string()) digest = *d;
    }
  }
  bool last = false;
  {
    MutexLock lock(mu_);
    Batch& b = batches_[r.batch->id];
    if (is_sha256_hex(digest)) b.digests[key_of(r, device)] = digest;
    last = ++b.ended >= r.batch->size;
    if (last) batches_.erase(r.batch->id);
  }
  if (last) {
    std::error_code ec;
    std::filesystem::remove_all(root_ / r.batch->id, ec);
    if (ec) KF_LOG_WARN("batch={} reference files not removed: {}", r.batch->id, ec.message());
  }
}

void ReferenceReuse::clear() {
  if (root_.empty()) return;
  {
    MutexLock lock(mu_);
    batches_.clear();
  }
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(root_, ec)) {
    std::error_code rm;
    std::filesystem::remove_all(entry.path(), rm);
  }
}

}  // namespace kforge::jobs
