// A libpq connection: the one conversion of PostgreSQL errors into a Status, parameterised
// queries with text parameters and results, and connection-string checks. Internal to
// store/postgres.
#pragma once

#include <libpq-fe.h>

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "kforge/common/status.h"

namespace kforge::store::pg {

// A query's result rows, as text (NULL is nullopt).
class Rows {
 public:
  explicit Rows(PGresult* res) : res_(res, &PQclear) {}
  int size() const { return PQntuples(res_.get()); }
  bool null(int row, int col) const { return PQgetisnull(res_.get(), row, col) != 0; }
  std::string text(int row, int col) const;
  int64_t integer(int row, int col) const;  // 0 for NULL or a value that is not a number
  // Rows changed by an INSERT/UPDATE/DELETE without RETURNING.
  int64_t affected() const;

 private:
  std::unique_ptr<PGresult, decltype(&PQclear)> res_;
};

using Param = std::optional<std::string>;  // nullopt: SQL NULL

// Checks a connection string ("postgresql://user@host/db?..." or "key=value ...") without
// connecting: kInvalidArgument naming `flag` and libpq's reason.
Status check_conninfo(const std::string& conninfo, const std::string& flag);

// The connection string with any password replaced by "***" (for logs and errors).
std::string redact(const std::string& conninfo);

class Connection {
 public:
  // Connects; kUnavailable with libpq's reason (and the redacted target) when it cannot.
  static StatusOr<std::unique_ptr<Connection>> open(const std::string& conninfo);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Runs one statement with text parameters ($1, $2, ...). Reconnects first when the
  // connection was lost. Errors: kAlreadyExists (unique violation), kUnavailable (connection
  // lost, server shutting down, serialization failure), kInternal otherwise; each names `what`.
  StatusOr<Rows> query(std::string_view sql, const std::vector<Param>& params,
                       std::string_view what);
  // Runs one or more statements without parameters.
  Status exec(std::string_view sql, std::string_view what);
  // Runs `body` between BEGIN and COMMIT; ROLLBACK when it (or the commit) fails.
  template <typename F>
  Status transaction(std::string_view what, F&& body) {
    KF_RETURN_IF_ERROR(exec("BEGIN", what));
    Status status = body();
    if (status.is_ok()) status = exec("COMMIT", what);
    if (!status.is_ok()) exec("ROLLBACK", what).ignore();
    return status;
  }

  // LISTEN support: the socket to poll and the notifications received so far.
  int socket() const { return PQsocket(conn_); }
  // Reads what arrived on the socket; kUnavailable when the connection is gone.
  Status consume_input();
  struct Notification {
    std::string channel;
    std::string payload;
  };
  std::vector<Notification> take_notifications();
  bool ok() const { return PQstatus(conn_) == CONNECTION_OK; }
  // Re-establishes a lost connection; kUnavailable when it cannot.
  Status reset();

 private:
  Connection(PGconn* conn, std::string target) : conn_(conn), target_(std::move(target)) {}
  Status error_of(PGresult* res, std::string_view what) const;

  PGconn* conn_;
  std::string target_;  // redacted connection string, for messages
};

}  // namespace kforge::store::pg
