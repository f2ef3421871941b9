// A session's directory of files (docs/workbench.md "Files"):
//
//   <root>/<session id>/kernel/<name>_v<N>.py   every version, created once, never overwritten
//                      tests/test_<name>.py      write_test_code's code (latest)
//                      tests/test_inputs.py      the test_input_code of the latest execution
//                      tests/reference.py        the reference_code of the latest execution
//                      log/<session id>.jsonl    one JSON line per tool call
//                      log/<name>_log.md         the development log (rewritten on each call)
//                      docs/summarization.md     written past 70 % of the context budget
//
// Only names checked by names.h reach this class, and it checks them again; directories are
// created without following symlinks, version files with O_EXCL|O_NOFOLLOW, the others are
// replaced by rename, so a symlink planted in the workspace is never written through.
#pragma once

#include <filesystem>
#include <string>
#include <string_view>

#include "kforge/common/json.h"
#include "kforge/common/status.h"

namespace kforge::workbench {

class Workspace {
 public:
  // Creates <root>/<session_id> with its subdirectories. kAlreadyExists when it exists.
  static StatusOr<Workspace> create(const std::filesystem::path& root,
                                    const std::string& session_id);
  // An existing session directory (recreating missing subdirectories).
  static StatusOr<Workspace> open(const std::filesystem::path& dir);

  const std::filesystem::path& dir() const { return dir_; }

  // kernel/<name>_v<version>.py (returned relative to dir()); kAlreadyExists when present.
  StatusOr<std::string> write_version(const std::string& name, int version,
                                      std::string_view source) const;
  // tests/<file_name> replaced atomically (file_name: [a-z0-9_]+\.py); returns the relative path.
  StatusOr<std::string> write_test(const std::string& file_name, std::string_view code) const;
  // Appends one compact JSON line to log/<session_id>.jsonl.
  Status append_log(const std::string& session_id, const Json& line) const;
  Status write_dev_log(const std::string& name, std::string_view markdown) const;
  Status write_summary(std::string_view markdown) const;

  static std::string version_file(const std::string& name, int version);

 private:
  explicit Workspace(std::filesystem::path dir) : dir_(std::move(dir)) {}
  Status replace(const std::filesystem::path& relative, std::string_view content) const;

  std::filesystem::path dir_;
};

}  // namespace kforge::workbench
