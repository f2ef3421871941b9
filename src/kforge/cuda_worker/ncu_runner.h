// Device metrics of a native job: the timed kernel(s) once more under Nsight Compute, the
// native twin of python/kforge_worker/timing/device_metrics.py. For each role the worker runs, as
// its own child (so inside its sandbox),
//   <ncu> --csv --page raw --print-units base --section <each> --cache-control all
//         --clock-control none --target-processes all
//         <this kforge> worker cuda --device D --replay <scratch>/device-metrics/job.json
//         --role candidate|reference
// and returns what ncu printed, unparsed: {role: {command, exit_code, stdout, stderr}} (the
// result's `device_metrics_raw`); the server parses it (src/kforge/jobs/ncu_report.h).
// The replay recompiles (a compile-cache hit) and regenerates the job's timing inputs from
// its seed, so they are the inputs that were timed.
#pragma once

#include <string>
#include <vector>

#include "kforge/common/json.h"

namespace kforge::cuda_worker {

// `spec` is the job spec, `request` its device_metrics object ({ncu, sections, timeout_s}).
// Never fails: an ncu that cannot start is an entry whose stderr says so.
Json run_device_metrics(const Json& spec, const Json& request, const std::string& device,
                        const std::vector<std::string>& roles);

}  // namespace kforge::cuda_worker
