// Running the built `kiln` binary from a test, as a user would: from the
// source root (KILN_SOURCE_ROOT), with stdout and stderr captured together.
// Shared by the cli and bench suites; include after <boost/test/unit_test.hpp>.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace cli_test {

struct Result {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

inline std::string source_root() {
  const char* root = std::getenv("KILN_SOURCE_ROOT");
  BOOST_REQUIRE_MESSAGE(root != nullptr, "KILN_SOURCE_ROOT is not set (run through meson test)");
  return root;
}

// Runs `kiln <args>` (KILN_BINARY) in `directory` (default: the source root)
// and logs the command and its output.
// `environment`: "NAME=value ..." set for this run only.
inline Result run_kiln(const std::string& args, const std::string& directory = "", const std::string& environment = "") {
  const char* binary = std::getenv("KILN_BINARY");
  BOOST_REQUIRE_MESSAGE(binary != nullptr, "KILN_BINARY is not set (run through meson test)");
  const std::string command = "cd '" + (directory.empty() ? source_root() : directory) + "' && " +
                              (environment.empty() ? "" : "env " + environment + " ") + "'" + binary + "' " + args +
                              " 2>&1";
  Result r;
  FILE* pipe = popen(command.c_str(), "r");
  BOOST_REQUIRE(pipe != nullptr);
  std::array<char, 4096> buf{};
  while (std::size_t n = std::fread(buf.data(), 1, buf.size(), pipe)) r.output.append(buf.data(), n);
  const int status = pclose(pipe);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  BOOST_TEST_MESSAGE("$ kiln " << args << "\n" << r.output);
  return r;
}

inline Result run_kiln_env(const std::string& environment, const std::string& args) {
  return run_kiln(args, "", environment);
}

inline bool has(const Result& r, const std::string& text) { return r.output.find(text) != std::string::npos; }

}  // namespace cli_test
