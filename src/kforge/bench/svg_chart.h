// The chart of one op in a bench report: mean time per call for each size (a group) and each
// kernel row (a bar: torch, torch.compile, the versions), on a log scale so that 256x256 and
// 4096x4096 fit one axis. Plain SVG 1.1, no scripts, no external resources.
#pragma once

#include <string>

#include "kforge/common/json.h"

namespace kforge::bench {

// `op` is one element of report["ops"]; `sizes` is report["sizes"]. Rows without a time at
// a size (failed, not run) leave a gap marked with a cross.
std::string render_time_chart(const Json& op, const Json& sizes);

// Escapes &, <, >, " and ' for XML text and attributes.
std::string xml_escape(std::string_view text);

}  // namespace kforge::bench
