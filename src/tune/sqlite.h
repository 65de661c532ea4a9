// A thin RAII layer over SQLite's C API for the tuning database: a
// connection, a prepared statement, and a write transaction that retries
// while another process holds the write lock.
#pragma once

#include <sqlite3.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>

namespace kiln::tune::sql {

// SQLite's result code and message, thrown where a caller may need to tell
// "not a database" or "corrupt" apart from other failures.
struct Failure {
  int code = SQLITE_OK;  // the primary result code (SQLITE_NOTADB, SQLITE_CORRUPT, ...)
  std::string message;

  bool is_corruption() const { return code == SQLITE_NOTADB || code == SQLITE_CORRUPT; }
  bool is_busy() const { return code == SQLITE_BUSY || code == SQLITE_LOCKED; }
};

class Connection {
 public:
  // Opens `filename` (":memory:" for a private in-memory database) with
  // sqlite3_open_v2's `flags`; throws Failure. Sets the busy timeout.
  Connection(const std::string& filename, int flags);
  ~Connection();
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  sqlite3* get() const { return db_; }
  // Runs statements without results; throws Failure.
  void exec(const std::string& sql);
  // The first column of the first row of a one-value query (PRAGMA user_version).
  std::int64_t query_int(const std::string& sql);
  std::string query_text(const std::string& sql);

  // Runs `body` inside BEGIN IMMEDIATE ... COMMIT, retrying the whole
  // transaction while SQLite reports the database busy (another process's
  // write or checkpoint), until `deadline_ms` has passed; rolls back when
  // `body` throws. Throws Failure (busy past the deadline, or any other).
  void write_transaction(const std::function<void()>& body, int deadline_ms = kWriteDeadlineMs);
  // Runs `body` (reads) inside BEGIN ... COMMIT, retried while busy, so that
  // its statements see one snapshot.
  void read_transaction(const std::function<void()>& body, int deadline_ms = kWriteDeadlineMs);

  Failure failure(int code) const;

  // How long one statement waits for a lock before SQLite reports busy, and
  // how long a transaction keeps retrying: writers from several processes
  // queue behind each other's short transactions; a minute of contention
  // means something is stuck.
  static constexpr int kBusyTimeoutMs = 5000;
  static constexpr int kWriteDeadlineMs = 60000;

 private:
  void transaction(const char* begin, const std::function<void()>& body, int deadline_ms);
  sqlite3* db_ = nullptr;
};

class Statement {
 public:
  Statement(Connection& connection, std::string_view sql);
  ~Statement();
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  // Binds by 1-based index.
  Statement& bind(int index, std::string_view text);
  Statement& bind(int index, std::int64_t value);
  Statement& bind(int index, double value);

  // Advances: true with a row, false when done; throws Failure.
  bool step();
  // Runs a statement without results to completion.
  void run();
  void reset();

  std::string text(int column) const;
  std::int64_t integer(int column) const;
  double real(int column) const;
  bool is_null(int column) const;

 private:
  Connection& connection_;
  sqlite3_stmt* stmt_ = nullptr;
};

}  // namespace kiln::tune::sql
