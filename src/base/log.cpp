#include "src/base/log.h"

#include <kiln/log.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <mutex>
#include <set>

namespace kiln::base {
namespace {

LogLevel configured_level() {
  static const LogLevel level = [] {
    const char* env = std::getenv("KILN_LOG");
    if (env == nullptr) return LogLevel::warning;
    if (std::strcmp(env, "debug") == 0) return LogLevel::debug;
    if (std::strcmp(env, "info") == 0) return LogLevel::info;
    return LogLevel::warning;
  }();
  return level;
}

const char* level_name(LogLevel level) {
  switch (level) {
    case LogLevel::warning: return "warning";
    case LogLevel::info: return "info";
    case LogLevel::debug: return "debug";
  }
  return "?";
}

std::mutex& log_mutex() {
  static std::mutex mutex;
  return mutex;
}

LogSink& current_sink() {
  static LogSink sink;
  return sink;
}

// The most detailed level the current sink takes (-1: no sink).
std::atomic<int> sink_level{-1};

}  // namespace

LogSink set_log_sink(LogSink sink, LogLevel level) {
  std::lock_guard lock(log_mutex());
  sink_level = sink ? static_cast<int>(level) : -1;
  std::swap(current_sink(), sink);
  return sink;
}

bool log_enabled(LogLevel level) {
  return static_cast<int>(level) <= std::max(static_cast<int>(configured_level()), sink_level.load());
}

void log(LogLevel level, const std::string& message) {
  if (!log_enabled(level)) return;
  std::lock_guard lock(log_mutex());
  if (const LogSink& sink = current_sink()) {
    if (static_cast<int>(level) <= sink_level) sink(level, message);
    return;
  }
  if (static_cast<int>(level) <= static_cast<int>(configured_level()))
    std::cerr << "kiln " << level_name(level) << ": " << message << '\n';
}

void log_once(LogLevel level, const std::string& topic, const std::string& message) {
  static std::mutex mutex;
  static std::set<std::string> reported;
  bool first = false;
  {
    std::lock_guard lock(mutex);
    first = reported.insert(topic).second;
  }
  log(first ? level : LogLevel::debug, message);
}

}  // namespace kiln::base

namespace kiln {

LogHandler set_log_handler(LogHandler handler, LogLevel level) {
  base::LogSink sink;
  if (handler)
    sink = [handler = std::move(handler)](base::LogLevel l, const std::string& message) {
      handler(static_cast<LogLevel>(l), message);
    };
  base::LogSink previous = base::set_log_sink(std::move(sink), static_cast<base::LogLevel>(level));
  if (!previous) return {};
  return [previous = std::move(previous)](LogLevel l, const std::string& message) {
    previous(static_cast<base::LogLevel>(l), message);
  };
}

}  // namespace kiln
