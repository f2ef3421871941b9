// What the SQLite stores share: the one conversion of SQLite result codes into a Status,
// statement helpers and the JSON text form of stored values. Internal to store/sqlite.
#pragma once

#include <sqlite3.h>

#include <string>
#include <string_view>

#include "kforge/common/json.h"
#include "kforge/common/status.h"

namespace kforge::store::sqlite_support {

// The one place where SQLite result codes become a Status (kAlreadyExists for a unique
// constraint, kUnavailable for busy/locked, kIo for I/O and permission errors, kInternal
// otherwise), naming `what`.
Status sqlite_status(sqlite3* db, int rc, std::string_view what);

// Runs `sql` (one or more statements without results).
Status exec(sqlite3* db, const std::string& sql, std::string_view what);

// First column of the first row of `sql`, as text.
StatusOr<std::string> query_text(sqlite3* db, const std::string& sql);

// JSON text of a value. Values parsed from JSON hold valid UTF-8; anything else is replaced
// with U+FFFD rather than throwing.
std::string dump_json(const Json& value);

// Column `col` of the current row as text ("" for NULL).
std::string column_text(sqlite3_stmt* stmt, int col);

// Binds parameters left to right to a cached statement and steps it; resets the statement
// and clears its bindings when destroyed so it can be reused. A bind error is reported by
// the next step.
class Call {
 public:
  Call(sqlite3* db, sqlite3_stmt* stmt) : db_(db), stmt_(stmt) {}
  ~Call() {
    sqlite3_reset(stmt_);
    sqlite3_clear_bindings(stmt_);
  }
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;

  Call& text(std::string_view value) {
    return note(sqlite3_bind_text64(stmt_, ++index_, value.data(), value.size(), SQLITE_TRANSIENT,
                                    SQLITE_UTF8));
  }
  Call& integer(int64_t value) { return note(sqlite3_bind_int64(stmt_, ++index_, value)); }
  // JSON text, or NULL for a null value.
  Call& json(const Json& value) {
    if (value.is_null()) return note(sqlite3_bind_null(stmt_, ++index_));
    return text(dump_json(value));
  }

  // Steps once: true when a row is ready (read it through `stmt()`), false when done.
  StatusOr<bool> step(std::string_view what) {
    if (bind_rc_ != SQLITE_OK) return sqlite_status(db_, bind_rc_, what);
    const int rc = sqlite3_step(stmt_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    return sqlite_status(db_, rc, what);
  }
  // Steps a statement that returns no rows.
  Status run(std::string_view what) { return step(what).status(); }

  sqlite3_stmt* stmt() const { return stmt_; }

 private:
  Call& note(int rc) {
    if (bind_rc_ == SQLITE_OK) bind_rc_ = rc;
    return *this;
  }

  sqlite3* db_;
  sqlite3_stmt* stmt_;
  int index_ = 0;
  int bind_rc_ = SQLITE_OK;
};

}  // namespace kforge::store::sqlite_support
