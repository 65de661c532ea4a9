#include "graph/onnx/tensor_proto.h"

#include "graph/onnx/limits.h"
#include "src/base/check.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <system_error>
#include <filesystem>
#include <fstream>

namespace kiln::onnx_import {

std::optional<DType> dtype_from_onnx(int onnx_type) {
  switch (onnx_type) {
    case onnx::TensorProto_DataType_FLOAT: return DType::f32;
    case onnx::TensorProto_DataType_FLOAT16: return DType::f16;
    case onnx::TensorProto_DataType_BFLOAT16: return DType::bf16;
    case onnx::TensorProto_DataType_INT32: return DType::i32;
    case onnx::TensorProto_DataType_INT64: return DType::i64;
    case onnx::TensorProto_DataType_UINT8: return DType::u8;
    case onnx::TensorProto_DataType_BOOL: return DType::boolean;
    default: return std::nullopt;
  }
}

int onnx_from_dtype(DType dtype) {
  switch (dtype) {
    case DType::f32: return onnx::TensorProto_DataType_FLOAT;
    case DType::f16: return onnx::TensorProto_DataType_FLOAT16;
    case DType::bf16: return onnx::TensorProto_DataType_BFLOAT16;
    case DType::i32: return onnx::TensorProto_DataType_INT32;
    case DType::i64: return onnx::TensorProto_DataType_INT64;
    case DType::u8: return onnx::TensorProto_DataType_UINT8;
    case DType::boolean: return onnx::TensorProto_DataType_BOOL;
  }
  return onnx::TensorProto_DataType_UNDEFINED;
}

std::string onnx_type_name(int onnx_type) {
  if (onnx::TensorProto_DataType_IsValid(onnx_type))
    return onnx::TensorProto_DataType_Name(static_cast<onnx::TensorProto_DataType>(onnx_type));
  return "type " + std::to_string(onnx_type);
}

namespace {

struct ExternalRef {
  std::string location;
  std::int64_t offset = 0;
  std::int64_t length = -1;  // -1: to the end of the file
};

// A byte count of external data: decimal digits only (no sign, no spaces),
// within int64; anything else is Corrupt, naming the key and the text.
std::int64_t parse_count(const std::string& text, const std::string& key, const std::string& what) {
  const std::string shown = "'" + text.substr(0, 40) + (text.size() > 40 ? "...'" : "'");
  KILN_CHECK(!text.empty() && text.find_first_not_of("0123456789") == std::string::npos, ErrorKind::Corrupt,
             what + "external data '" + key + "' is not a non-negative integer: " + shown);
  std::int64_t value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  KILN_CHECK(ec != std::errc::result_out_of_range, ErrorKind::Corrupt,
             what + "external data '" + key + "' " + shown + " is larger than " +
                 std::to_string(std::numeric_limits<std::int64_t>::max()));
  KILN_CHECK(ec == std::errc{} && end == text.data() + text.size(), ErrorKind::Corrupt,
             what + "external data '" + key + "' is not a non-negative integer: " + shown);
  return value;
}

ExternalRef external_ref(const onnx::TensorProto& proto, const std::string& what) {
  ExternalRef ref;
  for (const auto& entry : proto.external_data()) {
    check_string(entry.value(), what);
    if (entry.key() == "location") ref.location = entry.value();
    else if (entry.key() == "offset") ref.offset = parse_count(entry.value(), "offset", what);
    else if (entry.key() == "length") ref.length = parse_count(entry.value(), "length", what);
  }
  KILN_CHECK(!ref.location.empty(), ErrorKind::Corrupt, what + "external data without a 'location'");
  return ref;
}

// The external file as a path inside base_dir; anything else is refused so a
// model cannot make kiln read arbitrary files.
std::filesystem::path resolve_inside(const std::string& base_dir, const std::string& location, const std::string& what) {
  namespace fs = std::filesystem;
  KILN_CHECK(!base_dir.empty(), ErrorKind::Unsupported,
             what + "external data '" + location + "' cannot be read: the model was loaded from memory without a folder");
  const fs::path relative(location);
  bool escapes = relative.is_absolute() || relative.has_root_name() || relative.has_root_directory();
  for (const fs::path& part : relative)
    if (part == "..") escapes = true;
  KILN_CHECK(!escapes, ErrorKind::Corrupt,
             what + "external data location '" + location + "' leaves the model's folder (absolute or with '..')");
  std::error_code ec;
  const fs::path base = fs::weakly_canonical(fs::path(base_dir), ec);
  const fs::path full = fs::weakly_canonical(fs::path(base_dir) / relative, ec);
  // Symbolic links may still point outside: compare the resolved paths.
  const auto [base_end, _] = std::mismatch(base.begin(), base.end(), full.begin(), full.end());
  KILN_CHECK(!ec && base_end == base.end(), ErrorKind::Corrupt,
             what + "external data location '" + location + "' resolves outside the model's folder");
  return full;
}

Tensor read_external(const onnx::TensorProto& proto, DType dtype, const Shape& shape, const std::string& base_dir,
                     const std::string& what) {
  const ExternalRef ref = external_ref(proto, what);
  const std::filesystem::path path = resolve_inside(base_dir, ref.location, what);
  std::error_code ec;
  const auto file_size = static_cast<std::int64_t>(std::filesystem::file_size(path, ec));
  KILN_CHECK(!ec, ErrorKind::Io, what + "cannot read external data file '" + path.string() + "': " + ec.message());
  KILN_CHECK(file_size <= kMaxExternalBytes, ErrorKind::Corrupt,
             what + "external data file '" + path.string() + "' is larger than kiln's limit");
  const auto expected = num_elements(shape) * static_cast<std::int64_t>(dtype_size(dtype));
  const std::int64_t length = ref.length < 0 ? file_size - std::min(ref.offset, file_size) : ref.length;
  KILN_CHECK(length == expected, ErrorKind::Corrupt,
             what + "external data holds " + std::to_string(length) + " bytes, but " + std::string(dtype_name(dtype)) +
                 shape_str(shape) + " needs " + std::to_string(expected));
  KILN_CHECK(ref.offset <= file_size && length <= file_size - ref.offset, ErrorKind::Corrupt,
             what + "external data range [" + std::to_string(ref.offset) + ", +" + std::to_string(length) +
                 ") is past the end of '" + path.string() + "' (" + std::to_string(file_size) + " bytes)");
  Tensor out(dtype, shape);  // only now that the file is known to hold it
  std::ifstream in(path, std::ios::binary);
  in.seekg(ref.offset);
  in.read(reinterpret_cast<char*>(out.bytes().data()), length);
  KILN_CHECK(in.good() || length == 0, ErrorKind::Io, what + "reading external data file '" + path.string() + "' failed");
  return out;
}

template <class Field> void check_count(const Field& field, std::int64_t numel, const char* field_name, const std::string& what) {
  KILN_CHECK(static_cast<std::int64_t>(field.size()) == numel, ErrorKind::Corrupt,
             what + std::string(field_name) + " holds " + std::to_string(field.size()) + " values, the shape needs " +
                 std::to_string(numel));
}

// Copies the typed repeated field that ONNX uses for this dtype; the count is
// checked before the tensor is allocated.
Tensor read_typed(const onnx::TensorProto& proto, DType dtype, const Shape& shape, const std::string& what) {
  const std::int64_t n = num_elements(shape);
  switch (dtype) {
    case DType::f32: {
      check_count(proto.float_data(), n, "float_data", what);
      Tensor out(dtype, shape);
      std::copy(proto.float_data().begin(), proto.float_data().end(), out.values<float>().begin());
      return out;
    }
    case DType::i64: {
      check_count(proto.int64_data(), n, "int64_data", what);
      Tensor out(dtype, shape);
      std::copy(proto.int64_data().begin(), proto.int64_data().end(), out.values<std::int64_t>().begin());
      return out;
    }
    case DType::i32:
    case DType::f16:
    case DType::bf16:
    case DType::u8:
    case DType::boolean: {
      // Narrow types are stored one per int32 (f16 and bf16 as their bit patterns).
      check_count(proto.int32_data(), n, "int32_data", what);
      Tensor out(dtype, shape);
      std::byte* dst = out.bytes().data();
      const std::size_t size = dtype_size(out.dtype());
      for (std::int64_t i = 0; i < n; ++i) {
        const auto v = static_cast<std::uint32_t>(proto.int32_data(static_cast<int>(i)));
        if (out.dtype() == DType::i32) std::memcpy(dst + i * 4, &v, 4);
        else if (size == 2) {
          const auto bits = static_cast<std::uint16_t>(v);
          std::memcpy(dst + i * 2, &bits, 2);
        } else {
          dst[i] = static_cast<std::byte>(out.dtype() == DType::boolean ? (v != 0) : (v & 0xffu));
        }
      }
      return out;
    }
  }
  KILN_ASSERT(false);
}

}  // namespace

Tensor tensor_from_proto(const onnx::TensorProto& proto, const std::string& base_dir, const std::string& what) {
  const std::optional<DType> dtype = dtype_from_onnx(proto.data_type());
  KILN_CHECK(dtype.has_value(), ErrorKind::Unsupported,
             what + "tensor data type " + onnx_type_name(proto.data_type()) + " is not supported (kiln has f32, f16, i32, i64, u8, bool)");
  KILN_CHECK(!proto.has_segment(), ErrorKind::Unsupported, what + "segmented tensors are not supported");
  const Shape shape = checked_shape(proto.dims().data(), proto.dims_size(), what);
  if (proto.data_location() == onnx::TensorProto_DataLocation_EXTERNAL)
    return read_external(proto, *dtype, shape, base_dir, what);
  if (!proto.has_raw_data()) return read_typed(proto, *dtype, shape, what);

  const auto nbytes = static_cast<std::size_t>(num_elements(shape)) * dtype_size(*dtype);
  KILN_CHECK(proto.raw_data().size() == nbytes, ErrorKind::Corrupt,
             what + "raw_data holds " + std::to_string(proto.raw_data().size()) + " bytes, but " +
                 std::string(dtype_name(*dtype)) + shape_str(shape) + " needs " + std::to_string(nbytes));
  Tensor out(*dtype, shape);
  // ONNX raw data is little-endian, as is every machine kiln runs on.
  // An empty tensor has no storage: memcpy with a null pointer is undefined even for 0 bytes.
  if (nbytes != 0) std::memcpy(out.bytes().data(), proto.raw_data().data(), nbytes);
  if (*dtype == DType::boolean)
    for (std::byte& b : out.bytes()) b = static_cast<std::byte>(b != std::byte{0});
  return out;
}

bool is_f64(const onnx::TensorProto& proto) { return proto.data_type() == onnx::TensorProto_DataType_DOUBLE; }

F64Constant f64_from_proto(const onnx::TensorProto& proto, const std::string& what) {
  KILN_ASSERT(is_f64(proto));
  KILN_CHECK(!proto.has_segment(), ErrorKind::Unsupported, what + "segmented tensors are not supported");
  KILN_CHECK(proto.data_location() != onnx::TensorProto_DataLocation_EXTERNAL, ErrorKind::Unsupported,
             what + "DOUBLE tensors in external data are not supported (kiln has no f64)");
  F64Constant out;
  out.shape = checked_shape(proto.dims().data(), proto.dims_size(), what);
  const std::int64_t n = num_elements(out.shape);
  if (proto.has_raw_data()) {
    const auto nbytes = static_cast<std::size_t>(n) * sizeof(double);
    KILN_CHECK(proto.raw_data().size() == nbytes, ErrorKind::Corrupt,
               what + "raw_data holds " + std::to_string(proto.raw_data().size()) + " bytes, but DOUBLE" +
                   shape_str(out.shape) + " needs " + std::to_string(nbytes));
    out.values.resize(static_cast<std::size_t>(n));
    if (nbytes != 0) std::memcpy(out.values.data(), proto.raw_data().data(), nbytes);
  } else {
    check_count(proto.double_data(), n, "double_data", what);
    out.values.assign(proto.double_data().begin(), proto.double_data().end());
  }
  return out;
}

namespace {

// As kiln's Cast converts floats: toward zero, saturating, NaN to 0.
template <class Int> Int saturated(double v) {
  if (std::isnan(v)) return Int{0};
  if (v <= static_cast<double>(std::numeric_limits<Int>::lowest())) return std::numeric_limits<Int>::lowest();
  if (v >= static_cast<double>(std::numeric_limits<Int>::max())) return std::numeric_limits<Int>::max();
  return static_cast<Int>(v);
}

}  // namespace

Tensor cast_f64(const F64Constant& constant, DType to) {
  KILN_ASSERT(to != DType::f16 && to != DType::bf16);
  Tensor out(to, constant.shape);
  const std::vector<double>& v = constant.values;
  for (std::size_t i = 0; i < v.size(); ++i) switch (to) {
      case DType::f32: out.values<float>()[i] = static_cast<float>(v[i]); break;
      case DType::i64: out.values<std::int64_t>()[i] = saturated<std::int64_t>(v[i]); break;
      case DType::i32: out.values<std::int32_t>()[i] = saturated<std::int32_t>(v[i]); break;
      case DType::u8: out.values<std::uint8_t>()[i] = saturated<std::uint8_t>(v[i]); break;
      case DType::boolean: out.values<std::uint8_t>()[i] = v[i] != 0.0; break;
      case DType::f16:
      case DType::bf16: break;
    }
  return out;
}

}  // namespace kiln::onnx_import
