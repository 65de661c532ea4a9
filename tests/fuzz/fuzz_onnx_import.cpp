// libFuzzer target: ONNX import from bytes, and from a file whose tensors may
// name external data in the model's folder.
//
// Every input must end in a Model or a kiln::Error that is a user error
// (Corrupt, Unsupported, ...). Anything else is a finding: another exception
// type, an internal error (ErrorKind::Internal), a crash, a sanitizer report,
// an allocation past libFuzzer's limit, a hang. Import runs with a small
// folding budget, as a service importing untrusted files would set.
#include <kiln/error.h>
#include <kiln/onnx.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <string_view>
#include <unistd.h>

namespace fs = std::filesystem;

namespace {

kiln::OnnxOptions fuzz_options() {
  kiln::OnnxOptions options;
  options.max_folded_bytes = std::int64_t{64} << 20;
  return options;
}

// A folder removed when the fuzzer exits.
struct TemporaryFolder {
  fs::path path;
  ~TemporaryFolder() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// The model's folder: files that external data may name (seeds use them).
const fs::path& model_folder() {
  static const TemporaryFolder folder{[] {
    const fs::path dir = fs::temp_directory_path() / ("kiln-fuzz-onnx-" + std::to_string(::getpid()));
    fs::create_directories(dir / "sub");
    std::string weights(4096, '\0');
    for (std::size_t i = 0; i < weights.size(); ++i) weights[i] = static_cast<char>(i * 131 % 251);
    std::ofstream(dir / "weights.bin", std::ios::binary) << weights;
    std::ofstream(dir / "sub" / "weights.bin", std::ios::binary) << weights.substr(0, 100);
    std::ofstream(dir / "empty.bin", std::ios::binary);
    std::error_code ec;
    fs::create_symlink("/dev/zero", dir / "zero.bin", ec);
    fs::create_symlink("/etc/hostname", dir / "outside.bin", ec);
    return dir;
  }()};
  return folder.path;
}

void import_checked(const char* how, auto&& import) {
  try {
    import();
  } catch (const kiln::Error& e) {
    if (e.is_user_error()) return;
    std::fprintf(stderr, "internal error importing %s: %s\n", how, e.what());
    std::abort();
  }
  // Any other exception escapes to libFuzzer, which reports it as a crash.
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  static const kiln::OnnxOptions options = fuzz_options();
  import_checked("from bytes", [&] { kiln::load_onnx_bytes(bytes, "fuzz.onnx", "", options); });
  // Only inputs that can name external data ("location" keys) go through a file.
  if (bytes.find("location") != std::string_view::npos) {
    const fs::path path = model_folder() / "model.onnx";
    std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(size));
    import_checked("from a file", [&] { kiln::load_onnx(path.string(), options); });
  }
  return 0;
}
