// What the server adds to a worker's result before storing it, from facts the worker does not
// have or should not be trusted with: the roofline of each timed kernel (roofline.h, from
// the device's measured peaks) and the device metrics parsed from Nsight Compute's output
// (ncu_report.h; the worker's raw `device_metrics_raw` is dropped).
#pragma once

#include <string>

#include "kforge/common/json.h"
#include "kforge/model/request.h"

namespace kforge::jobs {

struct ResultExtrasContext {
  const model::JobRequest* request = nullptr;
  bool on_gpu = false;
  Json peaks;  // null when the device has none (peaks_error says why)
  std::string peaks_error;
  bool device_metrics = false;             // the job asked for them
  std::string device_metrics_unavailable;  // why the worker was not asked ("" = it was)
};

// Adds `roofline` and `ref_roofline` (always), and metadata.device_metrics when asked for.
void add_result_extras(Json& result, const ResultExtrasContext& context);

}  // namespace kforge::jobs
