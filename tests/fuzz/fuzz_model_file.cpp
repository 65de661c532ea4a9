// libFuzzer target: compiled-model files (.kiln), read and decoded
// (artifact::read_model_file: the container, its CBOR metadata, every plan
// and graph in it) without a device. The input's checksum is recomputed
// first, so that mutations reach the metadata and the plans, as a forger's
// file would (the checksum proves a file whole, not who wrote it).
#include "fuzz_readers.h"
#include "src/artifact/model_file.h"

#include <xxhash.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <unistd.h>
#include <vector>

namespace {

constexpr std::size_t kHeaderBytes = 48;

void put_u64(std::uint8_t* at, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) at[i] = static_cast<std::uint8_t>(v >> (8 * i));
}

const std::filesystem::path& file_path() {
  static const std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("kiln-fuzz-model-" + std::to_string(::getpid()) + ".kiln");
  return path;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::uint8_t> file(data, data + size);
  if (file.size() >= kHeaderBytes) {
    const XXH128_hash_t digest = XXH3_128bits(file.data() + kHeaderBytes, file.size() - kHeaderBytes);
    put_u64(file.data() + 32, digest.high64);
    put_u64(file.data() + 40, digest.low64);
  }
  std::ofstream(file_path(), std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(file.data()), static_cast<std::streamsize>(file.size()));
  kiln::fuzz::expect_result_or_user_error("a .kiln file", [&] { kiln::artifact::read_model_file(file_path().string()); });
  return 0;
}
