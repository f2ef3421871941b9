#pragma once

#include <string_view>

namespace kforge::app {
inline constexpr std::string_view kVersion = "0.1.0";
}  // namespace kforge::app
