#define BOOST_TEST_MODULE cli
#include <boost/test/unit_test.hpp>

// Runs the built `kiln` binary as a user would (KILN_BINARY, set by meson).

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <cstdlib>
#include <string>

namespace {

struct Result {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

std::string source_root() {
  const char* root = std::getenv("KILN_SOURCE_ROOT");
  BOOST_REQUIRE_MESSAGE(root != nullptr, "KILN_SOURCE_ROOT is not set (run through meson test)");
  return root;
}

Result kiln(const std::string& args) {
  const char* binary = std::getenv("KILN_BINARY");
  BOOST_REQUIRE_MESSAGE(binary != nullptr, "KILN_BINARY is not set (run through meson test)");
  const std::string command = "cd '" + source_root() + "' && '" + binary + "' " + args + " 2>&1";
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

bool has(const Result& r, const std::string& text) { return r.output.find(text) != std::string::npos; }

}  // namespace

BOOST_AUTO_TEST_CASE(help_lists_commands_and_every_command_has_help) {
  auto r = kiln("--help");
  BOOST_TEST(r.exit_code == 0);
  for (const char* command : {"devices", "run", "explain"}) {
    BOOST_TEST(has(r, command));
    auto sub = kiln(std::string(command) + " --help");
    BOOST_TEST(sub.exit_code == 0);
    BOOST_TEST(has(sub, "Usage"));
  }
  BOOST_TEST(has(kiln("run --help"), "--image"));
}

BOOST_AUTO_TEST_CASE(no_command_is_a_usage_error) {
  auto r = kiln("");
  BOOST_TEST(r.exit_code != 0);
  BOOST_TEST(has(r, "subcommand"));
}

BOOST_AUTO_TEST_CASE(devices_lists_every_backend_with_reason_or_devices) {
  auto r = kiln("devices");
  BOOST_TEST(r.exit_code == 0);
  BOOST_TEST(has(r, "vulkan: available"));
  BOOST_TEST(has(r, "max workgroup invocations"));
  BOOST_TEST(has(r, "null: unavailable: "));
  for (const char* b : {"cuda", "hip"}) {
    // Built in here; either available with devices or unavailable with a reason.
    BOOST_TEST((has(r, std::string(b) + ": available") || has(r, std::string(b) + ": unavailable: ")));
  }
}

BOOST_AUTO_TEST_CASE(devices_json_is_machine_readable) {
  auto r = kiln("devices --json");
  BOOST_TEST(r.exit_code == 0);
  BOOST_TEST(r.output.front() == '[');
  BOOST_TEST(has(r, "\"backend\": \"vulkan\""));
  BOOST_TEST(has(r, "\"available\": true"));
}

BOOST_AUTO_TEST_CASE(run_resnet18_on_a_photo) {
  auto r = kiln("run --model resnet18 --image data/images/chelsea.png --image-size 64 --iters 1");
  BOOST_TEST(r.exit_code == 0);
  BOOST_TEST(has(r, "top-5"));
  BOOST_TEST(has(r, "1. "));
  BOOST_TEST(has(r, "5. "));
  BOOST_TEST(has(r, "max |eager - compiled|"));
  BOOST_TEST(has(r, "eager"));
  BOOST_TEST(has(r, "compiled"));
  BOOST_TEST(has(r, "451x300"));
}

BOOST_AUTO_TEST_CASE(run_reduce_overhead_mode) {
  auto r = kiln("run --image data/images/coffee.png --image-size 32 --iters 2 --mode reduce-overhead --top 3");
  BOOST_TEST(r.exit_code == 0);
  BOOST_TEST(has(r, "reduce-overhead"));
  BOOST_TEST(has(r, "3. "));
}

BOOST_AUTO_TEST_CASE(user_errors_exit_2_with_a_clear_message) {
  auto missing = kiln("run --image no/such/file.png --image-size 32");
  BOOST_TEST(missing.exit_code == 2);
  BOOST_TEST(has(missing, "no/such/file.png"));

  auto not_image = kiln("run --image meson.build --image-size 32");
  BOOST_TEST(not_image.exit_code == 2);
  BOOST_TEST(has(not_image, "cannot decode image"));

  auto backend = kiln("run --backend metal --image-size 32");
  BOOST_TEST(backend.exit_code == 2);
  BOOST_TEST(has(backend, "unknown backend 'metal'"));

  auto model = kiln("run --model resnet9000 --image-size 32");
  BOOST_TEST(model.exit_code == 2);
  BOOST_TEST(has(model, "resnet18"));

  auto autotune = kiln("run --mode max-autotune --image-size 32");
  BOOST_TEST(autotune.exit_code == 2);
  BOOST_TEST(has(autotune, "max-autotune"));

  auto bad_option = kiln("run --image-size -5");
  BOOST_TEST(bad_option.exit_code != 0);
}

BOOST_AUTO_TEST_CASE(explain_shows_kernels_and_memory_plan) {
  auto r = kiln("explain --model resnet18 --image-size 32");
  BOOST_TEST(r.exit_code == 0);
  BOOST_TEST(has(r, "kernel"));
  BOOST_TEST(has(r, "memory:"));
  BOOST_TEST(has(r, "fc"));
}
