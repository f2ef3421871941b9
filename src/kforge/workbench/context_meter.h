// How the workbench estimates the tokens a session's tool calls put into the agent's context
// (docs/workbench.md "Context management"; the method is part of the contract).
//
// Per tool call: the tokens of the tool's name and its arguments (compact JSON) plus the tokens
// of every text block of the answer, plus kCallOverheadTokens for the call's framing. Tokens
// of a text: one per 4 bytes of ASCII (rounded up), plus one per non-ASCII code point (CJK,
// Hangul and symbols are about one token each in current tokenizers; counting them as one
// keeps Korean or Chinese text from being underestimated by a factor of 3). The estimate is
// deliberately simple and errs high for code, which tokenizes at about 3.5 bytes per token.
#pragma once

#include <cstdint>
#include <string_view>

namespace kforge::workbench {

inline constexpr int64_t kCallOverheadTokens = 20;
// Past this fraction of the budget the session writes docs/summarization.md and every answer
// tells the agent to continue in a new session.
inline constexpr double kSummaryThreshold = 0.70;
inline constexpr int64_t kDefaultContextBudget = 128000;

int64_t estimate_tokens(std::string_view text);

}  // namespace kforge::workbench
