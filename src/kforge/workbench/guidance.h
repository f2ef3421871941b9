// Optimisation guidance the workbench gives with each written version and after each
// benchmark: what the op's entry in torch_ops.json suggests for this version number, what the
// last benchmark showed (speedup, % of peak bandwidth or FLOP/s), and the general Triton
// levers (BLOCK_SIZE, coalescing, masking, @triton.autotune, num_warps/num_stages).
#pragma once

#include <string>
#include <vector>

#include "kforge/workbench/knowledge.h"
#include "kforge/workbench/outcome.h"
#include "kforge/workbench/session.h"

namespace kforge::workbench {

// For write_kernel_code's answer after version `version` was stored.
std::string write_guidance(const Knowledge& knowledge, const Session& session, int version);

// What a benchmark's numbers mean for the next version (`op` may be null).
std::string benchmark_advice(const Json* op, const std::vector<CaseOutcome>& cases);

}  // namespace kforge::workbench
