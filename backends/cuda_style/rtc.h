// The runtime compilers of the CUDA-style backends (NVRTC, hiprtc) share one
// compile: make a program of the source, compile it with the vendor's
// options, read its log, then its code. Their C APIs have the same shape but
// for the type names, so each vendor gives its library's calls as a table on
// an opaque program, and keeps what differs: the options, which targets it
// takes, and how it reads the code.
#pragma once

#include "backends/backend.h"

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kiln::backend::cuda_style {

// A runtime compiler whose library is opened at run time, so it may be missing.
class RuntimeCompiler : public KernelCompiler {
 public:
  // Why it cannot compile ("cannot load NVRTC: ..."); nullopt when it can.
  virtual std::optional<std::string> unavailable_reason() const = 0;
};

struct RtcCalls {
  std::string library;   // "NVRTC", for messages
  std::string backend;   // "cuda": the targets it compiles for
  std::string language;  // "cuda": the renderer's language it reads
  std::string file_extension;  // ".cu": the program's file name, in its messages
  // Each returns the library's result code: 0 is success.
  std::function<int(void** program, const char* source, const char* file_name)> create_program;
  std::function<void(void* program)> destroy_program;
  std::function<int(void* program, int count, const char* const* options)> compile_program;
  std::function<int(void* program, std::size_t* size)> log_size;
  std::function<int(void* program, char* log)> log;
  std::function<std::string(int result)> error_text;  // "NVRTC_ERROR_COMPILATION (6)"
};

// A failed call outside compilation proper (out of memory, a bad option) is
// a kiln bug or a broken toolkit, never a user error: Error(Internal).
void check_call(const RtcCalls& calls, int result, const char* call, const std::string& kernel);

using Program = std::unique_ptr<void, std::function<void(void*)>>;

struct CompiledProgram {
  Program program;  // for the vendor to read its code
  std::string log;  // the compiler's log, trimmed
};

// Checks that `source` and `target` are this compiler's (Error(Internal)),
// then compiles; throws Error(Internal) with the log and the numbered source
// when the source does not compile (a kiln bug).
CompiledProgram compile_program(const RtcCalls& calls, const KernelSource& source, const TargetDesc& target,
                                const std::vector<std::string>& options);

}  // namespace kiln::backend::cuda_style
