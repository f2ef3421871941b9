// The web UI's files (ui/), compiled into the binary by cmake/EmbedFiles.cmake, so `kforge
// serve` needs no files and no network to serve /ui.
#pragma once

#include <string_view>
#include <vector>

namespace kforge::frontends::http {

struct EmbeddedFile {
  std::string_view path;     // relative to ui/, e.g. "app.js"
  std::string_view content;  // static storage
};

// Every file under ui/ (generated source).
std::vector<EmbeddedFile> ui_files();

}  // namespace kforge::frontends::http
