// Standard base64 (RFC 4648, with padding; whitespace ignored on decode).
#pragma once

#include <string>
#include <string_view>

#include "kforge/common/status.h"

namespace kforge {

std::string base64_encode(std::string_view bytes);
// kInvalidArgument (no field path; callers add it) on a character outside the alphabet
// or a bad length.
StatusOr<std::string> base64_decode(std::string_view text);

}  // namespace kforge
