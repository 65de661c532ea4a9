#include "backends/cuda_style/rtc.h"

#include "src/base/check.h"

namespace kiln::backend::cuda_style {

void check_call(const RtcCalls& calls, int result, const char* call, const std::string& kernel) {
  if (result != 0)
    throw_error(ErrorKind::Internal,
                std::string(call) + " failed for kernel '" + kernel + "': " + calls.error_text(result));
}

CompiledProgram compile_program(const RtcCalls& calls, const KernelSource& source, const TargetDesc& target,
                                const std::vector<std::string>& options) {
  KILN_CHECK(source.language == calls.language, ErrorKind::Internal,
             "the " + calls.library + " compiler got kernel '" + source.name + "' in language '" + source.language +
                 "'");
  KILN_CHECK(target.backend == calls.backend, ErrorKind::Internal,
             "the " + calls.library + " compiler got a target of backend '" + target.backend + "' (" + target.arch +
                 ")");
  void* raw = nullptr;
  const std::string file_name = source.name + calls.file_extension;
  check_call(calls, calls.create_program(&raw, source.text.c_str(), file_name.c_str()), "create program",
             source.name);
  CompiledProgram compiled{Program(raw, calls.destroy_program), {}};

  std::vector<const char*> pointers;
  for (const std::string& option : options) pointers.push_back(option.c_str());
  const int result = calls.compile_program(raw, static_cast<int>(pointers.size()), pointers.data());
  std::size_t size = 0;
  check_call(calls, calls.log_size(raw, &size), "get program log size", source.name);
  std::string log(size, '\0');
  if (size > 0) check_call(calls, calls.log(raw, log.data()), "get program log", source.name);
  compiled.log = trim_log(std::move(log));
  if (result != 0)
    throw_error(ErrorKind::Internal, calls.library + " could not compile kernel '" + source.name + "' for " +
                                         target.arch + " (" + calls.error_text(result) + "); this is a kiln bug.\n" +
                                         compiled.log + "\n--- source ---\n" + numbered_source(source.text));
  return compiled;
}

}  // namespace kiln::backend::cuda_style
