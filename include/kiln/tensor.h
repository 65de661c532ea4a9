// kiln::Tensor: a dense, row-major host tensor with shared storage.
//
// Copies share storage (like torch.Tensor); clone() makes a deep copy. It is
// the value type of model inputs, outputs, constants and the reference
// implementation. Storage is either the tensor's own (zero-filled at
// construction) or bytes owned elsewhere (wrap()).
#pragma once

#include <kiln/dtype.h>
#include <kiln/error.h>
#include <kiln/export.h>

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

namespace kiln {

class KILN_API Tensor {
 public:
  Tensor();                          // an empty f32 tensor of shape [0]
  Tensor(DType dtype, Shape shape);  // zero-filled

  static Tensor from_f32(Shape shape, std::vector<float> values);
  static Tensor from_i64(Shape shape, std::vector<std::int64_t> values);
  static Tensor scalar_f32(float value);
  // A tensor over bytes owned elsewhere, without a copy: `data` keeps them
  // alive (shared_ptr's aliasing constructor points into a larger buffer).
  // Throws InvalidArgument unless `size` is the shape's byte count and `data`
  // is aligned to the element size.
  static Tensor wrap(DType dtype, Shape shape, std::shared_ptr<std::byte> data, std::size_t size);

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  std::int64_t rank() const { return static_cast<std::int64_t>(shape_.size()); }
  std::int64_t numel() const { return num_elements(shape_); }
  std::size_t nbytes() const { return static_cast<std::size_t>(numel()) * dtype_size(dtype_); }

  std::span<std::byte> bytes();
  std::span<const std::byte> bytes() const;

  // Typed views; throw ShapeMismatch if T does not match dtype().
  template <class T> std::span<T> values();
  template <class T> std::span<const T> values() const;

  Tensor clone() const;
  // A copy converted to `dtype` element by element as ONNX's Cast converts:
  // floats to integers toward zero (saturating), to f16 and bf16 to nearest
  // even (kiln/float16.h).
  Tensor to(DType dtype) const;
  // Same storage, new shape with the same element count.
  Tensor reshaped(Shape shape) const;

 private:
  DType dtype_;
  Shape shape_;
  std::shared_ptr<std::byte> data_;  // nbytes() bytes; may point into a larger owner
};

// The largest |a - b| over all elements; throws ShapeMismatch if they differ in
// shape or dtype. Only for f32 tensors.
KILN_API float max_abs_diff(const Tensor& a, const Tensor& b);

}  // namespace kiln
