// Where kiln's log goes: by default stderr, warnings only (KILN_LOG=info or
// debug for more). A service routes the messages into its own log instead:
//
//   kiln::set_log_handler([&](kiln::LogLevel level, const std::string& message) {
//     my_logger.log(level == kiln::LogLevel::warning ? WARN : INFO, "kiln: " + message);
//   });
//
// Every fallback, cache problem and recompile is logged with its reason.
#pragma once

#include <kiln/export.h>

#include <functional>
#include <string>

namespace kiln {

enum class LogLevel { warning = 0, info = 1, debug = 2 };

// Called for each message up to `level` instead of writing it to stderr,
// whatever KILN_LOG says, one message at a time from whichever thread
// logs; the handler must not call kiln. An empty handler restores stderr.
// Returns the previous handler (empty: stderr).
using LogHandler = std::function<void(LogLevel, const std::string&)>;
KILN_API LogHandler set_log_handler(LogHandler handler, LogLevel level = LogLevel::warning);

}  // namespace kiln
