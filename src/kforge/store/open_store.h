// Opens the store `--store` names: SQLite in the data directory (the default) or a
// PostgreSQL database shared by several nodes (postgresql://... or postgres://...).
// PostgreSQL support is a build option (KFORGE_WITH_POSTGRESQL, off in the static GPU build
// of scripts/package-gpu.sh); without it a postgresql:// store is refused at start-up.
#pragma once

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>

#include "kforge/common/status.h"
#include "kforge/store/store.h"

namespace kforge::store {

struct StoreOptions {
  std::string url;                         // --store: "" or "sqlite", or a postgresql:// URL
  std::filesystem::path sqlite_path;       // the SQLite database file
  bool sqlite_fsync = true;                // SQLite synchronous=FULL (false: NORMAL)
  std::string node_id;                     // PostgreSQL: this node's name ("" : default_node_id())
  std::chrono::milliseconds lease{30000};  // PostgreSQL: a claimed job's lease
};

// Whether this binary was built with PostgreSQL support.
bool postgres_supported();

// kInvalidArgument naming --store for a value that is neither "sqlite" nor a
// postgresql:// (postgres://) URL, or a URL libpq cannot parse; kFailedPrecondition when
// this binary has no PostgreSQL support; the store's own errors otherwise.
StatusOr<std::unique_ptr<Store>> open_store(const StoreOptions& options);

// "<hostname>-<pid>-<4 random hex digits>": unique per process start.
std::string default_node_id();

}  // namespace kforge::store
