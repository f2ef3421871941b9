#include "kforge/store/postgres/pg_connection.h"

#include <charconv>
#include <regex>

namespace kforge::store::pg {
namespace {

// libpq's message on one line: its lines joined with "; ", tabs and trailing space dropped.
std::string trimmed(const char* message) {
  std::string s;
  bool line_break = false;
  for (const char* p = message != nullptr ? message : ""; *p != '\0'; ++p) {
    if (*p == '\n') {
      line_break = true;
    } else if (*p != '\t') {
      if (line_break && !s.empty()) s += "; ";
      line_break = false;
      s += *p;
    }
  }
  while (!s.empty() && s.back() == ' ')
    s.pop_back();
  return s;
}

}  // namespace

std::string Rows::text(int row, int col) const {
  const char* value = PQgetvalue(res_.get(), row, col);
  return {value, static_cast<size_t>(PQgetlength(res_.get(), row, col))};
}

int64_t Rows::integer(int row, int col) const {
  const std::string value = text(row, col);
  int64_t out = 0;
  std::from_chars(value.data(), value.data() + value.size(), out);
  return out;
}

int64_t Rows::affected() const {
  const char* n = PQcmdTuples(res_.get());
  int64_t out = 0;
  if (n != nullptr) std::from_chars(n, n + std::char_traits<char>::length(n), out);
  return out;
}

std::string redact(const std::string& conninfo) {
  // URL form: scheme://user:password@host..., and password=... in either form.
  static const std::regex url_password(R"(^([a-z]+://[^:/@]*):[^@]*@)");
  static const std::regex key_password(R"((password\s*=\s*)('[^']*'|[^\s&]*))");
  std::string out = std::regex_replace(conninfo, url_password, "$1:***@");
  return std::regex_replace(out, key_password, "$1***");
}

Status check_conninfo(const std::string& conninfo, const std::string& flag) {
  char* err = nullptr;
  PQconninfoOption* options = PQconninfoParse(conninfo.c_str(), &err);
  if (options == nullptr) {
    std::string why = err != nullptr ? trimmed(err) : "out of memory";
    PQfreemem(err);
    return invalid_argument("not a PostgreSQL connection string (" + why + "): " + redact(conninfo),
                            flag);
  }
  PQconninfoFree(options);
  return Status::ok();
}

StatusOr<std::unique_ptr<Connection>> Connection::open(const std::string& conninfo) {
  PGconn* conn = PQconnectdb(conninfo.c_str());
  if (conn == nullptr) return unavailable("PostgreSQL: out of memory");
  std::string target = redact(conninfo);
  if (PQstatus(conn) != CONNECTION_OK) {
    std::string why = trimmed(PQerrorMessage(conn));
    PQfinish(conn);
    return unavailable("cannot connect to PostgreSQL at " + target + ": " + why);
  }
  std::unique_ptr<Connection> out(new Connection(conn, std::move(target)));
  // Notices (e.g. "relation already exists, skipping") are not errors; keep them off stderr.
  PQsetNoticeProcessor(
      conn, [](void*, const char*) {}, nullptr);
  return out;
}

Connection::~Connection() {
  PQfinish(conn_);
}

Status Connection::reset() {
  PQreset(conn_);
  if (PQstatus(conn_) != CONNECTION_OK) {
    return unavailable("lost the connection to PostgreSQL at " + target_ + ": " +
                       trimmed(PQerrorMessage(conn_)));
  }
  return Status::ok();
}

Status Connection::error_of(PGresult* res, std::string_view what) const {
  const char* state = res != nullptr ? PQresultErrorField(res, PG_DIAG_SQLSTATE) : nullptr;
  std::string message = trimmed(res != nullptr ? PQresultErrorMessage(res) : nullptr);
  if (message.empty()) message = trimmed(PQerrorMessage(conn_));
  std::string text = std::string(what) + ": " + message;
  const std::string_view code = state != nullptr ? state : "";
  if (code == "23505") return Status(ErrorCode::kAlreadyExists, std::move(text));
  // Class 08: connection exception; 57P: operator intervention (shutdown); 40001/40P01:
  // serialization failure and deadlock (the caller may retry).
  if (PQstatus(conn_) != CONNECTION_OK || code.starts_with("08") || code.starts_with("57P") ||
      code == "40001" || code == "40P01") {
    return unavailable(text);
  }
  return internal_error(text);
}

StatusOr<Rows> Connection::query(std::string_view sql, const std::vector<Param>& params,
                                 std::string_view what) {
  if (PQstatus(conn_) != CONNECTION_OK) KF_RETURN_IF_ERROR(reset().with_context(what));
  std::vector<const char*> values;
  values.reserve(params.size());
  for (const Param& p : params)
    values.push_back(p ? p->c_str() : nullptr);
  const std::string text(sql);
  PGresult* res = PQexecParams(conn_, text.c_str(), static_cast<int>(values.size()), nullptr,
                               values.data(), nullptr, nullptr, 0);
  const ExecStatusType status = res != nullptr ? PQresultStatus(res) : PGRES_FATAL_ERROR;
  if (status != PGRES_TUPLES_OK && status != PGRES_COMMAND_OK) {
    Status error = error_of(res, what);
    PQclear(res);
    return error;
  }
  return Rows(res);
}

Status Connection::exec(std::string_view sql, std::string_view what) {
  if (PQstatus(conn_) != CONNECTION_OK) KF_RETURN_IF_ERROR(reset().with_context(what));
  const std::string text(sql);
  PGresult* res = PQexec(conn_, text.c_str());
  const ExecStatusType status = res != nullptr ? PQresultStatus(res) : PGRES_FATAL_ERROR;
  Status out =
      status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK ? Status::ok() : error_of(res, what);
  PQclear(res);
  return out;
}

Status Connection::consume_input() {
  if (PQconsumeInput(conn_) == 0) {
    return unavailable("PostgreSQL listener at " + target_ + ": " + trimmed(PQerrorMessage(conn_)));
  }
  return Status::ok();
}

std::vector<Connection::Notification> Connection::take_notifications() {
  std::vector<Notification> out;
  while (PGnotify* n = PQnotifies(conn_)) {
    out.push_back({n->relname != nullptr ? n->relname : "", n->extra != nullptr ? n->extra : ""});
    PQfreemem(n);
  }
  return out;
}

}  // namespace kforge::store::pg
