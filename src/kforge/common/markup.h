// Escaping text for XML and HTML output (SVG charts, the API reference page).
#pragma once

#include <string>
#include <string_view>

namespace kforge {

// Escapes &, <, >, " and ' for XML or HTML text and attribute values.
std::string xml_escape(std::string_view text);

}  // namespace kforge
