#include "kforge/store/sqlite/sqlite_support.h"

#include <memory>

namespace kforge::store::sqlite_support {

Status sqlite_status(sqlite3* db, int rc, std::string_view what) {
  if (rc == SQLITE_OK || rc == SQLITE_ROW || rc == SQLITE_DONE) return Status::ok();
  const int primary = rc & 0xff;  // of an extended code
  ErrorCode code = ErrorCode::kInternal;
  if (rc == SQLITE_CONSTRAINT_PRIMARYKEY || rc == SQLITE_CONSTRAINT_UNIQUE) {
    code = ErrorCode::kAlreadyExists;
  } else if (primary == SQLITE_BUSY || primary == SQLITE_LOCKED) {
    code = ErrorCode::kUnavailable;
  } else if (primary == SQLITE_IOERR || primary == SQLITE_FULL || primary == SQLITE_CANTOPEN ||
             primary == SQLITE_READONLY || primary == SQLITE_PERM || primary == SQLITE_NOLFS) {
    code = ErrorCode::kIo;
  }
  std::string message = std::string(what) + ": " + sqlite3_errstr(rc);
  // The connection's message is more specific ("UNIQUE constraint failed: jobs.id"), but only
  // describes `rc` when it came from the connection's latest call.
  if (db != nullptr && sqlite3_extended_errcode(db) == rc) {
    message += std::string(" (") + sqlite3_errmsg(db) + ")";
  }
  return Status(code, message + " [sqlite rc " + std::to_string(rc) + "]");
}

Status exec(sqlite3* db, const std::string& sql, std::string_view what) {
  return sqlite_status(db, sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), what);
}

StatusOr<std::string> query_text(sqlite3* db, const std::string& sql) {
  sqlite3_stmt* raw = nullptr;
  int rc = sqlite3_prepare_v2(db, sql.c_str(), -1, &raw, nullptr);
  if (rc != SQLITE_OK) return sqlite_status(db, rc, sql);
  std::unique_ptr<sqlite3_stmt, int (*)(sqlite3_stmt*)> stmt(raw, &sqlite3_finalize);
  rc = sqlite3_step(stmt.get());
  if (rc != SQLITE_ROW) {
    if (rc == SQLITE_DONE) return internal_error(sql + ": returned no row");
    return sqlite_status(db, rc, sql);
  }
  const unsigned char* text = sqlite3_column_text(stmt.get(), 0);
  return std::string(text == nullptr ? "" : reinterpret_cast<const char*>(text));
}

std::string dump_json(const Json& value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}

std::string column_text(sqlite3_stmt* stmt, int col) {
  const unsigned char* text = sqlite3_column_text(stmt, col);
  if (text == nullptr) return {};
  return {reinterpret_cast<const char*>(text),
          static_cast<size_t>(sqlite3_column_bytes(stmt, col))};
}

}  // namespace kforge::store::sqlite_support
