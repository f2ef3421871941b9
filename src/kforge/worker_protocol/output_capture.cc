#include "kforge/worker_protocol/output_capture.h"

namespace kforge::worker_protocol {

void OutputCapture::append(std::string_view bytes) {
  total_ += bytes.size();
  size_t head_cap = cap_ / 2;
  if (head_.size() < head_cap) {
    size_t take = std::min(head_cap - head_.size(), bytes.size());
    head_.append(bytes.substr(0, take));
    bytes.remove_prefix(take);
  }
  if (bytes.empty()) return;
  size_t tail_cap = cap_ - head_cap;
  if (bytes.size() >= tail_cap) {
    tail_.assign(bytes.substr(bytes.size() - tail_cap));
    return;
  }
  tail_.append(bytes);
  if (tail_.size() > 2 * tail_cap) tail_.erase(0, tail_.size() - tail_cap);
}

std::string OutputCapture::text() const {
  size_t tail_cap = cap_ - cap_ / 2;
  // Room for the marker, so what a result carries stays within the cap (jobs/result_caps.h).
  if (truncated() && cap_ >= 4 * kOutputCaptureMarkerBytes) tail_cap -= kOutputCaptureMarkerBytes;
  std::string_view tail(tail_);
  if (tail.size() > tail_cap) tail.remove_prefix(tail.size() - tail_cap);
  uint64_t kept = head_.size() + tail.size();
  std::string out = head_;
  if (total_ > kept) {
    out += "\n[... " + std::to_string(total_ - kept) + " bytes omitted ...]\n";
  }
  out.append(tail);
  return out;
}

}  // namespace kforge::worker_protocol
