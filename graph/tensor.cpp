#include <kiln/tensor.h>

#include "graph/ops/ops.h"
#include "src/base/check.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <numeric>

namespace kiln {

std::int64_t num_elements(const Shape& shape) {
  // An empty shape is empty whatever its other extents (which may multiply
  // past int64: a .npy file's [60961682, 22, ..., 0, ...]).
  if (std::find(shape.begin(), shape.end(), 0) != shape.end()) return 0;
  std::int64_t n = 1;
  for (std::int64_t d : shape) n *= d;
  return n;
}

std::string shape_str(const Shape& shape) {
  std::string s = "[";
  const std::size_t listed = std::min(shape.size(), kMaxListedEntries);
  for (std::size_t i = 0; i < listed; ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  if (listed < shape.size()) s += ", ... (" + std::to_string(shape.size() - listed) + " more)";
  return s + "]";
}

Tensor::Tensor() : Tensor(DType::f32, Shape{0}) {}

Tensor::Tensor(DType dtype, Shape shape) : dtype_(dtype), shape_(std::move(shape)) {
  for (std::int64_t d : shape_)
    KILN_CHECK(d >= 0, ErrorKind::ShapeMismatch, "negative dimension in tensor shape " + shape_str(shape_));
  const std::shared_ptr<std::byte[]> owned(new std::byte[nbytes()]());
  data_ = std::shared_ptr<std::byte>(owned, owned.get());
}

Tensor Tensor::wrap(DType dtype, Shape shape, std::shared_ptr<std::byte> data, std::size_t size) {
  for (std::int64_t d : shape)
    KILN_CHECK(d >= 0, ErrorKind::ShapeMismatch, "negative dimension in tensor shape " + shape_str(shape));
  const std::size_t expected = static_cast<std::size_t>(num_elements(shape)) * dtype_size(dtype);
  KILN_CHECK(size == expected, ErrorKind::InvalidArgument,
             "Tensor::wrap: " + std::to_string(size) + " bytes for " + std::string(dtype_name(dtype)) +
                 shape_str(shape) + ", which needs " + std::to_string(expected));
  KILN_CHECK(size == 0 || data != nullptr, ErrorKind::InvalidArgument, "Tensor::wrap: no data");
  KILN_CHECK(reinterpret_cast<std::uintptr_t>(data.get()) % dtype_size(dtype) == 0, ErrorKind::InvalidArgument,
             "Tensor::wrap: data for " + std::string(dtype_name(dtype)) + " elements must be aligned to " +
                 std::to_string(dtype_size(dtype)) + " bytes");
  Tensor t;
  t.dtype_ = dtype;
  t.shape_ = std::move(shape);
  t.data_ = std::move(data);
  return t;
}

Tensor Tensor::from_f32(Shape shape, std::vector<float> values) {
  Tensor t(DType::f32, std::move(shape));
  KILN_CHECK(static_cast<std::int64_t>(values.size()) == t.numel(), ErrorKind::ShapeMismatch,
             "Tensor::from_f32: " + std::to_string(values.size()) + " values for shape " + shape_str(t.shape()));
  if (!values.empty()) std::memcpy(t.data_.get(), values.data(), t.nbytes());
  return t;
}

Tensor Tensor::from_i64(Shape shape, std::vector<std::int64_t> values) {
  Tensor t(DType::i64, std::move(shape));
  KILN_CHECK(static_cast<std::int64_t>(values.size()) == t.numel(), ErrorKind::ShapeMismatch,
             "Tensor::from_i64: " + std::to_string(values.size()) + " values for shape " + shape_str(t.shape()));
  if (!values.empty()) std::memcpy(t.data_.get(), values.data(), t.nbytes());
  return t;
}

Tensor Tensor::scalar_f32(float value) { return from_f32({}, {value}); }

std::span<std::byte> Tensor::bytes() { return {data_.get(), nbytes()}; }
std::span<const std::byte> Tensor::bytes() const { return {data_.get(), nbytes()}; }

namespace {
template <class T> constexpr bool matches(DType d) {
  if constexpr (std::is_same_v<T, float>) return d == DType::f32;
  else if constexpr (std::is_same_v<T, std::int64_t>) return d == DType::i64;
  else if constexpr (std::is_same_v<T, std::int32_t>) return d == DType::i32;
  else if constexpr (std::is_same_v<T, std::uint8_t>) return d == DType::u8 || d == DType::boolean;
  else if constexpr (std::is_same_v<T, std::uint16_t>) return d == DType::f16 || d == DType::bf16;
  else return false;
}
}  // namespace

template <class T> std::span<T> Tensor::values() {
  KILN_CHECK(matches<T>(dtype_), ErrorKind::ShapeMismatch,
             std::string("tensor of dtype ") + std::string(dtype_name(dtype_)) + " read with the wrong element type");
  return {reinterpret_cast<T*>(data_.get()), static_cast<std::size_t>(numel())};
}

template <class T> std::span<const T> Tensor::values() const {
  KILN_CHECK(matches<T>(dtype_), ErrorKind::ShapeMismatch,
             std::string("tensor of dtype ") + std::string(dtype_name(dtype_)) + " read with the wrong element type");
  return {reinterpret_cast<const T*>(data_.get()), static_cast<std::size_t>(numel())};
}

template std::span<float> Tensor::values<float>();
template std::span<const float> Tensor::values<float>() const;
template std::span<std::int64_t> Tensor::values<std::int64_t>();
template std::span<const std::int64_t> Tensor::values<std::int64_t>() const;
template std::span<std::int32_t> Tensor::values<std::int32_t>();
template std::span<const std::int32_t> Tensor::values<std::int32_t>() const;
template std::span<std::uint8_t> Tensor::values<std::uint8_t>();
template std::span<const std::uint8_t> Tensor::values<std::uint8_t>() const;
template std::span<std::uint16_t> Tensor::values<std::uint16_t>();
template std::span<const std::uint16_t> Tensor::values<std::uint16_t>() const;

Tensor Tensor::clone() const {
  Tensor t(dtype_, shape_);
  if (nbytes() != 0) std::memcpy(t.data_.get(), data_.get(), nbytes());  // empty: no storage to copy
  return t;
}

Tensor Tensor::to(DType dtype) const { return dtype == dtype_ ? clone() : graph::ops::cast_tensor(*this, dtype); }

Tensor Tensor::reshaped(Shape shape) const {
  KILN_CHECK(num_elements(shape) == numel(), ErrorKind::ShapeMismatch,
             "cannot reshape " + shape_str(shape_) + " to " + shape_str(shape));
  Tensor t = *this;
  t.shape_ = std::move(shape);
  return t;
}

float max_abs_diff(const Tensor& a, const Tensor& b) {
  KILN_CHECK(a.shape() == b.shape(), ErrorKind::ShapeMismatch,
             "max_abs_diff: shapes differ: " + shape_str(a.shape()) + " vs " + shape_str(b.shape()));
  auto x = a.values<float>();
  auto y = b.values<float>();
  float m = 0.0f;
  for (std::size_t i = 0; i < x.size(); ++i) {
    float d = std::fabs(x[i] - y[i]);
    if (std::isnan(d)) return d;
    m = std::max(m, d);
  }
  return m;
}

}  // namespace kiln
