// libFuzzer target: Hugging Face checkpoints. The first byte picks what the
// rest is: a .safetensors file (even), or the config.json of a folder whose
// model.safetensors is the GPT-2 fixture's tensors (odd), loaded with
// load_causal_lm and built into a step model.
//
// Every input must end in tensors, a model, or a kiln::Error that is a user
// error (Corrupt, Unsupported, ...). Anything else is a finding: another
// exception type, an internal error, a crash, a sanitizer report, an
// allocation past libFuzzer's limit, a hang.
#include <kiln/causal_lm.h>
#include <kiln/error.h>
#include <kiln/safetensors.h>

#include "fuzz_readers.h"

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

struct TemporaryFolder {
  fs::path path;
  ~TemporaryFolder() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// A folder with a small GPT-2 checkpoint's weights (2 layers, 16 wide, vocabulary 8, 8 positions).
const fs::path& checkpoint_folder() {
  static const TemporaryFolder folder{[] {
    const fs::path dir = fs::temp_directory_path() / ("kiln-fuzz-checkpoint-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    std::map<std::string, kiln::Tensor> weights;
    const auto add = [&](const std::string& name, kiln::Shape shape) {
      kiln::Tensor t(kiln::DType::f32, shape);
      float x = 0.1f;
      for (float& v : t.values<float>()) v = (x = x * 1.7f - static_cast<float>(static_cast<int>(x * 1.7f)));
      weights.emplace(name, t);
    };
    add("transformer.wte.weight", {8, 16});
    add("transformer.wpe.weight", {8, 16});
    for (const char* l : {"0", "1"}) {
      const std::string b = std::string("transformer.h.") + l + ".";
      for (const char* ln : {"ln_1", "ln_2"}) add(b + ln + ".weight", {16}), add(b + ln + ".bias", {16});
      add(b + "attn.c_attn.weight", {16, 48}), add(b + "attn.c_attn.bias", {48});
      add(b + "attn.c_proj.weight", {16, 16}), add(b + "attn.c_proj.bias", {16});
      add(b + "mlp.c_fc.weight", {16, 64}), add(b + "mlp.c_fc.bias", {64});
      add(b + "mlp.c_proj.weight", {64, 16}), add(b + "mlp.c_proj.bias", {16});
    }
    add("transformer.ln_f.weight", {16}), add("transformer.ln_f.bias", {16});
    kiln::save_safetensors((dir / "model.safetensors").string(), weights);
    return dir;
  }()};
  return folder.path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return 0;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  const fs::path& dir = checkpoint_folder();
  if (data[0] % 2 == 0) {
    const fs::path path = dir / "fuzz.safetensors";
    std::ofstream(path, std::ios::binary | std::ios::trunc).write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    kiln::fuzz::expect_result_or_user_error("a .safetensors file", [&] { kiln::load_safetensors(path.string()); });
    return 0;
  }
  std::ofstream(dir / "config.json", std::ios::binary | std::ios::trunc)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  kiln::fuzz::expect_result_or_user_error("a config.json", [&] {
    const kiln::CausalLM lm = kiln::load_causal_lm(dir.string());
    lm.step_model(1, 1, std::min<std::int64_t>(lm.config().max_positions, 8));
  });
  return 0;
}
