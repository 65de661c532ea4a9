// kiln: list devices, run a model on an image, explain what the compiler did,
// dump the generated kernels, benchmark eager against compiled, manage the
// tuning database.
#include "commands.h"

#include <kiln/error.h>

#include <iostream>

int main(int argc, char** argv) {
  CLI::App app{"kiln: compile neural networks into fast kernels for any GPU (Vulkan, CUDA, HIP)", "kiln"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "kiln 0.1.0");
  kiln::tools::add_devices_command(app);
  kiln::tools::add_run_command(app);
  kiln::tools::add_generate_command(app);
  kiln::tools::add_explain_command(app);
  kiln::tools::add_bench_command(app);
  kiln::tools::add_dump_command(app);
  kiln::tools::add_profile_command(app);
  kiln::tools::add_settings_command(app);
  kiln::tools::add_tune_command(app);
  kiln::tools::add_compile_command(app);
  kiln::tools::add_check_command(app);
  kiln::tools::add_cache_command(app);
  // A first word that is no command (a typo: `kiln rnu`) is named, with the
  // commands there are; CLI11 alone would only say that one is required.
  if (argc > 1 && argv[1][0] != '-' && kiln::tools::find_command(app, argv[1]) == nullptr) {
    std::cerr << "kiln: error: '" << argv[1] << "' is not a kiln command" << kiln::tools::suggest_command(app, argv[1])
              << "; the commands are: " << kiln::tools::command_list(app) << " (kiln --help describes them)\n";
    return 2;
  }
  if (argc == 1) {
    std::cerr << "kiln: error: a command is required: " << kiln::tools::command_list(app)
              << " (kiln --help describes them)\n";
    return 2;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  } catch (const kiln::Error& e) {
    if (e.is_user_error()) {
      std::cerr << "kiln: error: " << e.what() << "\n";
      return 2;
    }
    std::cerr << "kiln: internal error (a bug in kiln; please report it with the command line): " << e.what() << "\n";
    return 3;
  } catch (const std::exception& e) {
    std::cerr << "kiln: internal error (a bug in kiln; please report it): " << e.what() << "\n";
    return 3;
  }
  return 0;
}
