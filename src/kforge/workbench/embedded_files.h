// The files compiled into the binary (cmake/EmbedFiles.cmake): the knowledge base
// (knowledge/**) and the library kernels the workbench's templates are made of
// (kernels/<op>/v4_optimized.py, kernels/interpreter_compat.py).
#pragma once

#include <string_view>
#include <vector>

namespace kforge::workbench {

struct EmbeddedFile {
  std::string_view path;     // relative to the repository root, e.g. "knowledge/overview.md"
  std::string_view content;  // static storage
};

std::vector<EmbeddedFile> embedded_files();

}  // namespace kforge::workbench
