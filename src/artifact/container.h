// The file container of compiled-model files (.kiln) and cached plans: a
// fixed header, metadata as CBOR, then raw blobs (weights, kernel binaries)
// that the metadata refers to by index. Every byte after the header is
// covered by a checksum, so a truncated or altered file is reported, never
// parsed; writes go to a temporary file that is renamed into place.
//
//   offset  size  field
//   0       4     magic "KILN"
//   4       4     kind ("MODL" a compiled-model file, "PLAN" a cached plan)
//   8       4     container version (little-endian u32)
//   12      4     reserved, 0
//   16      8     metadata bytes (u64)
//   24      8     blob bytes (u64, from the first blob to the end of the file)
//   32      16    XXH3-128 of everything after the header
//   48            metadata (CBOR), zeros up to a multiple of kBlobAlignment,
//                 then the blobs, each at a multiple of kBlobAlignment
//
// Aligned blobs let a reader use weights where they lie in the read file
// (Tensor::wrap) instead of copying them into new memory.
#pragma once

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace kiln::artifact {

inline constexpr std::uint32_t kContainerVersion = 2;
inline constexpr std::uint64_t kBlobAlignment = 64;

// Blob indices from here on name blobs of other containers attached to the
// reader (Container::attach_external): a cached plan's weights, a file per
// weight shared by every plan that holds it (a model's shape sets and
// settings).
inline constexpr std::uint64_t kExternalBlobBase = std::uint64_t{1} << 40;

// Collects blobs for a file; equal contents are stored once (weights shared
// by several targets' plans).
class BlobWriter {
 public:
  BlobWriter() = default;
  // Blobs of `threshold` bytes or more go to `external` (a weights file), and
  // their indices start at kExternalBlobBase.
  BlobWriter(BlobWriter* external, std::uint64_t threshold) : external_(external), threshold_(threshold) {}

  // The blob's index, for the metadata.
  std::uint64_t add(std::span<const std::byte> bytes);
  std::uint64_t total_bytes() const { return total_; }
  std::size_t size() const { return blobs_.size(); }
  bool empty() const { return blobs_.empty(); }
  // Blob `index`'s bytes and their digest (hex XXH3-128 and the size): a
  // name for a file holding exactly that blob.
  std::span<const std::byte> bytes(std::size_t index) const { return blobs_.at(index).bytes; }
  const std::string& digest(std::size_t index) const { return digests_.at(index); }

 private:
  friend void write_container(const std::filesystem::path&, std::string_view, const nlohmann::json&,
                              const BlobWriter&);
  struct Entry {
    std::uint64_t offset = 0;
    std::vector<std::byte> bytes;
  };
  std::vector<Entry> blobs_;
  std::unordered_map<std::string, std::uint64_t> by_digest_;
  std::vector<std::string> digests_;  // per blob, in order
  std::uint64_t total_ = 0;
  BlobWriter* external_ = nullptr;
  std::uint64_t threshold_ = 0;
};

// How read_container holds a file's bytes: read into memory of its own, or
// mapped read-only, which skips copying the whole file (a cached plan with
// its weights runs to hundreds of MB). Map only files whose blobs nothing
// writes to and that are replaced by rename, never rewritten in place, as
// kiln's plan cache is: a mapped file truncated or rewritten under its
// reader faults on access or changes weights after their checksum, so a
// user's compiled-model file (which `cp` may overwrite) is read.
enum class FileHolding { read, map };

// A file read and checked whole: its metadata and its blobs.
class Container {
 public:
  const nlohmann::json& metadata() const { return metadata_; }
  // Throws Corrupt naming `what` when `index` is not a blob of the file.
  std::span<const std::byte> blob(std::uint64_t index, std::string_view what) const;
  // The same bytes, sharing ownership of the read file (which they keep in
  // memory): for tensors that use weights where they lie.
  std::shared_ptr<std::byte> shared_blob(std::uint64_t index, std::string_view what) const;
  const std::string& path() const { return path_; }
  // Blob kExternalBlobBase + k is the first blob of `external[k]` (a cached
  // plan's weight files).
  void attach_external(std::vector<std::shared_ptr<const Container>> external) { external_ = std::move(external); }

 private:
  friend Container read_container(const std::filesystem::path&, std::string_view, FileHolding);
  std::string path_;
  nlohmann::json metadata_;
  // The whole file, mapped or read into memory that is not zero-filled first,
  // aligned to kBlobAlignment.
  std::shared_ptr<std::byte> bytes_;
  std::size_t size_ = 0;
  std::vector<std::pair<std::uint64_t, std::uint64_t>> blobs_;  // offset into bytes_, size
  std::vector<std::shared_ptr<const Container>> external_;
};

// Writes atomically (a temporary file beside `path`, then a rename); the
// metadata gets the blob table. Throws Io naming the file.
void write_container(const std::filesystem::path& path, std::string_view kind, const nlohmann::json& metadata,
                     const BlobWriter& blobs);

// Reads and checks a file of `kind`. Throws NotFound (no such file), Io
// (unreadable, not a regular file) or Corrupt (another kind of file, another
// container version, truncated, checksum mismatch, malformed metadata), each
// naming the file.
Container read_container(const std::filesystem::path& path, std::string_view kind,
                         FileHolding holding = FileHolding::read);

}  // namespace kiln::artifact
