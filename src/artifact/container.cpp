#include "src/artifact/container.h"

#include "src/artifact/cbor_shape.h"
#include "src/base/atomic_write.h"
#include "src/base/cache_key.h"
#include "src/base/check.h"
#include "src/base/file_type.h"

#include <kiln/error.h>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <new>

namespace kiln::artifact {
namespace {

using base::hex_digest;

constexpr std::size_t kHeaderBytes = 48;
constexpr char kMagic[4] = {'K', 'I', 'L', 'N'};
// Metadata is small (the graph's structure, kernel sources); anything larger
// in a header is damage, not a model.
constexpr std::uint64_t kMaxMetadataBytes = 1ull << 30;

void put_u32(std::byte* at, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) at[i] = static_cast<std::byte>(v >> (8 * i));
}
void put_u64(std::byte* at, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) at[i] = static_cast<std::byte>(v >> (8 * i));
}
std::uint32_t get_u32(const std::byte* at) {
  std::uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<std::uint32_t>(at[i]) << (8 * i);
  return v;
}
std::uint64_t get_u64(const std::byte* at) {
  std::uint64_t v = 0;
  for (int i = 0; i < 8; ++i) v |= static_cast<std::uint64_t>(at[i]) << (8 * i);
  return v;
}


std::string kind_text(const std::byte* at) {
  std::string text;
  for (int i = 0; i < 4; ++i) {
    const auto c = static_cast<unsigned char>(at[i]);
    text += (c >= 0x20 && c < 0x7f) ? static_cast<char>(c) : '?';
  }
  return text;
}

std::uint64_t align_up(std::uint64_t n) { return (n + kBlobAlignment - 1) / kBlobAlignment * kBlobAlignment; }

// Memory for a whole file, aligned like its blobs and not zero-filled.
std::shared_ptr<std::byte> allocate_aligned(std::size_t size) {
  constexpr auto alignment = std::align_val_t{kBlobAlignment};
  return std::shared_ptr<std::byte>(static_cast<std::byte*>(::operator new(std::max<std::size_t>(size, 1), alignment)),
                                    [](std::byte* p) { ::operator delete(p, alignment); });
}

// The file mapped read-only (private) with its pages read in; nullptr where
// the system will not map it (the caller reads it instead).
std::shared_ptr<std::byte> map_private(const std::filesystem::path& path, std::size_t size) {
  if (size == 0) return nullptr;
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return nullptr;
  // Read-only: populating a writable private mapping costs as much as reading
  // the file; a read-only one a small fraction (docs/benchmarks/warm-start.md).
  void* p = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd, 0);
  ::close(fd);  // the mapping keeps the file
  if (p == MAP_FAILED) return nullptr;
  return std::shared_ptr<std::byte>(static_cast<std::byte*>(p), [size](std::byte* q) { ::munmap(q, size); });
}

}  // namespace

std::uint64_t BlobWriter::add(std::span<const std::byte> bytes) {
  if (external_ != nullptr && bytes.size() >= threshold_) return kExternalBlobBase + external_->add(bytes);
  std::string digest = hex_digest(XXH3_128bits(bytes.data(), bytes.size())) + ":" + std::to_string(bytes.size());
  if (auto it = by_digest_.find(digest); it != by_digest_.end()) return it->second;
  const std::uint64_t index = blobs_.size();
  const std::uint64_t offset = align_up(total_);
  blobs_.push_back({offset, std::vector<std::byte>(bytes.begin(), bytes.end())});
  total_ = offset + bytes.size();
  digests_.push_back(digest);
  by_digest_.emplace(std::move(digest), index);
  return index;
}


void write_container(const std::filesystem::path& path, std::string_view kind, const nlohmann::json& metadata,
                     const BlobWriter& blobs) {
  KILN_ASSERT(kind.size() == 4);
  nlohmann::json with_table = metadata;
  nlohmann::json table = nlohmann::json::array();
  for (const BlobWriter::Entry& blob : blobs.blobs_) table.push_back({blob.offset, blob.bytes.size()});
  with_table["blobs"] = std::move(table);
  const std::vector<std::uint8_t> cbor = nlohmann::json::to_cbor(with_table);
  // Zeros after the metadata and between blobs put every blob at a multiple
  // of kBlobAlignment from the file's start.
  const std::vector<std::byte> zeros(kBlobAlignment);
  const std::uint64_t metadata_padding = align_up(kHeaderBytes + cbor.size()) - (kHeaderBytes + cbor.size());
  std::vector<std::uint64_t> padding_before;  // of each blob
  for (std::uint64_t end = 0; const BlobWriter::Entry& blob : blobs.blobs_) {
    padding_before.push_back(blob.offset - end);
    end = blob.offset + blob.bytes.size();
  }

  XXH3_state_t* state = XXH3_createState();
  KILN_ASSERT(state != nullptr);
  XXH3_128bits_reset(state);
  XXH3_128bits_update(state, cbor.data(), cbor.size());
  XXH3_128bits_update(state, zeros.data(), metadata_padding);
  for (std::size_t i = 0; i < blobs.blobs_.size(); ++i) {
    XXH3_128bits_update(state, zeros.data(), padding_before[i]);
    XXH3_128bits_update(state, blobs.blobs_[i].bytes.data(), blobs.blobs_[i].bytes.size());
  }
  const XXH128_hash_t digest = XXH3_128bits_digest(state);
  XXH3_freeState(state);

  std::byte header[kHeaderBytes] = {};
  std::memcpy(header, kMagic, 4);
  std::memcpy(header + 4, kind.data(), 4);
  put_u32(header + 8, kContainerVersion);
  put_u64(header + 16, cbor.size());
  put_u64(header + 24, blobs.total_bytes());
  put_u64(header + 32, digest.high64);
  put_u64(header + 40, digest.low64);

  base::write_file_atomically(path, [&](std::ostream& out) {
    out.write(reinterpret_cast<const char*>(header), kHeaderBytes);
    out.write(reinterpret_cast<const char*>(cbor.data()), static_cast<std::streamsize>(cbor.size()));
    out.write(reinterpret_cast<const char*>(zeros.data()), static_cast<std::streamsize>(metadata_padding));
    for (std::size_t i = 0; i < blobs.blobs_.size(); ++i) {
      const BlobWriter::Entry& blob = blobs.blobs_[i];
      out.write(reinterpret_cast<const char*>(zeros.data()), static_cast<std::streamsize>(padding_before[i]));
      out.write(reinterpret_cast<const char*>(blob.bytes.data()), static_cast<std::streamsize>(blob.bytes.size()));
    }
  });
}

std::span<const std::byte> Container::blob(std::uint64_t index, std::string_view what) const {
  if (index >= kExternalBlobBase) {
    KILN_CHECK(index - kExternalBlobBase < external_.size(), ErrorKind::Corrupt,
               "'" + path_ + "': " + std::string(what) + " refers to shared weight " +
                   std::to_string(index - kExternalBlobBase) + " of " + std::to_string(external_.size()));
    return external_[index - kExternalBlobBase]->blob(0, what);
  }
  KILN_CHECK(index < blobs_.size(), ErrorKind::Corrupt,
             "'" + path_ + "': " + std::string(what) + " refers to blob " + std::to_string(index) + " of " +
                 std::to_string(blobs_.size()));
  const auto [offset, size] = blobs_[index];
  return std::span<const std::byte>(bytes_.get(), size_).subspan(offset, size);
}

std::shared_ptr<std::byte> Container::shared_blob(std::uint64_t index, std::string_view what) const {
  if (index >= kExternalBlobBase && index - kExternalBlobBase < external_.size())
    return external_[index - kExternalBlobBase]->shared_blob(0, what);
  const std::span<const std::byte> bytes = blob(index, what);
  return std::shared_ptr<std::byte>(bytes_, bytes_.get() + (bytes.data() - bytes_.get()));
}

Container read_container(const std::filesystem::path& path, std::string_view kind, FileHolding holding) {
  const std::string name = "'" + path.string() + "'";
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    KILN_CHECK(errno != ENOENT, ErrorKind::NotFound, "no such file: " + name);
    throw_error(ErrorKind::Io, "cannot read " + name + ": " + std::strerror(errno));
  }
  KILN_CHECK(S_ISREG(st.st_mode), ErrorKind::Io, "cannot read " + name + ": " + base::file_type_name(st.st_mode));

  Container c;
  c.path_ = path.string();
  c.size_ = static_cast<std::size_t>(st.st_size);
  if (holding == FileHolding::map) c.bytes_ = map_private(path, c.size_);
  if (!c.bytes_) {
    std::ifstream in(path, std::ios::binary);
    KILN_CHECK(in.good(), ErrorKind::Io, "cannot open " + name);
    c.bytes_ = allocate_aligned(c.size_);
    in.read(reinterpret_cast<char*>(c.bytes_.get()), static_cast<std::streamsize>(c.size_));
    KILN_CHECK(static_cast<std::size_t>(in.gcount()) == c.size_, ErrorKind::Io, "cannot read all of " + name);
  }
  const std::byte* h = c.bytes_.get();
  KILN_CHECK(c.size_ >= kHeaderBytes && std::memcmp(h, kMagic, 4) == 0, ErrorKind::Corrupt,
             name + " is not a kiln file (no KILN header)");
  KILN_CHECK(std::memcmp(h + 4, kind.data(), 4) == 0, ErrorKind::Corrupt,
             name + " is a kiln file of kind '" + kind_text(h + 4) + "', not '" + std::string(kind) + "'");
  const std::uint32_t version = get_u32(h + 8);
  KILN_CHECK(version == kContainerVersion, ErrorKind::Corrupt,
             name + " has container version " + std::to_string(version) + "; this kiln reads version " +
                 std::to_string(kContainerVersion) + ": write it again with this kiln");
  const std::uint64_t metadata_bytes = get_u64(h + 16);
  const std::uint64_t blob_bytes = get_u64(h + 24);
  const std::uint64_t body = c.size_ - kHeaderBytes;
  KILN_CHECK(metadata_bytes <= kMaxMetadataBytes && blob_bytes <= body &&
                 align_up(kHeaderBytes + metadata_bytes) == c.size_ - blob_bytes,
             ErrorKind::Corrupt,
             name + " is truncated or damaged: the header announces " + std::to_string(metadata_bytes) + " + " +
                 std::to_string(blob_bytes) + " bytes (with alignment), the file holds " + std::to_string(body));
  const XXH128_hash_t digest = XXH3_128bits(h + kHeaderBytes, body);
  KILN_CHECK(digest.high64 == get_u64(h + 32) && digest.low64 == get_u64(h + 40), ErrorKind::Corrupt,
             name + " fails its checksum: the file was altered or damaged");

  const auto* meta = reinterpret_cast<const std::uint8_t*>(h + kHeaderBytes);
  // The checksum proves the file whole, not that its writer was kiln.
  const std::optional<std::string> shape = cbor_shape_problem({meta, static_cast<std::size_t>(metadata_bytes)});
  KILN_CHECK(!shape, ErrorKind::Corrupt, name + " has malformed metadata: " + shape.value_or(""));
  try {
    c.metadata_ = nlohmann::json::from_cbor(meta, meta + metadata_bytes, true, false);
  } catch (const nlohmann::json::exception& e) {
    throw_error(ErrorKind::Corrupt, name + " has malformed metadata: " + e.what());
  }
  KILN_CHECK(!c.metadata_.is_discarded() && c.metadata_.is_object(), ErrorKind::Corrupt,
             name + " has malformed metadata");
  const auto table = c.metadata_.find("blobs");
  KILN_CHECK(table != c.metadata_.end() && table->is_array(), ErrorKind::Corrupt, name + " has no blob table");
  const std::uint64_t blobs_at = align_up(kHeaderBytes + metadata_bytes);
  for (const nlohmann::json& entry : *table) {
    KILN_CHECK(entry.is_array() && entry.size() == 2 && entry[0].is_number_unsigned() && entry[1].is_number_unsigned(),
               ErrorKind::Corrupt, name + " has a malformed blob table");
    const std::uint64_t offset = entry[0].get<std::uint64_t>();
    const std::uint64_t size = entry[1].get<std::uint64_t>();
    KILN_CHECK(offset <= blob_bytes && size <= blob_bytes - offset, ErrorKind::Corrupt,
               name + " has a blob past the end of the file");
    c.blobs_.emplace_back(blobs_at + offset, size);
  }
  return c;
}

}  // namespace kiln::artifact
