// The compiler's log: KILN_LOG=info|debug (default: warnings only) on stderr.
// Every fallback, cache problem and recompile is logged with its reason.
#pragma once

#include <functional>
#include <string>

namespace kiln::base {

enum class LogLevel { warning = 0, info = 1, debug = 2 };

bool log_enabled(LogLevel level);
void log(LogLevel level, const std::string& message);
// log() the first time this process reports `topic` (a cache folder that
// cannot be written: a full or read-only disk); later reports of the same
// topic go to the debug level, so a failing disk costs one warning, not one
// per kernel.
void log_once(LogLevel level, const std::string& topic, const std::string& message);

// Where messages up to `level` go instead of stderr while set, whatever
// KILN_LOG says (tests read warnings and info lines through it); an empty
// sink restores stderr. Returns the previous sink. The sink is called under
// the log's lock, one message at a time: it must not log.
using LogSink = std::function<void(LogLevel, const std::string&)>;
LogSink set_log_sink(LogSink sink, LogLevel level = LogLevel::warning);

}  // namespace kiln::base
