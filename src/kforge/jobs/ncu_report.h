// Nsight Compute's output, parsed: the one place kforge reads ncu's CSV.
//
// Both workers run the timed kernel(s) once more under
//   ncu --csv --page raw --print-units base --section <ncu_sections()> ...
// and return what ncu printed, unparsed ({command, exit_code, stdout, stderr} per role, the
// result's `device_metrics_raw`); the server turns it into the seed server's
// metadata.device_metrics here. The raw page has one row per profiled kernel (identity
// columns, then one column per metric), after a row of units; the details page (one row
// per metric: "Metric Name", "Metric Unit", "Metric Value") is read too.
//
// Groups (the seed server's names, values as ncu gave them; bandwidths in GiB/s as there):
// speed_of_light, detailed_metrics, memory_metrics, compute_metrics, pipeline_metrics,
// occupancy_metrics. A run's object has those groups for its longest kernel (by
// gpu__time_duration.sum), `kernels` (every profiled kernel: id, name, grid, block, stream,
// duration_ms, its groups and `raw`: every metric as {value, unit}) and `ncu` (the command);
// a run that produced no metrics has `error` instead, saying why in words a user can act on
// (no ncu, no permission to read the GPU's counters, no kernel profiled).
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "kforge/common/json.h"
#include "kforge/common/status.h"

namespace kforge::jobs {

// ncu's output comes from the job's own process, so it is untrusted input: bounded here.
inline constexpr size_t kMaxNcuOutputBytes = size_t{16} << 20;
inline constexpr size_t kMaxNcuKernels = 1024;  // kernels kept per run; the rest are ignored

// The sections kforge asks ncu for (their raw metrics feed the groups).
const std::vector<std::string>& ncu_sections();

struct NcuMetric {
  Json value;  // a number, or the string ncu printed ("n/a")
  std::string unit;
};

struct NcuKernel {
  int id = 0;
  std::string name;
  std::string block;  // "(256, 1, 1)" as ncu prints it
  std::string grid;
  std::string stream;
  std::map<std::string, NcuMetric> metrics;
};

// The profiled kernels of ncu's --csv output (raw or details page; ncu's own lines before
// the table are skipped), at most kMaxNcuKernels. kInvalidArgument when there is no table or
// the text is over kMaxNcuOutputBytes.
StatusOr<std::vector<NcuKernel>> parse_ncu_csv(std::string_view text);

// The seed server's groups of one kernel (groups without any metric are left out).
Json metric_groups(const NcuKernel& kernel);

// The device-metrics object of one ncu run ({command, exit_code, stdout, stderr}).
Json device_metrics_of_run(const Json& run);

}  // namespace kforge::jobs
