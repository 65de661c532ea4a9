// kiln::load_safetensors (include/kiln/safetensors.h): the format is an
// 8-byte little-endian header length, a JSON header
// {"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, ...,
// "__metadata__": {...}}, then the data section the offsets point into.
#include <kiln/error.h>
#include <kiln/safetensors.h>

#include "graph/checked_math.h"
#include "src/base/atomic_write.h"
#include "src/base/check.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <set>

namespace kiln {
namespace {

// A header this long is not a checkpoint's (the largest real ones are a few
// MB: one entry per tensor).
constexpr std::uint64_t kMaxHeaderBytes = 100u << 20;

// A private mapping of a whole file, unmapped with its last tensor. Its pages
// are writable copy-on-write: a caller writing a loaded tensor changes its
// own copy of the page, never the file.
struct Mapping {
  void* address = MAP_FAILED;
  std::size_t size = 0;
  ~Mapping() {
    if (address != MAP_FAILED) munmap(address, size);
  }
  std::byte* bytes() const { return static_cast<std::byte*>(address); }
};

std::shared_ptr<Mapping> map_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  KILN_CHECK(fd >= 0, ErrorKind::Io, "cannot open '" + path + "': " + std::strerror(errno));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    throw_error(ErrorKind::Io, "cannot read '" + path + "': " + std::strerror(err));
  }
  auto mapping = std::make_shared<Mapping>();
  mapping->size = static_cast<std::size_t>(st.st_size);
  if (mapping->size > 0) {
    mapping->address = ::mmap(nullptr, mapping->size, PROT_READ | PROT_WRITE, MAP_PRIVATE, fd, 0);
    const int err = errno;
    ::close(fd);
    KILN_CHECK(mapping->address != MAP_FAILED, ErrorKind::Io, "cannot map '" + path + "': " + std::strerror(err));
  } else {
    ::close(fd);
  }
  return mapping;
}

std::optional<DType> dtype_of(const std::string& name) {
  static const std::map<std::string, DType> kTypes = {
      {"F32", DType::f32}, {"F16", DType::f16}, {"BF16", DType::bf16}, {"I64", DType::i64},
      {"I32", DType::i32}, {"U8", DType::u8},   {"BOOL", DType::boolean}};
  const auto it = kTypes.find(name);
  return it == kTypes.end() ? std::nullopt : std::optional(it->second);
}

// A JSON integer in [0, 2^63).
bool is_size(const nlohmann::json& value) {
  if (value.is_number_unsigned())
    return value.get<std::uint64_t>() <= static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max());
  return value.is_number_integer() && value.get<std::int64_t>() >= 0;
}

struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  std::uint64_t begin = 0, end = 0;
};

Entry parse_entry(const std::string& path, const std::string& name, const nlohmann::json& value) {
  const std::string where = path + ": tensor '" + name + "'";
  KILN_CHECK(value.is_object(), ErrorKind::Corrupt, where + ": its header entry is not an object");
  const auto dtype = value.find("dtype");
  const auto shape = value.find("shape");
  const auto offsets = value.find("data_offsets");
  KILN_CHECK(dtype != value.end() && dtype->is_string(), ErrorKind::Corrupt, where + ": no \"dtype\" string");
  KILN_CHECK(shape != value.end() && shape->is_array(), ErrorKind::Corrupt, where + ": no \"shape\" list");
  KILN_CHECK(offsets != value.end() && offsets->is_array() && offsets->size() == 2, ErrorKind::Corrupt,
             where + ": no \"data_offsets\" [begin, end]");
  Entry entry;
  entry.name = name;
  const std::optional<DType> type = dtype_of(dtype->get<std::string>());
  KILN_CHECK(type.has_value(), ErrorKind::Unsupported,
             where + ": dtype " + dtype->get<std::string>() + " is not one kiln reads (F32, F16, BF16, I64, I32, U8, BOOL)");
  entry.dtype = *type;
  for (const nlohmann::json& d : *shape) {
    KILN_CHECK(is_size(d), ErrorKind::Corrupt,
               where + ": shape " + shape->dump() + " has a dim that is not a non-negative integer below 2^63");
    entry.shape.push_back(d.get<std::int64_t>());
  }
  for (const nlohmann::json& o : *offsets)
    KILN_CHECK(is_size(o), ErrorKind::Corrupt,
               where + ": data_offsets " + offsets->dump() + " are not non-negative integers");
  entry.begin = (*offsets)[0].get<std::uint64_t>();
  entry.end = (*offsets)[1].get<std::uint64_t>();
  KILN_CHECK(entry.begin <= entry.end, ErrorKind::Corrupt, where + ": data_offsets " + offsets->dump() + " end before they begin");
  const std::optional<std::int64_t> elements = graph::checked_product(entry.shape);
  KILN_CHECK(elements.has_value(), ErrorKind::Corrupt, where + ": shape " + shape->dump() + " overflows");
  const std::optional<std::int64_t> bytes = graph::checked_mul(*elements, static_cast<std::int64_t>(dtype_size(entry.dtype)));
  KILN_CHECK(bytes.has_value() && static_cast<std::uint64_t>(*bytes) == entry.end - entry.begin, ErrorKind::Corrupt,
             where + ": " + dtype->get<std::string>() + " " + shape->dump() + " needs " +
                 (bytes ? std::to_string(*bytes) : std::string("more than 2^63")) + " bytes, its data_offsets " +
                 offsets->dump() + " hold " + std::to_string(entry.end - entry.begin));
  return entry;
}

std::string safetensors_name(DType dtype) {
  switch (dtype) {
    case DType::f32: return "F32";
    case DType::f16: return "F16";
    case DType::bf16: return "BF16";
    case DType::i64: return "I64";
    case DType::i32: return "I32";
    case DType::u8: return "U8";
    case DType::boolean: return "BOOL";
  }
  throw_error(ErrorKind::Internal, "safetensors_name: dtype " + std::to_string(static_cast<int>(dtype)));
}

}  // namespace

void save_safetensors(const std::string& path, const std::map<std::string, Tensor>& tensors) {
  std::vector<const std::pair<const std::string, Tensor>*> order;
  for (const auto& entry : tensors) order.push_back(&entry);
  std::ranges::stable_sort(order, std::greater<>{}, [](const auto* e) { return dtype_size(e->second.dtype()); });
  nlohmann::json header = nlohmann::json::object();
  header["__metadata__"] = {{"format", "pt"}};
  std::uint64_t offset = 0;
  for (const auto* e : order) {
    const std::uint64_t bytes = e->second.nbytes();
    header[e->first] = {{"dtype", safetensors_name(e->second.dtype())},
                        {"shape", e->second.shape()},
                        {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');  // the data section starts 8-byte aligned
  base::write_file_atomically(path, [&](std::ostream& out) {
    char length[8];
    for (int i = 0; i < 8; ++i) length[i] = static_cast<char>((static_cast<std::uint64_t>(text.size()) >> (8 * i)) & 0xff);
    out.write(length, 8);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
    for (const auto* e : order) {
      const auto data = e->second.bytes();
      out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
    }
  });
}

std::map<std::string, Tensor> load_safetensors(const std::string& path) {
  const std::shared_ptr<Mapping> mapping = map_file(path);
  KILN_CHECK(mapping->size >= 8, ErrorKind::Corrupt,
             path + ": " + std::to_string(mapping->size) + " bytes, too short for a .safetensors header");
  std::uint64_t header_bytes = 0;
  for (int i = 7; i >= 0; --i) header_bytes = header_bytes << 8 | std::to_integer<std::uint8_t>(mapping->bytes()[i]);
  KILN_CHECK(header_bytes <= kMaxHeaderBytes && header_bytes <= mapping->size - 8, ErrorKind::Corrupt,
             path + ": the header length " + std::to_string(header_bytes) + " does not fit the file's " +
                 std::to_string(mapping->size) + " bytes (is it a .safetensors file?)");
  const char* header_text = reinterpret_cast<const char*>(mapping->bytes() + 8);
  nlohmann::json header = nlohmann::json::parse(header_text, header_text + header_bytes, nullptr, false);
  KILN_CHECK(!header.is_discarded() && header.is_object(), ErrorKind::Corrupt,
             path + ": the header is not a JSON object");

  const std::uint64_t data_begin = 8 + header_bytes;
  const std::uint64_t data_bytes = mapping->size - data_begin;
  std::vector<Entry> entries;
  for (const auto& [name, value] : header.items()) {
    if (name == "__metadata__") continue;
    Entry entry = parse_entry(path, name, value);
    KILN_CHECK(entry.end <= data_bytes, ErrorKind::Corrupt,
               path + ": tensor '" + name + "': data_offsets [" + std::to_string(entry.begin) + ", " +
                   std::to_string(entry.end) + "] run past the data section's " + std::to_string(data_bytes) +
                   " bytes (a truncated file?)");
    entries.push_back(std::move(entry));
  }
  // No two tensors share bytes (empty tensors occupy none).
  std::vector<const Entry*> by_offset;
  for (const Entry& e : entries)
    if (e.end > e.begin) by_offset.push_back(&e);
  std::ranges::sort(by_offset, {}, [](const Entry* e) { return e->begin; });
  for (std::size_t i = 1; i < by_offset.size(); ++i)
    KILN_CHECK(by_offset[i]->begin >= by_offset[i - 1]->end, ErrorKind::Corrupt,
               path + ": tensors '" + by_offset[i - 1]->name + "' and '" + by_offset[i]->name + "' overlap");

  std::map<std::string, Tensor> tensors;
  for (const Entry& e : entries) {
    const std::size_t size = e.end - e.begin;
    std::byte* data = mapping->bytes() + data_begin + e.begin;
    const bool aligned = reinterpret_cast<std::uintptr_t>(data) % dtype_size(e.dtype) == 0;
    if (aligned && size > 0 && e.dtype != DType::boolean) {
      std::shared_ptr<std::byte> view(mapping, data);
      tensors.emplace(e.name, Tensor::wrap(e.dtype, e.shape, std::move(view), size));
      continue;
    }
    Tensor copy(e.dtype, e.shape);
    if (size > 0) std::memcpy(copy.bytes().data(), data, size);
    if (e.dtype == DType::boolean)
      for (std::byte& b : copy.bytes()) b = static_cast<std::byte>(b != std::byte{0});
    tensors.emplace(e.name, std::move(copy));
  }
  return tensors;
}

std::map<std::string, Tensor> load_safetensors_checkpoint(const std::string& folder) {
  namespace fs = std::filesystem;
  const fs::path dir(folder);
  const fs::path single = dir / "model.safetensors";
  const fs::path index_path = dir / "model.safetensors.index.json";
  std::error_code ec;
  if (fs::exists(single, ec)) return load_safetensors(single.string());
  KILN_CHECK(fs::exists(index_path, ec), ErrorKind::NotFound,
             "'" + folder + "' has no model.safetensors and no model.safetensors.index.json (kiln reads "
                            "Hugging Face checkpoints saved as safetensors)");
  std::ifstream in(index_path);
  KILN_CHECK(in.good(), ErrorKind::Io, "cannot read '" + index_path.string() + "'");
  const nlohmann::json index = nlohmann::json::parse(in, nullptr, false);
  const auto map = index.is_object() ? index.find("weight_map") : index.end();
  KILN_CHECK(map != index.end() && map->is_object(), ErrorKind::Corrupt,
             index_path.string() + ": no \"weight_map\" object");
  std::map<std::string, std::set<std::string>> names_of_shard;
  for (const auto& [name, shard] : map->items()) {
    KILN_CHECK(shard.is_string(), ErrorKind::Corrupt, index_path.string() + ": tensor '" + name + "' has no shard file name");
    const std::string file = shard.get<std::string>();
    KILN_CHECK(!file.empty() && fs::path(file).filename() == fs::path(file), ErrorKind::Corrupt,
               index_path.string() + ": tensor '" + name + "': shard '" + file + "' is not a file name in the folder");
    names_of_shard[file].insert(name);
  }
  std::map<std::string, Tensor> tensors;
  for (const auto& [file, names] : names_of_shard) {
    const std::string path = (dir / file).string();
    KILN_CHECK(fs::exists(path, ec), ErrorKind::NotFound, index_path.string() + " names shard '" + file + "', which is missing");
    for (auto& [name, tensor] : load_safetensors(path)) {
      KILN_CHECK(names.contains(name), ErrorKind::Corrupt,
                 path + ": holds tensor '" + name + "', which the index assigns to another shard or none");
      tensors.emplace(name, std::move(tensor));
    }
    for (const std::string& name : names)
      KILN_CHECK(tensors.contains(name), ErrorKind::Corrupt,
                 index_path.string() + ": tensor '" + name + "' is not in its shard '" + file + "'");
  }
  return tensors;
}

}  // namespace kiln
