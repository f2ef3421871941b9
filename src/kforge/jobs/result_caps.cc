#include "kforge/jobs/result_caps.h"

#include <algorithm>
#include <vector>

namespace kforge::jobs {
namespace {

// What a result keeps in step 3: the verdict the old server's clients read.
constexpr const char* kVerdict[] = {
    "compiled",         "correctness",       "runtime",    "error_kind", "compilation_error",
    "validation_error", "runtime_error",     "speedup",    "speedup_ci", "speedup_verdict",
    "runtime_stats",    "ref_runtime_stats", "ref_runtime"};
// Never dropped in step 2 (kVerdict plus the small fields every result has).
constexpr const char* kKept[] = {"metadata", "warnings",        "checks", "correctness_details",
                                 "honesty",  "result_truncated"};

bool in(std::string_view key, const auto& list) {
  return std::find(std::begin(list), std::end(list), key) != std::end(list);
}

bool is_continuation(unsigned char c) {
  return (c & 0xC0) == 0x80;
}

size_t compact_size(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace).size();
}

bool cap_strings(Json& value, size_t max_bytes) {
  bool cut = false;
  if (value.is_string()) {
    const std::string& s = value.get_ref<const std::string&>();
    if (s.size() > max_bytes) {
      value = cap_text(s, max_bytes);
      cut = true;
    }
  } else if (value.is_array() || value.is_object()) {
    for (Json& member : value)
      cut = cap_strings(member, max_bytes) || cut;
  }
  return cut;
}

// The members step 2 may drop, with their sizes: top-level members outside kVerdict and
// kKept, and metadata's own members other than the old server's (gpu_id, gpu_type,
// cuda_version, kernel_name, kernel_type, device).
struct Droppable {
  bool in_metadata;
  std::string key;
  size_t bytes;
};

std::vector<Droppable> droppable(const Json& result) {
  std::vector<Droppable> out;
  for (const auto& [key, value] : result.items()) {
    if (in(key, kVerdict) || in(key, kKept)) continue;
    out.push_back({false, key, compact_size(value)});
  }
  if (auto meta = result.find("metadata"); meta != result.end() && meta->is_object()) {
    constexpr const char* kOldMetadata[] = {"gpu_id",      "gpu_type",    "cuda_version",
                                            "kernel_name", "kernel_type", "device"};
    for (const auto& [key, value] : meta->items()) {
      if (!in(key, kOldMetadata)) out.push_back({true, key, compact_size(value)});
    }
  }
  std::sort(out.begin(), out.end(),
            [](const Droppable& a, const Droppable& b) { return a.bytes > b.bytes; });
  return out;
}

}  // namespace

std::string cap_text(std::string_view text, size_t max_bytes) {
  if (text.size() <= max_bytes) return std::string(text);
  // The marker counts what is cut, which depends on the marker's own length: a marker for
  // the largest possible count is long enough.
  auto marker = [&text](size_t cut) {
    return "\n[... kforge cut " + std::to_string(cut) + " of " + std::to_string(text.size()) +
           " bytes here ...]\n";
  };
  const size_t room = marker(text.size()).size();
  if (max_bytes <= room) {
    size_t head = max_bytes;
    while (head > 0 && head < text.size() &&
           is_continuation(static_cast<unsigned char>(text[head])))
      --head;
    return std::string(text.substr(0, head));
  }
  const size_t keep = max_bytes - room;
  size_t head = keep / 2;
  while (head > 0 && is_continuation(static_cast<unsigned char>(text[head])))
    --head;
  size_t tail_from = text.size() - (keep - keep / 2);
  while (tail_from < text.size() && is_continuation(static_cast<unsigned char>(text[tail_from])))
    ++tail_from;
  return std::string(text.substr(0, head)) + marker(tail_from - head) +
         std::string(text.substr(tail_from));
}

bool cap_result(Json& result, const ResultLimits& limits) {
  if (!result.is_object()) return cap_strings(result, limits.max_text_bytes);
  bool cut = cap_strings(result, limits.max_text_bytes);
  const size_t original = compact_size(result);
  if (original <= limits.max_result_bytes) return cut;
  // Step 2: the largest members no verdict needs, largest first.
  Json dropped = Json::array();
  size_t size = original;
  for (const Droppable& d : droppable(result)) {
    if (size <= limits.max_result_bytes) break;
    if (d.in_metadata) {
      result["metadata"].erase(d.key);
      dropped.push_back("metadata." + d.key);
    } else {
      result.erase(d.key);
      dropped.push_back(d.key);
    }
    size = size > d.bytes ? size - d.bytes : 0;
  }
  const std::string why = "the result was " + std::to_string(original) +
                          " bytes of JSON, over the limit of " +
                          std::to_string(limits.max_result_bytes) + "; its largest parts were cut";
  Json note = {{"bytes", original}, {"limit", limits.max_result_bytes}, {"dropped", dropped}};
  result["result_truncated"] = note;
  if (!result.contains("warnings") || !result["warnings"].is_array()) {
    result["warnings"] = Json::array();
  }
  result["warnings"].push_back(why);
  if (compact_size(result) <= limits.max_result_bytes) return true;
  // Step 3: the verdict alone (each of its strings already capped).
  Json verdict = Json::object();
  for (const char* key : kVerdict) {
    if (auto it = result.find(key); it != result.end()) verdict[key] = std::move(*it);
  }
  note["dropped"] = "everything but the verdict";
  verdict["result_truncated"] = std::move(note);
  verdict["warnings"] = Json::array({why});
  verdict["metadata"] = Json::object();
  result = std::move(verdict);
  return true;
}

}  // namespace kforge::jobs
