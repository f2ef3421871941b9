#include "kforge/jobs/ncu_report.h"

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <optional>
#include <span>

namespace kforge::jobs {
namespace {

// One CSV record (RFC 4180 quoting, "" inside quotes); ncu writes no embedded newlines.
std::vector<std::string> split_csv_line(std::string_view line) {
  std::vector<std::string> fields;
  std::string field;
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"' && i + 1 < line.size() && line[i + 1] == '"') {
        field += '"';
        ++i;
      } else if (c == '"') {
        quoted = false;
      } else {
        field += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      fields.push_back(std::move(field));
      field.clear();
    } else if (c != '\r') {
      field += c;
    }
  }
  fields.push_back(std::move(field));
  return fields;
}

std::vector<std::string_view> lines_of(std::string_view text) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  return lines;
}

// "1,234.5" -> 1234.5; anything that is not a number stays the string it was.
Json metric_value(const std::string& text) {
  std::string digits;
  for (char c : text) {
    if (c != ',') digits += c;
  }
  if (digits.empty()) return text;
  char* end = nullptr;
  const double v = std::strtod(digits.c_str(), &end);
  if (end == nullptr || *end != '\0') return text;
  return v;
}

constexpr std::string_view kIdentity[] = {"ID",          "Process ID",  "Process Name", "Host Name",
                                          "Kernel Name", "Kernel Time", "Context",      "Stream",
                                          "Block Size",  "Grid Size",   "Device",       "CC"};

bool is_identity(const std::string& column) {
  return std::find(std::begin(kIdentity), std::end(kIdentity), column) != std::end(kIdentity);
}

// The kernel a row belongs to (by its ID), added on first sight; null past kMaxNcuKernels.
NcuKernel* kernel_for(std::vector<NcuKernel>& kernels, std::map<int, size_t>& index,
                      const std::map<std::string, size_t>& col,
                      const std::vector<std::string>& row) {
  auto get = [&](const char* name) -> std::string {
    auto it = col.find(name);
    return it != col.end() && it->second < row.size() ? row[it->second] : std::string();
  };
  const int id = static_cast<int>(std::strtol(get("ID").c_str(), nullptr, 10));
  if (auto it = index.find(id); it != index.end()) return &kernels[it->second];
  if (kernels.size() >= kMaxNcuKernels) return nullptr;
  index.emplace(id, kernels.size());
  kernels.push_back(
      {id, get("Kernel Name"), get("Block Size"), get("Grid Size"), get("Stream"), {}});
  return &kernels.back();
}

// (metric, key in the group) pairs, in the seed server's order.
using MetricKey = std::pair<const char*, const char*>;
using Group = std::span<const MetricKey>;

constexpr MetricKey kDetailed[] = {
    {"l1tex__t_sector_hit_rate.pct", "l1_hit_rate_pct"},
    {"lts__t_sector_hit_rate.pct", "l2_hit_rate_pct"},
    {"sm__warps_active.avg.pct_of_peak_sustained_active", "warp_occupancy_pct"},
    {"sm__cycles_active.avg.pct_of_peak_sustained_elapsed", "sm_active_cycles_pct"},
    {"sm__inst_executed.avg.per_cycle_active", "instructions_per_cycle"},
    {"launch__waves_per_multiprocessor", "waves_per_sm"}};
constexpr MetricKey kMemory[] = {
    {"dram__bytes.avg.per_second", "dram_avg_bandwidth_gb_s"},
    {"dram__bytes.sum.per_second", "dram_total_bandwidth_gb_s"},
    {"dram__cycles_active.avg.pct_of_peak_sustained_elapsed", "dram_active_cycles_pct"},
    {"l1tex__lsu_writeback_active.avg.pct_of_peak_sustained_elapsed", "l1_writeback_active_pct"},
    {"l1tex__m_xbar2l1tex_read_sectors.avg.pct_of_peak_sustained_elapsed", "l1_read_sectors_pct"},
    {"lts__throughput.avg.pct_of_peak_sustained_elapsed", "l2_throughput_pct"}};
constexpr MetricKey kCompute[] = {
    {"sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active", "fma_pipe_utilization_pct"},
    {"sm__inst_executed_pipe_fp64.avg.pct_of_peak_sustained_active", "fp64_pipe_utilization_pct"},
    {"sm__inst_executed_pipe_alu.avg.pct_of_peak_sustained_active", "alu_pipe_utilization_pct"},
    {"sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active", "xu_pipe_utilization_pct"},
    {"sm__inst_executed_pipe_tensor_op_hmma.avg.pct_of_peak_sustained_active",
     "tensor_pipe_utilization_pct"},
    {"sm__inst_executed.avg.per_cycle_active", "instructions_per_cycle"},
    {"launch__occupancy_limit_blocks", "occupancy_limit_blocks"},
    {"launch__occupancy_limit_registers", "occupancy_limit_registers"},
    {"launch__occupancy_limit_shared_mem", "occupancy_limit_shared_mem"},
    {"launch__occupancy_limit_warps", "occupancy_limit_warps"},
    {"launch__registers_per_thread", "registers_per_thread"}};
constexpr MetricKey kPipeline[] = {
    {"sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_elapsed", "fma_pipe_active_pct"},
    {"sm__pipe_alu_cycles_active.avg.pct_of_peak_sustained_elapsed", "alu_pipe_active_pct"},
    {"sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed", "tensor_pipe_active_pct"},
    {"sm__pipe_shared_cycles_active.avg.pct_of_peak_sustained_elapsed", "shared_pipe_active_pct"},
    {"sm__pipe_fp64_cycles_active.avg.pct_of_peak_sustained_elapsed", "fp64_pipe_active_pct"},
    {"sm__issue_active.avg.pct_of_peak_sustained_elapsed", "sm_issue_active_pct"}};
constexpr MetricKey kOccupancy[] = {
    {"launch__occupancy_limit_registers", "occupancy_limit_registers"},
    {"launch__occupancy_limit_shared_mem", "occupancy_limit_shared_mem"},
    {"launch__occupancy_limit_warps", "occupancy_limit_warps"},
    {"launch__occupancy_limit_blocks", "occupancy_limit_blocks"},
    {"launch__waves_per_multiprocessor", "waves_per_sm"},
    {"launch__block_size", "block_size"},
    {"launch__grid_size", "grid_size"},
    {"launch__shared_mem_per_block", "shared_mem_per_block"}};

std::optional<double> number(const NcuKernel& k, const char* metric) {
  auto it = k.metrics.find(metric);
  if (it == k.metrics.end() || !it->second.value.is_number()) return std::nullopt;
  return it->second.value.get<double>();
}

Json group_of(const NcuKernel& k, const Group& group, bool bandwidth_in_gib = false) {
  Json out = Json::object();
  for (const auto& [metric, key] : group) {
    if (auto v = number(k, metric)) {
      const bool bandwidth = bandwidth_in_gib && std::string_view(key).ends_with("_gb_s");
      out[key] = bandwidth ? *v / (1024.0 * 1024.0 * 1024.0) : *v;
    }
  }
  return out;
}

// The seed server's speed_of_light: the primary compute/memory figures fall back from the
// GPU-wide metric to the SM / DRAM one.
Json speed_of_light(const NcuKernel& k) {
  Json out = Json::object();
  const auto cm = number(k, "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed");
  const auto sm = number(k, "sm__throughput.avg.pct_of_peak_sustained_elapsed");
  const auto gd = number(k, "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed");
  const auto dr = number(k, "dram__throughput.avg.pct_of_peak_sustained_elapsed");
  if (cm) out["compute_memory_throughput_pct"] = *cm;
  if (sm) out["sm_throughput_pct"] = *sm;
  if (cm || sm) out["compute_throughput_pct"] = cm ? *cm : *sm;
  if (gd) out["gpu_dram_throughput_pct"] = *gd;
  if (dr) out["dram_throughput_pct"] = *dr;
  if (gd || dr) out["memory_throughput_pct"] = gd ? *gd : *dr;
  return out;
}

double duration_ms(const NcuKernel& k) {
  auto it = k.metrics.find("gpu__time_duration.sum");
  if (it == k.metrics.end() || !it->second.value.is_number()) return -1;
  const double v = it->second.value.get<double>();
  const std::string& u = it->second.unit;
  if (u == "second" || u == "s") return v * 1e3;
  if (u == "msecond" || u == "ms") return v;
  if (u == "usecond" || u == "us") return v * 1e-3;
  return v * 1e-6;  // nsecond, ns (ncu's default unit)
}

// A string member of a run, "" when absent or not a string (the run is untrusted input).
std::string text_of(const Json& run, const char* key) {
  auto it = run.find(key);
  return it != run.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// What to tell the user when a run gave no table.
std::string failure_reason(const Json& run) {
  const std::string out = text_of(run, "stdout");
  const std::string err = text_of(run, "stderr");
  const std::string both = out + "\n" + err;
  if (both.find("ERR_NVGPUCTRPERM") != std::string::npos) {
    return "Nsight Compute may not read this GPU's performance counters (ERR_NVGPUCTRPERM): the "
           "profiled process has no CAP_SYS_ADMIN (jobs run jailed, or the server is not root). "
           "Let every user profile (driver option NVreg_RestrictProfilingToAdminUsers=0; see "
           "https://developer.nvidia.com/ERR_NVGPUCTRPERM) or serve with --sandbox off as root";
  }
  if (both.find("No kernels were profiled") != std::string::npos) {
    return "ncu profiled no kernel: the call launched no kernel of its own";
  }
  const Json exit_code = run.value("exit_code", Json());
  const bool has_code = exit_code.is_number_integer();
  std::string errors;
  std::string program;  // what the profiled program printed itself (ncu's lines start "==")
  for (std::string_view line : lines_of(both)) {
    if (line.starts_with("==ERROR==") || line.starts_with("cannot run ncu") ||
        line.starts_with("ncu did not finish")) {
      errors += (errors.empty() ? "" : "; ") + std::string(line);
    }
  }
  for (std::string_view line : lines_of(err)) {  // the CSV table is on stdout
    if (!line.starts_with("==") && !line.empty()) program += std::string(line) + "\n";
  }
  if (errors.empty()) {
    errors = err.size() > 2000 ? err.substr(err.size() - 2000) : err;
  } else if (!program.empty() && errors.find("returned an error code") != std::string::npos) {
    // "The application returned an error code (1)" says nothing of why: its last words do.
    errors += " The profiled program's last output: " +
              (program.size() > 2000 ? program.substr(program.size() - 2000) : program);
  }
  return "ncu produced no metrics (exit code " +
         (has_code ? std::to_string(exit_code.get<int64_t>()) : std::string("none")) +
         "): " + errors;
}

}  // namespace

const std::vector<std::string>& ncu_sections() {
  static const std::vector<std::string> sections = {"SpeedOfLight", "MemoryWorkloadAnalysis",
                                                    "ComputeWorkloadAnalysis", "Occupancy",
                                                    "LaunchStats"};
  return sections;
}

StatusOr<std::vector<NcuKernel>> parse_ncu_csv(std::string_view text) {
  if (text.size() > kMaxNcuOutputBytes) {
    return invalid_argument("ncu's output is larger than " + std::to_string(kMaxNcuOutputBytes) +
                            " bytes");
  }
  const auto lines = lines_of(text);
  size_t header_at = lines.size();
  for (size_t i = 0; i < lines.size(); ++i) {
    if (lines[i].starts_with("\"ID\",")) {
      header_at = i;
      break;
    }
  }
  if (header_at == lines.size()) return invalid_argument("ncu printed no CSV table");
  const std::vector<std::string> header = split_csv_line(lines[header_at]);
  std::map<std::string, size_t> col;
  for (size_t i = 0; i < header.size(); ++i)
    col.emplace(header[i], i);
  const bool details = col.contains("Metric Name") && col.contains("Metric Value");
  std::vector<std::string> units;
  std::vector<NcuKernel> kernels;
  std::map<int, size_t> index;
  for (size_t i = header_at + 1; i < lines.size(); ++i) {
    if (!lines[i].starts_with("\"")) continue;  // ncu's own lines, blank lines
    const std::vector<std::string> row = split_csv_line(lines[i]);
    if (row.empty() || row[0].empty()) {  // the raw page's row of units
      units = row;
      continue;
    }
    NcuKernel* kernel = kernel_for(kernels, index, col, row);
    if (kernel == nullptr) continue;
    NcuKernel& k = *kernel;
    if (details) {
      const size_t name = col.at("Metric Name");
      const size_t value = col.at("Metric Value");
      const auto unit = col.find("Metric Unit");
      if (name >= row.size() || value >= row.size() || row[name].empty()) continue;
      k.metrics[row[name]] = {
          metric_value(row[value]),
          unit != col.end() && unit->second < row.size() ? row[unit->second] : std::string()};
      continue;
    }
    for (size_t c = 0; c < header.size() && c < row.size(); ++c) {
      if (is_identity(header[c]) || header[c].empty()) continue;
      k.metrics[header[c]] = {metric_value(row[c]), c < units.size() ? units[c] : std::string()};
    }
  }
  if (kernels.empty()) return invalid_argument("ncu's CSV table has no kernel rows");
  return kernels;
}

Json metric_groups(const NcuKernel& k) {
  Json out = Json::object();
  const std::pair<const char*, Json> groups[] = {
      {"speed_of_light", speed_of_light(k)},
      {"detailed_metrics", group_of(k, kDetailed)},
      {"memory_metrics", group_of(k, kMemory, /*bandwidth_in_gib=*/true)},
      {"compute_metrics", group_of(k, kCompute)},
      {"pipeline_metrics", group_of(k, kPipeline)},
      {"occupancy_metrics", group_of(k, kOccupancy)}};
  for (const auto& [name, group] : groups) {
    if (!group.empty()) out[name] = group;
  }
  return out;
}

Json device_metrics_of_run(const Json& run) {
  if (!run.is_object()) return Json{{"error", "the worker's ncu output is malformed"}};
  auto kernels = parse_ncu_csv(text_of(run, "stdout"));
  if (!kernels.is_ok()) return Json{{"error", failure_reason(run)}};
  Json list = Json::array();
  const NcuKernel* longest = nullptr;
  for (const auto& k : *kernels) {
    if (longest == nullptr || duration_ms(k) > duration_ms(*longest)) longest = &k;
    Json raw = Json::object();
    for (const auto& [name, m] : k.metrics)
      raw[name] = Json{{"value", m.value}, {"unit", m.unit}};
    Json entry = {{"id", k.id},
                  {"name", k.name},
                  {"grid", k.grid},
                  {"block", k.block},
                  {"stream", k.stream},
                  {"duration_ms", duration_ms(k) >= 0 ? Json(duration_ms(k)) : Json(nullptr)}};
    entry.update(metric_groups(k));
    entry["raw"] = std::move(raw);
    list.push_back(std::move(entry));
  }
  if (longest == nullptr) return Json{{"error", failure_reason(run)}};
  Json out = metric_groups(*longest);
  out["kernel_name"] = longest->name;
  out["kernels"] = std::move(list);
  out["ncu"] = Json{{"command", run.value("command", Json::array())}, {"sections", ncu_sections()}};
  return out;
}

}  // namespace kforge::jobs
