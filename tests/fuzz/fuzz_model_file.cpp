// libFuzzer target: compiled-model files (.kiln), read and decoded
// (artifact::read_model_file: the container, its CBOR metadata, every plan
// and graph in it) without a device. The input's checksum is recomputed
// first, so that mutations reach the metadata and the plans, as a forger's
// file would (the checksum proves a file whole, not who wrote it); and the
// digest of the kiln sources that wrote it is set to this build's, since a
// file from another build is refused before its plans are read (the seeds
// were written by an earlier build).
#include "fuzz_readers.h"
#include "src/artifact/kiln_source_digest.h"
#include "src/artifact/model_file.h"

#include <xxhash.h>

#include <algorithm>
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

// The metadata's "kiln_sources" value (CBOR: the key, then a text string
// of the digest's length) overwritten in place with this build's digest.
void set_source_digest(std::vector<std::uint8_t>& file) {
  static const std::string key = "\x6c" "kiln_sources";
  static const std::string digest = KILN_SOURCE_DIGEST;
  const auto at = std::search(file.begin(), file.end(), key.begin(), key.end());
  const std::size_t value = static_cast<std::size_t>(at - file.begin()) + key.size();
  if (at == file.end() || digest.size() > 23 || value + 1 + digest.size() > file.size()) return;
  if (file[value] != 0x60 + digest.size()) return;  // a text string of the digest's length
  std::copy(digest.begin(), digest.end(), file.begin() + static_cast<std::ptrdiff_t>(value + 1));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::uint8_t> file(data, data + size);
  set_source_digest(file);
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
