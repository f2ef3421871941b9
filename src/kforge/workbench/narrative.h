// The human-readable side of a session: the suggested next step, the versions table, the
// development log (log/<name>_log.md) and the summary written past 70 % of the context
// budget (docs/summarization.md).
#pragma once

#include <string>

#include "kforge/workbench/knowledge.h"
#include "kforge/workbench/session.h"

namespace kforge::workbench {

// The call that moves the session forward from where it is, with why.
std::string next_step(const Session& session);

// | version | correct | time (ms) | speedup | file | as Markdown ("" without versions).
std::string versions_table(const Session& session);

// Times as "2026-03-26 14:03:12 UTC".
std::string format_time(int64_t unix_ms);

// log/<name>_log.md: per version what changed (its size and the first lines of its docstring
// or comment), correctness, timings per size, and the best so far.
std::string render_dev_log(const Session& session, const Knowledge& knowledge);

// Why a summary is rendered: the context passed 70 % of its budget (docs/summarization.md is
// written), or a session was resumed (its state, told to the new conversation).
enum class SummaryReason { kContextBudget, kResume };

// Kernel, state, versions and results, best, last errors, next steps, and how to resume in a
// new session; its opening says why it was written.
std::string render_summary(const Session& session, SummaryReason why);

}  // namespace kforge::workbench
