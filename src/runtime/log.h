// The compiler's log: KILN_LOG=info|debug (default: warnings only) on stderr.
// Every fallback, cache problem and recompile is logged with its reason.
#pragma once

#include <string>

namespace kiln::runtime {

enum class LogLevel { warning = 0, info = 1, debug = 2 };

bool log_enabled(LogLevel level);
void log(LogLevel level, const std::string& message);

}  // namespace kiln::runtime
