#include "src/tune/sqlite.h"

#include <chrono>
#include <random>
#include <thread>

namespace kiln::tune::sql {
namespace {

// Raised by a transaction's body on a busy statement; the transaction catches
// it to retry from the start.
bool is_busy_code(int code) {
  const int primary = code & 0xff;
  return primary == SQLITE_BUSY || primary == SQLITE_LOCKED;
}

}  // namespace

Connection::Connection(const std::string& filename, int flags) {
  const int rc = sqlite3_open_v2(filename.c_str(), &db_, flags, nullptr);
  if (rc != SQLITE_OK) {
    Failure f{rc & 0xff, db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(rc)};
    sqlite3_close_v2(db_);  // SQLite may hand back a handle even when opening failed
    db_ = nullptr;
    throw f;
  }
  sqlite3_extended_result_codes(db_, 1);
  sqlite3_busy_timeout(db_, kBusyTimeoutMs);
}

Connection::~Connection() {
  // Every Statement is finalized by its destructor before this runs, so the
  // close succeeds and frees everything (the sanitizer build checks).
  if (db_) sqlite3_close_v2(db_);
}

Failure Connection::failure(int code) const {
  return Failure{code & 0xff, db_ ? sqlite3_errmsg(db_) : sqlite3_errstr(code)};
}

void Connection::exec(const std::string& sql) {
  char* error = nullptr;
  const int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error);
  if (rc != SQLITE_OK) {
    Failure f{rc & 0xff, error ? error : sqlite3_errstr(rc)};
    sqlite3_free(error);
    throw f;
  }
}

std::int64_t Connection::query_int(const std::string& sql) {
  Statement s(*this, sql);
  return s.step() ? s.integer(0) : 0;
}

std::string Connection::query_text(const std::string& sql) {
  Statement s(*this, sql);
  return s.step() ? s.text(0) : std::string();
}

void Connection::transaction(const char* begin, const std::function<void()>& body, int deadline_ms) {
  using Clock = std::chrono::steady_clock;
  const auto deadline = Clock::now() + std::chrono::milliseconds(deadline_ms);
  std::minstd_rand jitter(std::random_device{}());
  int backoff_ms = 1;
  for (;;) {
    try {
      exec(begin);
      try {
        body();
        exec("COMMIT");
        return;
      } catch (...) {
        if (!sqlite3_get_autocommit(db_)) sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr);
        throw;
      }
    } catch (const Failure& f) {
      if (!f.is_busy() || Clock::now() >= deadline) throw;
    }
    // Randomised backoff, so that processes that collided do not collide again.
    std::this_thread::sleep_for(std::chrono::milliseconds(1 + static_cast<int>(jitter() % backoff_ms)));
    backoff_ms = std::min(backoff_ms * 2, 64);
  }
}

void Connection::write_transaction(const std::function<void()>& body, int deadline_ms) {
  // IMMEDIATE takes the write lock first, so a transaction never has to
  // upgrade a read snapshot that another writer made stale (SQLITE_BUSY_SNAPSHOT).
  transaction("BEGIN IMMEDIATE", body, deadline_ms);
}

void Connection::read_transaction(const std::function<void()>& body, int deadline_ms) {
  transaction("BEGIN", body, deadline_ms);
}

Statement::Statement(Connection& connection, std::string_view sql) : connection_(connection) {
  const int rc = sqlite3_prepare_v2(connection.get(), sql.data(), static_cast<int>(sql.size()), &stmt_, nullptr);
  if (rc != SQLITE_OK) throw connection.failure(rc);
}

Statement::~Statement() { sqlite3_finalize(stmt_); }

Statement& Statement::bind(int index, std::string_view text) {
  const int rc = sqlite3_bind_text64(stmt_, index, text.data(), text.size(), SQLITE_TRANSIENT, SQLITE_UTF8);
  if (rc != SQLITE_OK) throw connection_.failure(rc);
  return *this;
}

Statement& Statement::bind(int index, std::int64_t value) {
  const int rc = sqlite3_bind_int64(stmt_, index, value);
  if (rc != SQLITE_OK) throw connection_.failure(rc);
  return *this;
}

Statement& Statement::bind(int index, double value) {
  const int rc = sqlite3_bind_double(stmt_, index, value);
  if (rc != SQLITE_OK) throw connection_.failure(rc);
  return *this;
}

bool Statement::step() {
  const int rc = sqlite3_step(stmt_);
  if (rc == SQLITE_ROW) return true;
  if (rc == SQLITE_DONE) return false;
  Failure f = connection_.failure(rc);
  sqlite3_reset(stmt_);
  if (is_busy_code(rc)) f.code = SQLITE_BUSY;
  throw f;
}

void Statement::run() {
  while (step()) {
  }
}

void Statement::reset() {
  sqlite3_reset(stmt_);
  sqlite3_clear_bindings(stmt_);
}

std::string Statement::text(int column) const {
  const auto* data = reinterpret_cast<const char*>(sqlite3_column_text(stmt_, column));
  const int size = sqlite3_column_bytes(stmt_, column);
  return data ? std::string(data, static_cast<std::size_t>(size)) : std::string();
}

std::int64_t Statement::integer(int column) const { return sqlite3_column_int64(stmt_, column); }
double Statement::real(int column) const { return sqlite3_column_double(stmt_, column); }
bool Statement::is_null(int column) const { return sqlite3_column_type(stmt_, column) == SQLITE_NULL; }

}  // namespace kiln::tune::sql
