// One conversion rule per ONNX op type. Inputs that ONNX passes as tensors but
// that kiln needs at compile time become attributes (see the op conventions in
// graph/README.md); when such an input is not a constant, static compilation is
// impossible and the rule says so, naming the node.
#include "graph/onnx/convert_ops.h"

#include <kiln/float16.h>

#include "graph/checked_math.h"
#include "graph/onnx/attributes.h"
#include "graph/onnx/constant_inputs.h"
#include "graph/onnx/convert_audio.h"
#include "graph/onnx/convert_control.h"
#include "graph/onnx/convert_einsum.h"
#include "graph/onnx/convert_recurrent.h"
#include "graph/onnx/limits.h"
#include "graph/onnx/tensor_proto.h"
#include "src/base/check.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>

namespace kiln::onnx_import {

using graph::Attributes;
using graph::ValueId;

namespace {

std::string float_str(double value) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", value);
  return text;
}

std::vector<ValueId> inputs_upto(const OnnxNode& n, std::size_t count) {
  std::vector<ValueId> in(n.inputs.begin(), n.inputs.begin() + static_cast<std::ptrdiff_t>(std::min(count, n.inputs.size())));
  while (!in.empty() && in.back() < 0) in.pop_back();
  return in;
}

// Ops whose ONNX inputs and attributes are kiln's as they are.
OpRule direct(const std::string& op) {
  return {op, [op](const OnnxNode& n, ImportContext& ctx) {
            return ctx.emit(n, op, inputs_upto(n, n.inputs.size()), n.attrs);
          }};
}

// ---- convolution and pooling: auto_pad -> explicit pads ------------------------

Attributes without(const Attributes& attrs, const std::string& name) {
  Attributes copy;
  for (const auto& [k, v] : attrs.all())
    if (k != name) copy.set(k, v);
  return copy;
}

// ONNX's auto_pad rules for the spatial dims: SAME_* pad so that out = ceil(in / stride).
void resolve_auto_pad(const OnnxNode& n, Attributes& attrs, const Shape& input, const Shape& kernel) {
  const std::string mode = attrs.get_string("auto_pad", "NOTSET");
  if (mode == "NOTSET") {
    attrs = without(attrs, "auto_pad");
    return;
  }
  const std::size_t spatial = kernel.size();
  KILN_CHECK(input.size() == spatial + 2, ErrorKind::ShapeMismatch,
             n.where + "input " + shape_str(input) + " does not fit a kernel of " + std::to_string(spatial) + " dims");
  const auto strides = attrs.get_ints("strides", std::vector<std::int64_t>(spatial, 1));
  const auto dilations = attrs.get_ints("dilations", std::vector<std::int64_t>(spatial, 1));
  KILN_CHECK(strides.size() == spatial && dilations.size() == spatial, ErrorKind::Corrupt,
             n.where + "strides and dilations need " + std::to_string(spatial) + " values each");
  std::vector<std::int64_t> pads(2 * spatial, 0);
  if (mode == "SAME_UPPER" || mode == "SAME_LOWER") {
    for (std::size_t i = 0; i < spatial; ++i) {
      KILN_CHECK(strides[i] > 0 && dilations[i] > 0 && kernel[i] > 0, ErrorKind::Corrupt,
                 n.where + "kernel_shape, strides and dilations must be positive, got " + shape_str(kernel) + ", " +
                     shape_str(strides) + ", " + shape_str(dilations));
      const std::int64_t in = input[i + 2];
      // out = ceil(in / stride); padding = (out - 1) * stride + extent - in,
      // where extent = (kernel - 1) * dilation + 1: sizes from the file, checked.
      const std::int64_t out = in / strides[i] + (in % strides[i] != 0 ? 1 : 0);
      std::optional<std::int64_t> extent = graph::checked_mul(kernel[i] - 1, dilations[i]);
      if (extent) extent = graph::checked_add(*extent, 1);
      std::optional<std::int64_t> span = graph::checked_mul(out - 1, strides[i]);
      span = span && extent ? graph::checked_add(*span, *extent) : std::nullopt;
      KILN_CHECK(span && *span - in <= kMaxTensorElements, ErrorKind::Corrupt,
                 n.where + "auto_pad " + mode + " with kernel_shape " + shape_str(kernel) + ", strides " +
                     shape_str(strides) + " and dilations " + shape_str(dilations) + " needs more padding than kiln's "
                     "limit of " + std::to_string(kMaxTensorElements) + " for input " + shape_str(input));
      const std::int64_t total = std::max<std::int64_t>(0, *span - in);
      const std::int64_t small = total / 2;
      pads[i] = mode == "SAME_UPPER" ? small : total - small;
      pads[i + spatial] = total - pads[i];
    }
  } else {
    KILN_CHECK(mode == "VALID", ErrorKind::Corrupt, n.where + "unknown auto_pad '" + mode + "'");
  }
  attrs = without(attrs, "auto_pad");
  attrs.set("pads", pads);
}

// Conv: auto_pad becomes explicit pads; 1-D (audio, text) runs as 2-D with a
// height of 1 between reshapes.
std::vector<ValueId> convert_conv(const OnnxNode& n, ImportContext& ctx) {
  Attributes attrs = n.attrs;
  KILN_CHECK(present(n, 0) && present(n, 1), ErrorKind::Corrupt, n.where + "Conv needs inputs X and W");
  const Shape x = ctx.type(n.inputs[0]).shape;  // copies: emit() may move the graph's values
  const Shape w = ctx.type(n.inputs[1]).shape;
  const Shape kernel = attrs.get_ints("kernel_shape", w.size() > 2 ? Shape(w.begin() + 2, w.end()) : Shape{});
  resolve_auto_pad(n, attrs, x, kernel);
  if (x.size() != 3 || w.size() != 3) return ctx.emit(n, "Conv", inputs_upto(n, 3), std::move(attrs));
  KILN_CHECK(!ctx.type(n.inputs[0]).dynamic, ErrorKind::Unsupported,
             n.where + "a 1-D Conv needs an input shape known before run time");
  const auto one = [&](const std::string& name, std::int64_t fallback, std::size_t count) {
    const auto values = attrs.get_ints(name, std::vector<std::int64_t>(count, fallback));
    KILN_CHECK(values.size() == count, ErrorKind::Corrupt,
               n.where + "attribute '" + name + "' needs " + std::to_string(count) + " values, got " + shape_str(values));
    return values;
  };
  const auto strides = one("strides", 1, 1), dilations = one("dilations", 1, 1), pads = one("pads", 0, 2);
  attrs.set("strides", std::vector<std::int64_t>{1, strides[0]});
  attrs.set("dilations", std::vector<std::int64_t>{1, dilations[0]});
  attrs.set("pads", std::vector<std::int64_t>{0, pads[0], 0, pads[1]});
  if (attrs.has("kernel_shape")) attrs.set("kernel_shape", std::vector<std::int64_t>{1, one("kernel_shape", 0, 1)[0]});
  Attributes x_shape, w_shape;
  x_shape.set("shape", std::vector<std::int64_t>{x[0], x[1], 1, x[2]});
  w_shape.set("shape", std::vector<std::int64_t>{w[0], w[1], 1, w[2]});
  std::vector<ValueId> inputs = inputs_upto(n, 3);
  inputs[0] = ctx.emit(n, "Reshape", {inputs[0]}, std::move(x_shape), "x_2d").at(0);
  inputs[1] = ctx.emit(n, "Reshape", {inputs[1]}, std::move(w_shape), "w_2d").at(0);
  const ValueId y = ctx.emit(n, "Conv", inputs, std::move(attrs), "y_2d").at(0);
  const Shape y_shape = ctx.type(y).shape;
  Attributes back;
  back.set("shape", std::vector<std::int64_t>{y_shape[0], y_shape[1], y_shape[3]});
  return ctx.emit(n, "Reshape", {y}, std::move(back));
}

// ConvTranspose: auto_pad and output_shape become explicit pads (a target
// longer than the natural output extends its end, as output_padding does);
// 1-D runs as 2-D with a height of 1.
std::vector<ValueId> convert_conv_transpose(const OnnxNode& n, ImportContext& ctx) {
  KILN_CHECK(present(n, 0) && present(n, 1), ErrorKind::Corrupt, n.where + "ConvTranspose needs inputs X and W");
  const Shape x = ctx.type(n.inputs[0]).shape;  // copies: emit() may move the graph's values
  const Shape w = ctx.type(n.inputs[1]).shape;
  KILN_CHECK(x.size() == w.size() && (x.size() == 3 || x.size() == 4), ErrorKind::Unsupported,
             n.where + "only 1-D and 2-D ConvTranspose is supported (X " + shape_str(x) + ", W " + shape_str(w) + ")");
  const std::size_t spatial = x.size() - 2;
  const auto ints = [&](const std::string& name, std::int64_t fallback, std::size_t count) {
    const auto values = n.attrs.get_ints(name, std::vector<std::int64_t>(count, fallback));
    KILN_CHECK(values.size() == count, ErrorKind::Corrupt,
               n.where + "attribute '" + name + "' needs " + std::to_string(count) + " values, got " + shape_str(values));
    return values;
  };
  const auto strides = ints("strides", 1, spatial);
  const auto dilations = ints("dilations", 1, spatial);
  auto output_padding = ints("output_padding", 0, spatial);
  auto pads = ints("pads", 0, 2 * spatial);
  const std::string mode = n.attrs.get_string("auto_pad", "NOTSET");
  KILN_CHECK(mode == "NOTSET" || mode == "VALID" || mode == "SAME_UPPER" || mode == "SAME_LOWER", ErrorKind::Corrupt,
             n.where + "unknown auto_pad '" + mode + "'");
  std::vector<std::int64_t> target;
  if (n.attrs.has("output_shape")) {
    target = n.attrs.get_ints("output_shape", {});
    if (target.size() == spatial + 2) target.erase(target.begin(), target.begin() + 2);
    KILN_CHECK(target.size() == spatial, ErrorKind::Corrupt,
               n.where + "attribute 'output_shape' " + shape_str(target) + " does not have " + std::to_string(spatial) +
                   " spatial extents");
  } else if (mode == "SAME_UPPER" || mode == "SAME_LOWER") {
    for (std::size_t i = 0; i < spatial; ++i) {
      const std::optional<std::int64_t> extent = graph::checked_mul(x[i + 2], strides[i]);
      KILN_CHECK(extent && *extent <= kMaxTensorElements, ErrorKind::Corrupt,
                 n.where + "auto_pad " + mode + ": input extent " + std::to_string(x[i + 2]) + " times stride " +
                     std::to_string(strides[i]) + " is more than kiln's limit of " + std::to_string(kMaxTensorElements));
      target.push_back(*extent);
    }
  } else if (mode == "VALID") {
    std::fill(pads.begin(), pads.end(), 0);
  }
  if (!target.empty()) {
    // total padding = stride * (in - 1) + output_padding + window - target
    for (std::size_t i = 0; i < spatial; ++i) {
      KILN_CHECK(strides[i] > 0 && dilations[i] > 0 && output_padding[i] >= 0 && w[i + 2] > 0 && x[i + 2] > 0 &&
                     target[i] > 0 && target[i] <= kMaxTensorElements,
                 ErrorKind::Corrupt,
                 n.where + "strides, dilations, the kernel, the input and output_shape must be positive (and " +
                     "output_padding not negative) to resolve the padding");
      std::optional<std::int64_t> natural = graph::checked_mul(strides[i], x[i + 2] - 1);
      const std::optional<std::int64_t> window = graph::checked_mul(w[i + 2] - 1, dilations[i]);
      if (natural && window) natural = graph::checked_add(*natural, *window + 1);
      if (natural) natural = graph::checked_add(*natural, output_padding[i]);
      KILN_CHECK(natural.has_value(), ErrorKind::Corrupt, n.where + "the output extent overflows int64");
      const std::int64_t total = *natural - target[i];
      if (total < 0) {
        pads[i] = pads[i + spatial] = 0;
        output_padding[i] -= total;
        continue;
      }
      const std::int64_t half = total / 2;
      pads[i] = mode == "SAME_LOWER" || mode == "NOTSET" ? total - half : half;
      pads[i + spatial] = total - pads[i];
    }
  }
  Attributes attrs;
  if (n.attrs.has("group")) attrs.set("group", n.attrs.get_int("group", 1));
  const bool one_d = spatial == 1;
  // 1-D: height 1, kernel height 1, stride and dilation 1 along it.
  const auto as_2d = [&](std::vector<std::int64_t> v, std::int64_t fill) {
    if (one_d) v.insert(v.begin(), fill);
    return v;
  };
  attrs.set("strides", as_2d(strides, 1));
  attrs.set("dilations", as_2d(dilations, 1));
  attrs.set("output_padding", as_2d(output_padding, 0));
  attrs.set("pads", one_d ? std::vector<std::int64_t>{0, pads[0], 0, pads[1]} : pads);
  if (n.attrs.has("kernel_shape")) attrs.set("kernel_shape", as_2d(ints("kernel_shape", 0, spatial), 1));
  if (!one_d) return ctx.emit(n, "ConvTranspose", inputs_upto(n, 3), std::move(attrs));
  KILN_CHECK(!ctx.type(n.inputs[0]).dynamic, ErrorKind::Unsupported,
             n.where + "a 1-D ConvTranspose needs an input shape known before run time");

  Attributes x_shape, w_shape;
  x_shape.set("shape", std::vector<std::int64_t>{x[0], x[1], 1, x[2]});
  w_shape.set("shape", std::vector<std::int64_t>{w[0], w[1], 1, w[2]});
  std::vector<ValueId> inputs = inputs_upto(n, 3);
  inputs[0] = ctx.emit(n, "Reshape", {inputs[0]}, std::move(x_shape), "x_2d").at(0);
  inputs[1] = ctx.emit(n, "Reshape", {inputs[1]}, std::move(w_shape), "w_2d").at(0);
  const ValueId y = ctx.emit(n, "ConvTranspose", inputs, std::move(attrs), "y_2d").at(0);
  const Shape y_shape = ctx.type(y).shape;
  Attributes back;
  back.set("shape", std::vector<std::int64_t>{y_shape[0], y_shape[1], y_shape[3]});
  return ctx.emit(n, "Reshape", {y}, std::move(back));
}

// A 1-D pool runs as a 2-D one over [N, C, 1, L]: its window, strides,
// dilations and pads gain a leading unit axis.
std::vector<ValueId> pool_1d_as_2d(const OnnxNode& n, ImportContext& ctx, const std::string& op, Attributes attrs) {
  const Shape& x = ctx.type(n.inputs[0]).shape;
  KILN_CHECK(!ctx.type(n.inputs[0]).dynamic, ErrorKind::Unsupported,
             n.where + "a 1-D " + op + " needs an input shape known before run time");
  for (const char* name : {"kernel_shape", "strides", "dilations"}) {
    if (!attrs.has(name)) continue;
    std::vector<std::int64_t> v = attrs.get_ints(name, {});
    v.insert(v.begin(), 1);
    attrs.set(name, std::move(v));
  }
  if (attrs.has("pads")) {
    const std::vector<std::int64_t> pads = attrs.get_ints("pads", {});
    KILN_CHECK(pads.size() == 2, ErrorKind::Corrupt, n.where + "pads has " + std::to_string(pads.size()) +
                                                         " values for one spatial axis");
    attrs.set("pads", std::vector<std::int64_t>{0, pads[0], 0, pads[1]});
  }
  Attributes x_shape;
  x_shape.set("shape", std::vector<std::int64_t>{x[0], x[1], 1, x[2]});
  const ValueId x_2d = ctx.emit(n, "Reshape", {n.inputs[0]}, std::move(x_shape), "x_2d").at(0);
  const ValueId y = ctx.emit(n, op, {x_2d}, std::move(attrs), "y_2d").at(0);
  const Shape y_shape = ctx.type(y).shape;
  Attributes back;
  back.set("shape", std::vector<std::int64_t>{y_shape[0], y_shape[1], y_shape[3]});
  return ctx.emit(n, "Reshape", {y}, std::move(back));
}

OpRule pool(const std::string& op) {
  return {op, [op](const OnnxNode& n, ImportContext& ctx) {
            Attributes attrs = n.attrs;
            KILN_CHECK(present(n, 0), ErrorKind::Corrupt, n.where + "input X is missing");
            resolve_auto_pad(n, attrs, ctx.type(n.inputs[0]).shape, attrs.get_ints("kernel_shape", {}));
            if (ctx.type(n.inputs[0]).shape.size() == 3) return pool_1d_as_2d(n, ctx, op, std::move(attrs));
            return ctx.emit(n, op, inputs_upto(n, 1), std::move(attrs));
          }};
}

// ---- ops whose tensor inputs become attributes ----------------------------------

std::vector<ValueId> convert_clip(const OnnxNode& n, ImportContext& ctx) {
  Attributes attrs = n.attrs;
  if (present(n, 1)) attrs.set("min", to_floats(n, require_constant(n, ctx, 1, "the min input"), "min").at(0));
  if (present(n, 2)) attrs.set("max", to_floats(n, require_constant(n, ctx, 2, "the max input"), "max").at(0));
  return ctx.emit(n, "Clip", inputs_upto(n, 1), std::move(attrs));
}

// ---- ops written as others ------------------------------------------------------

// GlobalMaxPool: ReduceMax over the spatial axes, kept.
std::vector<ValueId> convert_global_max_pool(const OnnxNode& n, ImportContext& ctx) {
  const std::size_t rank = ctx.type(n.inputs[0]).shape.size();
  KILN_CHECK(rank >= 3, ErrorKind::ShapeMismatch, n.where + "the input has rank " + std::to_string(rank) +
                                                      "; GlobalMaxPool needs N, C and at least one spatial axis");
  std::vector<std::int64_t> axes;
  for (std::size_t d = 2; d < rank; ++d) axes.push_back(static_cast<std::int64_t>(d));
  Attributes attrs;
  attrs.set("axes", std::move(axes));
  attrs.set("keepdims", std::int64_t{1});
  return ctx.emit(n, "ReduceMax", inputs_upto(n, 1), std::move(attrs));
}

// DepthToSpace and SpaceToDepth: a reshape to six axes, a transpose, a
// reshape back (the ONNX definitions, DCR and CRD modes).
std::vector<ValueId> convert_depth_space(const OnnxNode& n, ImportContext& ctx) {
  const Shape& shape = ctx.type(n.inputs[0]).shape;
  KILN_CHECK(shape.size() == 4, ErrorKind::ShapeMismatch,
             n.where + "the input has rank " + std::to_string(shape.size()) + "; " + n.op + " needs N, C, H, W");
  KILN_CHECK(n.attrs.has("blocksize"), ErrorKind::InvalidArgument, n.where + "attribute 'blocksize' is required");
  const std::int64_t b = n.attrs.get_int("blocksize", 0);
  const std::int64_t N = shape[0], C = shape[1], H = shape[2], W = shape[3];
  KILN_CHECK(b > 0 && b <= (1 << 16), ErrorKind::InvalidArgument,
             n.where + "attribute 'blocksize' is " + std::to_string(b) + "; it must be positive");
  std::vector<std::int64_t> six, perm, out;
  if (n.op == "DepthToSpace") {
    KILN_CHECK(C % (b * b) == 0, ErrorKind::ShapeMismatch,
               n.where + std::to_string(C) + " channels do not divide into blocks of " + std::to_string(b * b));
    const std::string mode = n.attrs.get_string("mode", "DCR");
    KILN_CHECK(mode == "DCR" || mode == "CRD", ErrorKind::InvalidArgument,
               n.where + "attribute 'mode' is '" + mode + "'; expected DCR or CRD");
    const std::int64_t c = C / (b * b);
    six = mode == "DCR" ? std::vector<std::int64_t>{N, b, b, c, H, W} : std::vector<std::int64_t>{N, c, b, b, H, W};
    perm = mode == "DCR" ? std::vector<std::int64_t>{0, 3, 4, 1, 5, 2} : std::vector<std::int64_t>{0, 1, 4, 2, 5, 3};
    out = {N, c, H * b, W * b};
  } else {
    KILN_CHECK(H % b == 0 && W % b == 0, ErrorKind::ShapeMismatch,
               n.where + "height " + std::to_string(H) + " and width " + std::to_string(W) +
                   " must be multiples of the block size " + std::to_string(b));
    six = {N, C, H / b, b, W / b, b};
    perm = {0, 3, 5, 1, 2, 4};
    out = {N, C * b * b, H / b, W / b};
  }
  Attributes to_six, transpose, back;
  to_six.set("shape", std::move(six));
  transpose.set("perm", std::move(perm));
  back.set("shape", std::move(out));
  const ValueId blocks = ctx.emit(n, "Reshape", inputs_upto(n, 1), std::move(to_six), "blocks").at(0);
  const ValueId moved = ctx.emit(n, "Transpose", {blocks}, std::move(transpose), "moved").at(0);
  return ctx.emit(n, "Reshape", {moved}, std::move(back));
}

std::vector<ValueId> convert_reshape(const OnnxNode& n, ImportContext& ctx) {
  Attributes attrs = n.attrs;
  attrs.set("shape", to_ints(n, require_constant(n, ctx, 1, "the shape input"), "shape"));
  return ctx.emit(n, "Reshape", inputs_upto(n, 1), std::move(attrs));
}

// An op whose ints input (index 1) becomes the attribute `attr`; `optional`
// inputs may be omitted, leaving the attribute out.
OpRule ints_input_to_attr(const std::string& op, const std::string& attr, bool optional) {
  return {op, [op, attr, optional](const OnnxNode& n, ImportContext& ctx) {
            Attributes attrs = n.attrs;
            if (present(n, 1)) {
              attrs.set(attr, to_ints(n, require_constant(n, ctx, 1, "the " + attr + " input"), attr));
            } else {
              KILN_CHECK(optional || attrs.has(attr), ErrorKind::Corrupt, n.where + "the " + attr + " input is missing");
            }
            return ctx.emit(n, op, inputs_upto(n, 1), std::move(attrs));
          }};
}

// ReduceX: `axes` is an input from opset 18 (ReduceSum: 13); an empty one is absent.
OpRule reduce(const std::string& op) {
  return {op, [op](const OnnxNode& n, ImportContext& ctx) {
            Attributes attrs = n.attrs;
            if (present(n, 1)) {
              auto axes = to_ints(n, require_constant(n, ctx, 1, "the axes input"), "axes");
              if (!axes.empty()) attrs.set("axes", std::move(axes));
            }
            return ctx.emit(n, op, inputs_upto(n, 1), std::move(attrs));
          }};
}

std::vector<ValueId> convert_slice(const OnnxNode& n, ImportContext& ctx) {
  // A window computed at run time (a loop's iteration number): read then, a host step.
  bool constant_window = true;
  for (std::size_t i = 1; i < 5; ++i) constant_window = constant_window && (!present(n, i) || ctx.constant(n.inputs[i]));
  if (!constant_window) {
    KILN_CHECK(present(n, 0) && present(n, 1) && present(n, 2), ErrorKind::Corrupt,
               n.where + "Slice needs data, starts and ends");
    std::size_t count = 3;
    while (count < 5 && present(n, count)) ++count;
    for (std::size_t i = count; i < 5; ++i)
      KILN_CHECK(!present(n, i), ErrorKind::Unsupported, n.where + "steps without axes are not supported at run time");
    return ctx.emit(n, "Slice", inputs_upto(n, count), {});
  }
  Attributes attrs = n.attrs;
  attrs.set("starts", to_ints(n, require_constant(n, ctx, 1, "the starts input"), "starts"));
  attrs.set("ends", to_ints(n, require_constant(n, ctx, 2, "the ends input"), "ends"));
  if (present(n, 3)) attrs.set("axes", to_ints(n, require_constant(n, ctx, 3, "the axes input"), "axes"));
  if (present(n, 4)) attrs.set("steps", to_ints(n, require_constant(n, ctx, 4, "the steps input"), "steps"));
  return ctx.emit(n, "Slice", inputs_upto(n, 1), std::move(attrs));
}

// Split: sizes from the `split` input (13+), the `split` attribute (11/12),
// or equal parts for num_outputs (18) / the declared outputs.
std::vector<ValueId> convert_split(const OnnxNode& n, ImportContext& ctx) {
  KILN_CHECK(present(n, 0), ErrorKind::Corrupt, n.where + "input is missing");
  Attributes attrs = without(n.attrs, "num_outputs");
  const graph::TensorType& type = ctx.type(n.inputs[0]);
  KILN_CHECK(!type.dynamic || !type.shape.empty(), ErrorKind::Unsupported,
             n.where + "splitting a value whose rank is known only at run time (the output of a loop whose body's "
                       "shapes depend on data) is not supported");
  const Shape& shape = type.shape;
  const std::int64_t rank = static_cast<std::int64_t>(shape.size());
  std::int64_t axis = attrs.get_int("axis", 0);
  KILN_CHECK(axis >= -rank && axis < rank, ErrorKind::Corrupt,
             n.where + "axis " + std::to_string(axis) + " is out of range for input " + shape_str(shape));
  if (axis < 0) axis += rank;
  attrs.set("axis", axis);
  if (present(n, 1)) {
    attrs.set("split", to_ints(n, require_constant(n, ctx, 1, "the split input"), "split"));
  } else if (!attrs.has("split")) {
    const std::int64_t parts = n.attrs.get_int("num_outputs", n.num_outputs);
    const std::int64_t dim = shape[static_cast<std::size_t>(axis)];
    // More parts than elements cannot be filled (and would overflow dim + parts - 1).
    KILN_CHECK(parts > 0 && parts <= std::max<std::int64_t>(dim, 1), ErrorKind::Corrupt,
               n.where + "cannot split " + std::to_string(dim) + " into " + std::to_string(parts) + " parts");
    // ONNX: ceil(dim / parts) each, the last part smaller when it does not divide.
    const std::int64_t chunk = (dim + parts - 1) / parts;
    std::vector<std::int64_t> sizes;
    for (std::int64_t left = dim; left > 0 && static_cast<std::int64_t>(sizes.size()) < parts; left -= chunk)
      sizes.push_back(std::min(chunk, left));
    KILN_CHECK(static_cast<std::int64_t>(sizes.size()) == parts, ErrorKind::Corrupt,
               n.where + "cannot split " + std::to_string(dim) + " into " + std::to_string(parts) + " parts");
    attrs.set("split", sizes);
  }
  return ctx.emit(n, "Split", {n.inputs[0]}, std::move(attrs));
}

// Pad: pads (11+), constant_value and axes (18) inputs -> attributes over all axes.
std::vector<ValueId> convert_pad(const OnnxNode& n, ImportContext& ctx) {
  Attributes attrs = n.attrs;
  KILN_CHECK(present(n, 0), ErrorKind::Corrupt, n.where + "input is missing");
  const std::int64_t rank = static_cast<std::int64_t>(ctx.type(n.inputs[0]).shape.size());
  std::vector<std::int64_t> pads = present(n, 1) ? to_ints(n, require_constant(n, ctx, 1, "the pads input"), "pads")
                                                 : attrs.get_ints("pads", {});
  if (present(n, 3)) {
    const auto axes = to_ints(n, require_constant(n, ctx, 3, "the axes input"), "axes");
    KILN_CHECK(pads.size() == 2 * axes.size(), ErrorKind::Corrupt,
               n.where + "pads has " + std::to_string(pads.size()) + " values for " + std::to_string(axes.size()) + " axes");
    std::vector<std::int64_t> full(static_cast<std::size_t>(2 * rank), 0);
    for (std::size_t i = 0; i < axes.size(); ++i) {
      const std::int64_t a = axes[i] < 0 ? axes[i] + rank : axes[i];
      KILN_CHECK(a >= 0 && a < rank, ErrorKind::Corrupt, n.where + "axis " + std::to_string(axes[i]) + " is out of range");
      full[static_cast<std::size_t>(a)] = pads[i];
      full[static_cast<std::size_t>(a + rank)] = pads[i + axes.size()];
    }
    pads = std::move(full);
  }
  attrs.set("pads", pads);
  if (present(n, 2)) {
    const auto value = to_floats(n, require_constant(n, ctx, 2, "the constant_value input"), "constant_value");
    KILN_CHECK(value.size() == 1, ErrorKind::Corrupt, n.where + "constant_value must hold one value");
    attrs.set("value", value[0]);
  }
  return ctx.emit(n, "Pad", inputs_upto(n, 1), std::move(attrs));
}

// An output extent computed in double (input extent x scale, floored or
// rounded) as an int64, checked before the conversion: a huge scale makes a
// value no int64 holds, and converting it would be undefined behaviour.
std::int64_t resized_extent(const OnnxNode& n, double extent, std::int64_t input_extent, double scale, std::size_t axis) {
  const std::optional<std::int64_t> out = graph::to_int64_in_range(extent, 0, kMaxTensorElements);
  KILN_CHECK(out.has_value(), ErrorKind::Corrupt,
             n.where + "scale " + float_str(scale) + " makes axis " + std::to_string(axis) + " (extent " +
                 std::to_string(input_extent) + ") " + float_str(extent) + " long, more than kiln's limit of " +
                 std::to_string(kMaxTensorElements));
  return *out;
}

// Resize: roi/scales/sizes inputs -> `sizes` (the full output shape) and, when
// scales were given, `scales` (coordinates map with the scale, not the ratio).
std::vector<ValueId> convert_resize(const OnnxNode& n, ImportContext& ctx) {
  KILN_CHECK(present(n, 0), ErrorKind::Corrupt, n.where + "input X is missing");
  const Shape& in = ctx.type(n.inputs[0]).shape;
  const std::size_t rank = in.size();
  Attributes attrs = without(without(n.attrs, "axes"), "keep_aspect_ratio_policy");
  std::vector<std::int64_t> axes = n.attrs.get_ints("axes", {});
  if (axes.empty())
    for (std::size_t i = 0; i < rank; ++i) axes.push_back(static_cast<std::int64_t>(i));
  for (auto& a : axes) {
    KILN_CHECK(a >= -static_cast<std::int64_t>(rank) && a < static_cast<std::int64_t>(rank), ErrorKind::Corrupt,
               n.where + "axis " + std::to_string(a) + " is out of range for input " + shape_str(in));
    if (a < 0) a += static_cast<std::int64_t>(rank);
  }
  const std::size_t scales_index = n.opset >= 11 ? 2 : 1;
  std::vector<double> scales;
  if (present(n, scales_index)) scales = to_floats(n, require_constant(n, ctx, scales_index, "the scales input"), "scales");
  std::vector<std::int64_t> sizes_given;
  if (n.opset >= 11 && present(n, 3)) sizes_given = to_ints(n, require_constant(n, ctx, 3, "the sizes input"), "sizes");
  KILN_CHECK(scales.empty() != sizes_given.empty(), ErrorKind::Corrupt,
             n.where + "exactly one of the scales and sizes inputs must be given");

  Shape sizes = in;
  std::vector<double> full_scales(rank, 1.0);
  if (!scales.empty()) {
    KILN_CHECK(scales.size() == axes.size(), ErrorKind::Corrupt,
               n.where + "scales has " + std::to_string(scales.size()) + " values for " + std::to_string(axes.size()) + " axes");
    for (std::size_t i = 0; i < axes.size(); ++i) {
      const auto a = static_cast<std::size_t>(axes[i]);
      KILN_CHECK(scales[i] > 0 && std::isfinite(scales[i]), ErrorKind::Corrupt,
                 n.where + "scales must be positive and finite, got " + float_str(scales[i]) + " for axis " +
                     std::to_string(a));
      full_scales[a] = scales[i];
      sizes[a] = resized_extent(n, std::floor(static_cast<double>(in[a]) * scales[i]), in[a], scales[i], a);
    }
    attrs.set("scales", full_scales);
  } else {
    KILN_CHECK(sizes_given.size() == axes.size(), ErrorKind::Corrupt,
               n.where + "sizes has " + std::to_string(sizes_given.size()) + " values for " + std::to_string(axes.size()) + " axes");
    const std::string policy = n.attrs.get_string("keep_aspect_ratio_policy", "stretch");
    if (policy == "stretch") {
      for (std::size_t i = 0; i < axes.size(); ++i) sizes[static_cast<std::size_t>(axes[i])] = sizes_given[i];
    } else {
      KILN_CHECK(policy == "not_larger" || policy == "not_smaller", ErrorKind::Corrupt,
                 n.where + "unknown keep_aspect_ratio_policy '" + policy + "'");
      // One scale for all the axes, then out = round(scale * in) (ONNX 18).
      double scale = policy == "not_larger" ? INFINITY : 0.0;
      for (std::size_t i = 0; i < axes.size(); ++i) {
        const std::int64_t extent = in[static_cast<std::size_t>(axes[i])];
        KILN_CHECK(sizes_given[i] > 0 && extent > 0, ErrorKind::Corrupt,
                   n.where + "keep_aspect_ratio_policy '" + policy + "' needs positive sizes and input extents, got size " +
                       std::to_string(sizes_given[i]) + " for axis " + std::to_string(axes[i]) + " of extent " +
                       std::to_string(extent));
        const double r = static_cast<double>(sizes_given[i]) / static_cast<double>(extent);
        scale = policy == "not_larger" ? std::min(scale, r) : std::max(scale, r);
      }
      for (std::int64_t a : axes) {
        const auto axis = static_cast<std::size_t>(a);
        sizes[axis] = resized_extent(n, std::round(scale * static_cast<double>(in[axis])), in[axis], scale, axis);
        full_scales[axis] = scale;
      }
      attrs.set("scales", full_scales);
    }
  }
  attrs.set("sizes", checked_shape(sizes, n.where + "output size: "));
  // roi only matters for tf_crop_and_resize, which kiln's Resize does not implement.
  KILN_CHECK(attrs.get_string("coordinate_transformation_mode", "half_pixel") != "tf_crop_and_resize", ErrorKind::Unsupported,
             n.where + "coordinate_transformation_mode 'tf_crop_and_resize' is not supported");
  return ctx.emit(n, "Resize", {n.inputs[0]}, std::move(attrs));
}

// Upsample (deprecated in opset 10) is Resize with asymmetric coordinates
// and floor rounding: out[i] = in[floor(i / scale)] for nearest. Its scales
// are an attribute (opset 7) or a constant input (opset 9).
std::vector<ValueId> convert_upsample(const OnnxNode& n, ImportContext& ctx) {
  KILN_CHECK(present(n, 0), ErrorKind::Corrupt, n.where + "input X is missing");
  const Shape& in = ctx.type(n.inputs[0]).shape;
  std::vector<double> scales;
  if (auto it = n.attrs.all().find("scales"); it != n.attrs.all().end()) {
    const auto* values = std::get_if<std::vector<double>>(&it->second);
    KILN_CHECK(values != nullptr, ErrorKind::Corrupt, n.where + "attribute 'scales' is not a list of floats");
    scales = *values;
  }
  if (present(n, 1)) scales = to_floats(n, require_constant(n, ctx, 1, "the scales input"), "scales");
  KILN_CHECK(scales.size() == in.size(), ErrorKind::Corrupt,
             n.where + "scales has " + std::to_string(scales.size()) + " values for input " + shape_str(in));
  const std::string mode = n.attrs.get_string("mode", "nearest");
  KILN_CHECK(mode == "nearest" || mode == "linear" || mode == "bilinear", ErrorKind::Corrupt,
             n.where + "unknown mode '" + mode + "'");
  Shape sizes = in;
  for (std::size_t a = 0; a < in.size(); ++a) {
    KILN_CHECK(scales[a] > 0 && std::isfinite(scales[a]), ErrorKind::Corrupt,
               n.where + "scales must be positive and finite, got " + float_str(scales[a]) + " for axis " +
                   std::to_string(a));
    sizes[a] = resized_extent(n, std::floor(static_cast<double>(in[a]) * scales[a]), in[a], scales[a], a);
  }
  Attributes attrs;
  attrs.set("mode", std::string(mode == "nearest" ? "nearest" : "linear"));
  attrs.set("coordinate_transformation_mode", std::string("asymmetric"));
  attrs.set("nearest_mode", std::string("floor"));
  attrs.set("scales", scales);
  attrs.set("sizes", checked_shape(sizes, n.where + "output size: "));
  return ctx.emit(n, "Resize", {n.inputs[0]}, std::move(attrs));
}

// MeanVarianceNormalization as ONNX's function body defines it:
// (X - E[X]) / (sqrt(E[X^2] - E[X]^2) + 1e-9), the means over `axes`.
std::vector<ValueId> convert_mean_variance_normalization(const OnnxNode& n, ImportContext& ctx) {
  KILN_CHECK(present(n, 0), ErrorKind::Corrupt, n.where + "input X is missing");
  Attributes mean_attrs;
  mean_attrs.set("axes", n.attrs.get_ints("axes", {0, 2, 3}));
  mean_attrs.set("keepdims", std::int64_t{1});
  const ValueId x = n.inputs[0];
  const ValueId mean = ctx.emit(n, "ReduceMean", {x}, mean_attrs, "mean").at(0);
  const ValueId x_squared = ctx.emit(n, "Mul", {x, x}, {}, "x_squared").at(0);
  const ValueId mean_of_squares = ctx.emit(n, "ReduceMean", {x_squared}, mean_attrs, "mean_of_squares").at(0);
  const ValueId mean_squared = ctx.emit(n, "Mul", {mean, mean}, {}, "mean_squared").at(0);
  const ValueId variance = ctx.emit(n, "Sub", {mean_of_squares, mean_squared}, {}, "variance").at(0);
  const ValueId deviation = ctx.emit(n, "Sqrt", {variance}, {}, "deviation").at(0);
  Tensor epsilon(DType::f32, {});
  epsilon.values<float>()[0] = 1e-9f;
  const ValueId denominator =
      ctx.emit(n, "Add", {deviation, ctx.add_constant(n, std::move(epsilon))}, {}, "denominator").at(0);
  const ValueId centred = ctx.emit(n, "Sub", {x, mean}, {}, "centred").at(0);
  return ctx.emit(n, "Div", {centred, denominator}, {});
}

// Softmax, LogSoftmax and Hardmax before opset 13 normalise over the dims from `axis`
// on, flattened: Flatten, the op over the last axis, Reshape back.
std::vector<ValueId> convert_softmax(const OnnxNode& n, ImportContext& ctx) {
  KILN_CHECK(present(n, 0), ErrorKind::Corrupt, n.where + "input is missing");
  if (n.opset >= 13) return ctx.emit(n, n.op, {n.inputs[0]}, n.attrs);
  const Shape shape = ctx.type(n.inputs[0]).shape;
  const auto rank = static_cast<std::int64_t>(shape.size());
  std::int64_t axis = n.attrs.get_int("axis", 1);
  KILN_CHECK(axis >= -rank && axis < std::max<std::int64_t>(rank, 1), ErrorKind::Corrupt,
             n.where + "axis " + std::to_string(axis) + " is out of range for input " + shape_str(shape));
  if (axis < 0) axis += rank;
  Attributes last;
  last.set("axis", std::int64_t{-1});
  if (axis == rank - 1) return ctx.emit(n, n.op, {n.inputs[0]}, last);
  Attributes flatten;
  flatten.set("axis", axis);
  const ValueId flat = ctx.emit(n, "Flatten", {n.inputs[0]}, flatten, "flatten").at(0);
  const ValueId soft = ctx.emit(n, n.op, {flat}, last, "softmax").at(0);
  Attributes reshape;
  reshape.set("shape", std::vector<std::int64_t>(shape.begin(), shape.end()));
  return ctx.emit(n, "Reshape", {soft}, reshape);
}

// Gather with constant indices takes kiln's constant form (one input).
std::vector<ValueId> convert_gather(const OnnxNode& n, ImportContext& ctx) {
  KILN_CHECK(present(n, 0) && present(n, 1), ErrorKind::Corrupt, n.where + "Gather needs data and indices");
  const Tensor* indices = ctx.constant(n.inputs[1]);
  if (indices == nullptr) return ctx.emit(n, "Gather", {n.inputs[0], n.inputs[1]}, n.attrs);
  Attributes attrs = n.attrs;
  attrs.set("indices", to_ints(n, *indices, "the indices input"));
  attrs.set("indices_shape", std::vector<std::int64_t>(indices->shape().begin(), indices->shape().end()));
  return ctx.emit(n, "Gather", {n.inputs[0]}, std::move(attrs));
}

// Trilu: a constant k becomes the `k` attribute; a computed one stays an input.
// Expand: a constant shape becomes the `shape` attribute; one computed at run
// time (from a data-dependent length) stays an input, read on the host.
std::vector<ValueId> convert_expand(const OnnxNode& n, ImportContext& ctx) {
  KILN_CHECK(present(n, 0) && present(n, 1), ErrorKind::Corrupt, n.where + "Expand needs its input and shape");
  const Tensor* shape = ctx.constant(n.inputs[1]);
  if (shape == nullptr) return ctx.emit(n, "Expand", {n.inputs[0], n.inputs[1]}, n.attrs);
  Attributes attrs = n.attrs;
  attrs.set("shape", to_ints(n, *shape, "the shape input"));
  return ctx.emit(n, "Expand", {n.inputs[0]}, std::move(attrs));
}

std::vector<ValueId> convert_trilu(const OnnxNode& n, ImportContext& ctx) {
  KILN_CHECK(present(n, 0), ErrorKind::Corrupt, n.where + "input is missing");
  if (!present(n, 1)) return ctx.emit(n, "Trilu", {n.inputs[0]}, n.attrs);
  const Tensor* k = ctx.constant(n.inputs[1]);
  if (k == nullptr) return ctx.emit(n, "Trilu", {n.inputs[0], n.inputs[1]}, n.attrs);
  Attributes attrs = n.attrs;
  attrs.set("k", to_scalar_int(n, *k, "the k input"));
  return ctx.emit(n, "Trilu", {n.inputs[0]}, std::move(attrs));
}

std::vector<ValueId> convert_cumsum(const OnnxNode& n, ImportContext& ctx) {
  Attributes attrs = n.attrs;
  attrs.set("axis", to_scalar_int(n, require_constant(n, ctx, 1, "the axis input"), "axis"));
  return ctx.emit(n, "CumSum", inputs_upto(n, 1), std::move(attrs));
}

// TopK: a constant K becomes attribute k; a K computed at run time (torchvision's
// min(k, number of candidates)) stays an input, and the outputs' extent along
// the axis is then known only at run time.
std::vector<ValueId> convert_topk(const OnnxNode& n, ImportContext& ctx) {
  KILN_CHECK(present(n, 1), ErrorKind::Corrupt, n.where + "the K input is missing");
  const Tensor* k = ctx.constant(n.inputs[1]);
  if (k == nullptr) return ctx.emit(n, "TopK", inputs_upto(n, 2), n.attrs);
  Attributes attrs = n.attrs;
  attrs.set("k", to_scalar_int(n, *k, "K"));
  return ctx.emit(n, "TopK", inputs_upto(n, 1), std::move(attrs));
}

// ---- ops that only produce constants or aliases -----------------------------------

std::vector<ValueId> convert_constant(const OnnxNode& n, ImportContext& ctx) {
  if (const onnx::TensorProto* t = tensor_attribute(*n.proto, "value"))
    return {ctx.add_constant(n, tensor_from_proto(*t, ctx.base_dir(), n.where))};
  const auto& a = n.attrs;
  if (a.has("value_float")) return {ctx.add_constant(n, Tensor::scalar_f32(static_cast<float>(a.get_float("value_float", 0))))};
  if (a.has("value_int")) return {ctx.add_constant(n, Tensor::from_i64({}, {a.get_int("value_int", 0)}))};
  if (a.has("value_ints")) {
    auto v = a.get_ints("value_ints", {});
    const auto size = static_cast<std::int64_t>(v.size());
    return {ctx.add_constant(n, Tensor::from_i64({size}, std::move(v)))};
  }
  if (a.has("value_floats")) {
    const auto& v = std::get<std::vector<double>>(a.all().at("value_floats"));
    std::vector<float> f(v.begin(), v.end());
    return {ctx.add_constant(n, Tensor::from_f32({static_cast<std::int64_t>(f.size())}, std::move(f)))};
  }
  throw_error(ErrorKind::Unsupported, n.where + "Constant needs a value, value_float(s) or value_int(s) attribute "
                                               "(sparse and string values are not supported)");
}

// ConstantOfShape: folded at import; a shape computed at run time (from a
// data-dependent value's Shape) makes a host step filling a dynamic tensor.
std::vector<ValueId> convert_constant_of_shape(const OnnxNode& n, ImportContext& ctx) {
  KILN_CHECK(present(n, 0), ErrorKind::Corrupt, n.where + "the shape input is missing");
  Tensor value = Tensor::from_f32({1}, {0.0f});
  if (const onnx::TensorProto* t = tensor_attribute(*n.proto, "value")) {
    value = tensor_from_proto(*t, "", n.where + "attribute 'value': ");
    KILN_CHECK(value.numel() == 1, ErrorKind::Corrupt,
               n.where + "attribute 'value' must hold one element, it has shape " + shape_str(value.shape()));
  }
  if (ctx.constant(n.inputs[0]) == nullptr)
    return ctx.emit(n, "ConstantOfShape", {n.inputs[0], ctx.add_constant(n, value.reshaped({}))}, {});
  const Shape shape = checked_shape(to_ints(n, *ctx.constant(n.inputs[0]), "shape"), n.where);
  KILN_CHECK(num_elements(shape) <= kMaxFoldElements, ErrorKind::Corrupt,
             n.where + "a constant of shape " + shape_str(shape) + " is larger than kiln's import limit");
  // The value's bytes are repeated as they are: no round trip through double,
  // which would lose int64 values past 2^53 (and overflow converting back).
  ctx.charge_folded_bytes(n, num_elements(shape) * static_cast<std::int64_t>(dtype_size(value.dtype())));
  Tensor out(value.dtype(), shape);
  const std::size_t size = dtype_size(out.dtype());
  std::byte* dst = out.bytes().data();
  for (std::size_t offset = 0; offset < out.nbytes(); offset += size) std::memcpy(dst + offset, value.bytes().data(), size);
  return {ctx.add_constant(n, std::move(out))};
}

// Shapes are static, so Shape is always a constant.
std::vector<ValueId> convert_shape(const OnnxNode& n, ImportContext& ctx) {
  KILN_CHECK(present(n, 0), ErrorKind::Corrupt, n.where + "input is missing");
  const Shape& shape = ctx.type(n.inputs[0]).shape;
  const auto rank = static_cast<std::int64_t>(shape.size());
  auto clamp = [rank](std::int64_t i) { return std::clamp<std::int64_t>(i < 0 ? i + rank : i, 0, rank); };
  const std::int64_t start = clamp(n.attrs.get_int("start", 0));
  const std::int64_t end = std::max(start, clamp(n.attrs.get_int("end", rank)));
  std::vector<std::int64_t> dims(shape.begin() + start, shape.begin() + end);
  // A dim known only at run time (or an unknown rank) is read then, on the host.
  const bool unknown = ctx.type(n.inputs[0]).dynamic &&
                       (shape.empty() || std::find(dims.begin(), dims.end(), graph::kDynamicDim) != dims.end());
  if (unknown) return ctx.emit(n, "Shape", inputs_upto(n, 1), n.attrs);
  const auto count = static_cast<std::int64_t>(dims.size());
  return {ctx.add_constant(n, Tensor::from_i64({count}, std::move(dims)))};
}

std::vector<ValueId> convert_size(const OnnxNode& n, ImportContext& ctx) {
  KILN_CHECK(present(n, 0), ErrorKind::Corrupt, n.where + "input is missing");
  KILN_CHECK(!ctx.type(n.inputs[0]).dynamic, ErrorKind::Unsupported,
             n.where + "Size of a value whose shape is only known at run time is not supported");
  return {ctx.add_constant(n, Tensor::from_i64({}, {num_elements(ctx.type(n.inputs[0]).shape)}))};
}

// OneHot: the constant depth input becomes an attribute (a float depth is
// truncated, as ONNX says).
std::vector<ValueId> convert_one_hot(const OnnxNode& n, ImportContext& ctx) {
  const Tensor& depth = require_constant(n, ctx, 1, "the depth input");
  KILN_CHECK(depth.numel() == 1, ErrorKind::Corrupt, n.where + "the depth input must hold one value");
  const double value = to_floats(n, depth, "the depth input").at(0);
  const std::optional<std::int64_t> extent = graph::to_int64_in_range(std::trunc(value), 1, kMaxTensorElements);
  KILN_CHECK(extent.has_value(), ErrorKind::InvalidArgument,
             n.where + "depth " + float_str(value) + " must be at least 1 and at most " +
                 std::to_string(kMaxTensorElements));
  Attributes attrs = n.attrs;
  attrs.set("depth", *extent);
  KILN_CHECK(present(n, 0) && present(n, 2), ErrorKind::Corrupt, n.where + "OneHot needs indices and values");
  return ctx.emit(n, "OneHot", {n.inputs[0], n.inputs[2]}, std::move(attrs));
}

// ---- normalizations and PRelu, written as ops kiln has kernels for ----------------

graph::ValueId reshaped(const OnnxNode& n, ImportContext& ctx, graph::ValueId value, std::vector<std::int64_t> shape,
                        const std::string& suffix) {
  Attributes attrs;
  attrs.set("shape", std::move(shape));
  return ctx.emit(n, "Reshape", {value}, std::move(attrs), suffix).at(0);
}

// Each row of x ([rows..., length]) normalised to zero mean and unit variance
// by a LayerNormalization over its last axis with unit scale.
graph::ValueId normalized_rows(const OnnxNode& n, ImportContext& ctx, graph::ValueId x, std::int64_t length,
                               double epsilon) {
  ctx.charge_folded_bytes(n, length * static_cast<std::int64_t>(sizeof(float)));
  const graph::ValueId ones =
      ctx.add_constant(n, Tensor::from_f32({length}, std::vector<float>(static_cast<std::size_t>(length), 1.0f)));
  Attributes attrs;
  attrs.set("axis", std::int64_t{-1});
  attrs.set("epsilon", epsilon);
  return ctx.emit(n, "LayerNormalization", {x, ones}, std::move(attrs), "normalized").at(0);
}

// InstanceNormalization and GroupNormalization (opset 18: scale and bias per
// group): x [N, C, spatial...] as rows [N, G, C/G * spatial], each normalised,
// then scaled and shifted per channel (instance) or group, and reshaped back.
std::vector<ValueId> convert_instance_group_norm(const OnnxNode& n, ImportContext& ctx) {
  const bool instance = n.op == "InstanceNormalization";
  KILN_CHECK(present(n, 0) && present(n, 1) && present(n, 2), ErrorKind::Corrupt,
             n.where + n.op + " needs inputs X, scale and B");
  const graph::TensorType x = ctx.type(n.inputs[0]);  // a copy: emit() may move the graph's values
  KILN_CHECK(!x.dynamic && x.shape.size() >= 3, ErrorKind::Unsupported,
             n.where + n.op + " needs a static input with channels and spatial axes, got " + graph::type_str(x));
  const std::int64_t batch = x.shape[0], channels = x.shape[1];
  const std::int64_t groups = instance ? channels : n.attrs.get_int("num_groups", 0);
  KILN_CHECK(groups >= 1 && channels % groups == 0, ErrorKind::InvalidArgument,
             n.where + "num_groups " + std::to_string(groups) + " must divide the " + std::to_string(channels) +
                 " channels");
  const std::int64_t per_group = channels / groups;
  const std::int64_t spatial = num_elements(Shape(x.shape.begin() + 2, x.shape.end()));
  const std::int64_t length = per_group * spatial;
  for (int slot : {1, 2})
    KILN_CHECK(ctx.type(n.inputs[static_cast<std::size_t>(slot)]).shape == Shape{groups}, ErrorKind::ShapeMismatch,
               n.where + (slot == 1 ? "scale" : "B") + " must hold " + std::to_string(groups) + " values, got " +
                   graph::type_str(ctx.type(n.inputs[static_cast<std::size_t>(slot)])));
  const double epsilon = n.attrs.get_float("epsilon", 1e-5);
  const graph::ValueId rows = reshaped(n, ctx, n.inputs[0], {batch, groups, length}, "rows");
  const graph::ValueId normal = normalized_rows(n, ctx, rows, length, epsilon);
  const graph::ValueId scale = reshaped(n, ctx, n.inputs[1], {groups, 1}, "scale");
  const graph::ValueId bias = reshaped(n, ctx, n.inputs[2], {groups, 1}, "bias");
  const graph::ValueId scaled = ctx.emit(n, "Mul", {normal, scale}, {}, "scaled").at(0);
  const graph::ValueId shifted = ctx.emit(n, "Add", {scaled, bias}, {}, "shifted").at(0);
  Attributes back;
  back.set("shape", std::vector<std::int64_t>(x.shape.begin(), x.shape.end()));
  return ctx.emit(n, "Reshape", {shifted}, std::move(back));
}

// LpNormalization: x divided by its L1 or L2 norm along `axis`.
std::vector<ValueId> convert_lp_normalization(const OnnxNode& n, ImportContext& ctx) {
  KILN_CHECK(present(n, 0), ErrorKind::Corrupt, n.where + "input is missing");
  const std::int64_t p = n.attrs.get_int("p", 2);
  KILN_CHECK(p == 1 || p == 2, ErrorKind::InvalidArgument, n.where + "p is " + std::to_string(p) + "; it must be 1 or 2");
  Attributes reduce;
  reduce.set("axes", std::vector<std::int64_t>{n.attrs.get_int("axis", -1)});
  reduce.set("keepdims", std::int64_t{1});
  const graph::ValueId norm =
      ctx.emit(n, p == 1 ? "ReduceL1" : "ReduceL2", {n.inputs[0]}, std::move(reduce), "norm").at(0);
  return ctx.emit(n, "Div", {n.inputs[0], norm}, {});
}

// PRelu: x where x >= 0, slope * x elsewhere, as Relu(x) - slope * Relu(-x)
// (slope broadcasts to x; the pointwise chain fuses into one kernel).
std::vector<ValueId> convert_prelu(const OnnxNode& n, ImportContext& ctx) {
  KILN_CHECK(present(n, 0) && present(n, 1), ErrorKind::Corrupt, n.where + "PRelu needs inputs X and slope");
  const graph::ValueId x = n.inputs[0];
  const graph::ValueId positive = ctx.emit(n, "Relu", {x}, {}, "positive").at(0);
  const graph::ValueId negated = ctx.emit(n, "Neg", {x}, {}, "negated").at(0);
  const graph::ValueId magnitude = ctx.emit(n, "Relu", {negated}, {}, "magnitude").at(0);
  const graph::ValueId sloped = ctx.emit(n, "Mul", {n.inputs[1], magnitude}, {}, "sloped").at(0);
  const auto out = ctx.emit(n, "Sub", {positive, sloped}, {});
  const Shape slope = ctx.type(n.inputs[1]).shape;
  const Shape x_shape = ctx.type(x).shape;
  KILN_CHECK(ctx.type(out.at(0)).shape == x_shape, ErrorKind::ShapeMismatch,
             n.where + "slope " + shape_str(slope) + " must broadcast to X " + shape_str(x_shape));
  return out;
}

// CastLike: Cast to the second input's element type.
std::vector<ValueId> convert_cast_like(const OnnxNode& n, ImportContext& ctx) {
  KILN_CHECK(present(n, 0) && present(n, 1), ErrorKind::Corrupt, n.where + "CastLike needs two inputs");
  Attributes attrs;
  attrs.set("to", static_cast<std::int64_t>(onnx_from_dtype(ctx.type(n.inputs[1]).dtype)));
  return ctx.emit(n, "Cast", inputs_upto(n, 1), std::move(attrs));
}

// EyeLike: ones on the k-th diagonal of a matrix shaped like the input (only
// its shape is read), in the `dtype` attribute's type or the input's.
std::vector<ValueId> convert_eye_like(const OnnxNode& n, ImportContext& ctx) {
  KILN_CHECK(present(n, 0), ErrorKind::Corrupt, n.where + "input is missing");
  const graph::TensorType& like = ctx.type(n.inputs[0]);
  KILN_CHECK(like.shape.size() == 2, ErrorKind::ShapeMismatch,
             n.where + "the input has rank " + std::to_string(like.shape.size()) + "; EyeLike needs a matrix");
  DType dtype = like.dtype;
  if (n.attrs.has("dtype")) {
    const std::int64_t code = n.attrs.get_int("dtype", 0);
    const std::optional<DType> given = dtype_from_onnx(static_cast<int>(code));
    KILN_CHECK(given.has_value(), ErrorKind::Unsupported,
               n.where + "attribute 'dtype' = " + std::to_string(code) + " is not a type kiln has");
    dtype = *given;
  }
  KILN_CHECK(!like.dynamic, ErrorKind::Unsupported,
             n.where + "the input's shape is only known at run time; EyeLike folds at import");
  const std::int64_t rows = like.shape[0], cols = like.shape[1];
  const std::int64_t k = n.attrs.get_int("k", 0);
  const std::optional<std::int64_t> elements = graph::checked_product(Shape(like.shape));
  const std::optional<std::int64_t> bytes_needed =
      elements ? graph::checked_mul(*elements, static_cast<std::int64_t>(dtype_size(dtype))) : std::nullopt;
  KILN_CHECK(bytes_needed.has_value(), ErrorKind::InvalidArgument,
             n.where + "a " + shape_str(like.shape) + " matrix overflows 64-bit sizes");
  ctx.charge_folded_bytes(n, *bytes_needed);
  Tensor eye(dtype, like.shape);  // zero-filled
  const std::span<std::byte> bytes = eye.bytes();
  // k from the file may be any int64: a diagonal that misses the matrix
  // writes nothing, and r + k cannot overflow for one that meets it.
  for (std::int64_t r = 0; k > -rows && k < cols && r < rows; ++r) {
    const std::int64_t c = r + k;
    if (c < 0 || c >= cols) continue;
    std::byte* at = bytes.data() + static_cast<std::size_t>(r * cols + c) * dtype_size(dtype);
    switch (dtype) {
      case DType::f32: { const float one = 1.0f; std::memcpy(at, &one, sizeof one); break; }
      case DType::f16: { const std::uint16_t one = f16_bits(1.0f); std::memcpy(at, &one, sizeof one); break; }
      case DType::bf16: { const std::uint16_t one = bf16_bits(1.0f); std::memcpy(at, &one, sizeof one); break; }
      case DType::i32: { const std::int32_t one = 1; std::memcpy(at, &one, sizeof one); break; }
      case DType::i64: { const std::int64_t one = 1; std::memcpy(at, &one, sizeof one); break; }
      case DType::u8:
      case DType::boolean: *at = std::byte{1}; break;
    }
  }
  return {ctx.add_constant(n, std::move(eye))};
}

// Range: integer ranges in int64 arithmetic (exact, and a distance that
// overflows is an error), f32 ranges in double as ONNX's reference does.
std::vector<ValueId> convert_range(const OnnxNode& n, ImportContext& ctx) {
  const Tensor& start = require_constant(n, ctx, 0, "the start input");
  const Tensor& limit = require_constant(n, ctx, 1, "the limit input");
  const Tensor& delta = require_constant(n, ctx, 2, "the delta input");
  KILN_CHECK(start.numel() == 1 && limit.numel() == 1 && delta.numel() == 1, ErrorKind::Corrupt,
             n.where + "start, limit and delta must be scalars");
  KILN_CHECK(start.dtype() == limit.dtype() && start.dtype() == delta.dtype(), ErrorKind::Corrupt,
             n.where + "start, limit and delta must have one dtype, got " + std::string(dtype_name(start.dtype())) +
                 ", " + std::string(dtype_name(limit.dtype())) + " and " + std::string(dtype_name(delta.dtype())));
  const std::string too_long = " values, more than kiln's import limit of " + std::to_string(kMaxFoldElements);
  if (start.dtype() == DType::f32) {
    const double s = start.values<float>()[0], l = limit.values<float>()[0], d = delta.values<float>()[0];
    KILN_CHECK(d != 0 && std::isfinite(s) && std::isfinite(l) && std::isfinite(d), ErrorKind::Corrupt,
               n.where + "delta must be non-zero and every input finite, got start " + float_str(s) + ", limit " +
                   float_str(l) + ", delta " + float_str(d));
    const double count = std::max(0.0, std::ceil((l - s) / d));
    KILN_CHECK(count <= static_cast<double>(kMaxFoldElements), ErrorKind::Corrupt,
               n.where + "a range from " + float_str(s) + " to " + float_str(l) + " by " + float_str(d) + " has " +
                   float_str(count) + too_long);
    ctx.charge_folded_bytes(n, static_cast<std::int64_t>(count) * 4);
    Tensor out(DType::f32, {static_cast<std::int64_t>(count)});
    auto values = out.values<float>();
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(s + static_cast<double>(i) * d);
    return {ctx.add_constant(n, std::move(out))};
  }
  const std::int64_t s = to_scalar_int(n, start, "start"), l = to_scalar_int(n, limit, "limit"),
                     d = to_scalar_int(n, delta, "delta");
  const std::string range = "a range from " + std::to_string(s) + " to " + std::to_string(l) + " by " + std::to_string(d);
  KILN_CHECK(d != 0, ErrorKind::Corrupt, n.where + range + ": delta must be non-zero");
  const std::optional<std::int64_t> distance = graph::checked_sub(l, s);
  KILN_CHECK(distance.has_value(), ErrorKind::Corrupt, n.where + range + ": the distance overflows int64");
  // ceil(distance / d) when both have the same sign, else empty.
  std::int64_t count = 0;
  if (*distance > 0 && d > 0) count = (*distance - 1) / d + 1;
  if (*distance < 0 && d < 0) count = (*distance + 1) / d + 1;
  KILN_CHECK(count <= kMaxFoldElements, ErrorKind::Corrupt, n.where + range + " has " + std::to_string(count) + too_long);
  ctx.charge_folded_bytes(n, count * static_cast<std::int64_t>(dtype_size(start.dtype())));
  // Every value lies between start and limit, so it fits the dtype.
  Tensor out(start.dtype(), {count});
  for (std::int64_t i = 0; i < count; ++i) {
    const std::int64_t value = s + i * d;
    if (out.dtype() == DType::i64) out.values<std::int64_t>()[static_cast<std::size_t>(i)] = value;
    else out.values<std::int32_t>()[static_cast<std::size_t>(i)] = static_cast<std::int32_t>(value);
  }
  return {ctx.add_constant(n, std::move(out))};
}

// Identity: the output is the input.
std::vector<ValueId> alias_input(const OnnxNode& n, ImportContext&) {
  KILN_CHECK(present(n, 0), ErrorKind::Corrupt, n.where + "input is missing");
  return {n.inputs[0]};
}

// LayerNormalization's optional Mean and InvStdDev outputs, when the file
// declares them, come from the same node (kiln's `statistics` attribute).
std::vector<ValueId> convert_layer_norm(const OnnxNode& n, ImportContext& ctx) {
  Attributes attrs = n.attrs;
  if (n.num_outputs > 1) attrs.set("statistics", std::int64_t{1});
  return ctx.emit(n, "LayerNormalization", inputs_upto(n, n.inputs.size()), std::move(attrs));
}

// SoftmaxCrossEntropyLoss = NegativeLogLikelihoodLoss of LogSoftmax over the
// class axis (ONNX's own function body); the log-probabilities are its
// optional second output.
std::vector<ValueId> convert_softmax_cross_entropy(const OnnxNode& n, ImportContext& ctx) {
  KILN_CHECK(present(n, 0) && present(n, 1), ErrorKind::Corrupt, n.where + "scores and labels are required");
  Attributes softmax_attrs;
  softmax_attrs.set("axis", std::int64_t{1});
  const ValueId log_prob = ctx.emit(n, "LogSoftmax", {n.inputs[0]}, std::move(softmax_attrs), "log_prob").at(0);
  Attributes loss_attrs;
  loss_attrs.set("reduction", n.attrs.get_string("reduction", "mean"));
  if (n.attrs.has("ignore_index")) loss_attrs.set("ignore_index", n.attrs.get_int("ignore_index", 0));
  std::vector<ValueId> loss_inputs = {log_prob, n.inputs[1]};
  if (present(n, 2)) loss_inputs.push_back(n.inputs[2]);
  const ValueId loss = ctx.emit(n, "NegativeLogLikelihoodLoss", loss_inputs, std::move(loss_attrs)).at(0);
  return {loss, log_prob};
}

// Dropout at inference is the identity, with an all-true mask if one is asked for.
std::vector<ValueId> convert_dropout(const OnnxNode& n, ImportContext& ctx) {
  KILN_CHECK(present(n, 0), ErrorKind::Corrupt, n.where + "input is missing");
  if (present(n, 2)) {
    const Tensor& training = require_constant(n, ctx, 2, "the training_mode input");
    KILN_CHECK(training.numel() == 1 && training.dtype() == DType::boolean, ErrorKind::Corrupt,
               n.where + "training_mode must be one bool");
    KILN_CHECK(training.bytes()[0] == std::byte{0}, ErrorKind::Unsupported,
               n.where + "training_mode=true is not supported (kiln runs inference only)");
  }
  std::vector<ValueId> out{n.inputs[0]};
  if (n.num_outputs > 1) {
    ctx.charge_folded_bytes(n, num_elements(ctx.type(n.inputs[0]).shape));
    Tensor mask(DType::boolean, ctx.type(n.inputs[0]).shape);
    for (std::byte& b : mask.bytes()) b = std::byte{1};
    out.push_back(ctx.add_constant(n, std::move(mask)));
  }
  return out;
}

}  // namespace

const std::map<std::string, OpRule>& op_rules() {
  static const std::map<std::string, OpRule> rules = [] {
    std::map<std::string, OpRule> r;
    for (const char* op : {"Add", "Sub", "Mul", "Div", "Pow", "Sqrt", "Erf", "Exp", "Sin", "Cos", "Neg", "Abs", "Log",
                           "Reciprocal", "Floor", "Ceil", "Relu", "Sigmoid", "HardSigmoid", "HardSwish", "Tanh", "Gelu",
                           "LeakyRelu", "Where", "Equal", "Less", "Greater", "Not", "And", "Or", "Cast", "Transpose",
                           "Flatten", "Concat", "GlobalAveragePool", "BatchNormalization", "LRN",
                           "MatMul", "Gemm", "NonZero", "NonMaxSuppression", "Min", "Max", "ArgMax", "ArgMin",
                           "GatherElements", "ScatterElements", "ScatterND", "GatherND", "Mod", "IsNaN", "IsInf", "Shrink", "Round", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh", "Tan", "Atan", "Asin", "Acos", "Sum", "Mean", "Sign", "Xor", "LessOrEqual", "GreaterOrEqual", "Elu", "Selu", "Celu", "ThresholdedRelu", "Softplus", "Softsign", "Mish"})
      r.emplace(op, direct(op));
    r.emplace("Conv", OpRule{"Conv", convert_conv});
    r.emplace("ConvTranspose", OpRule{"ConvTranspose", convert_conv_transpose});
    r.emplace("MaxPool", pool("MaxPool"));
    r.emplace("AveragePool", pool("AveragePool"));
    r.emplace("Clip", OpRule{"Clip", convert_clip});
    r.emplace("GlobalMaxPool", OpRule{"ReduceMax", convert_global_max_pool});
    r.emplace("DepthToSpace", OpRule{"Transpose", convert_depth_space});
    r.emplace("SpaceToDepth", OpRule{"Transpose", convert_depth_space});
    r.emplace("Softmax", OpRule{"Softmax", convert_softmax});
    r.emplace("LogSoftmax", OpRule{"LogSoftmax", convert_softmax});
    r.emplace("Hardmax", OpRule{"Hardmax", convert_softmax});
    r.emplace("Reshape", OpRule{"Reshape", convert_reshape});
    r.emplace("Slice", OpRule{"Slice", convert_slice});
    r.emplace("Split", OpRule{"Split", convert_split});
    r.emplace("Squeeze", ints_input_to_attr("Squeeze", "axes", true));
    r.emplace("Unsqueeze", ints_input_to_attr("Unsqueeze", "axes", false));
    r.emplace("Expand", OpRule{"Expand", convert_expand});
    r.emplace("Tile", ints_input_to_attr("Tile", "repeats", false));
    r.emplace("Pad", OpRule{"Pad", convert_pad});
    r.emplace("Resize", OpRule{"Resize", convert_resize});
    r.emplace("Upsample", OpRule{"Resize", convert_upsample});
    r.emplace("MeanVarianceNormalization", OpRule{"Div", convert_mean_variance_normalization});
    for (const char* op : {"ReduceMean", "ReduceSum", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                           "ReduceSumSquare", "ReduceLogSum", "ReduceLogSumExp"})
      r.emplace(op, reduce(op));
    r.emplace("Gather", OpRule{"Gather", convert_gather});
    r.emplace("CumSum", OpRule{"CumSum", convert_cumsum});
    r.emplace("Trilu", OpRule{"Trilu", convert_trilu});
    r.emplace("TopK", OpRule{"TopK", convert_topk});
    r.emplace("Constant", OpRule{"", convert_constant});
    r.emplace("ConstantOfShape", OpRule{"", convert_constant_of_shape});  // "ConstantOfShape" only at run time
    r.emplace("Shape", OpRule{"Shape", convert_shape});
    r.emplace("EyeLike", OpRule{"", convert_eye_like});
    r.emplace("CastLike", OpRule{"Cast", convert_cast_like});
    r.emplace("OneHot", OpRule{"OneHot", convert_one_hot});
    r.emplace("If", OpRule{"If", convert_if});
    r.emplace("Loop", OpRule{"Loop", convert_loop});
    r.emplace("Scan", OpRule{"Scan", convert_scan});
    r.emplace("InstanceNormalization", OpRule{"LayerNormalization", convert_instance_group_norm});
    r.emplace("GroupNormalization", OpRule{"LayerNormalization", convert_instance_group_norm});
    r.emplace("LpNormalization", OpRule{"ReduceL2", convert_lp_normalization});
    r.emplace("PRelu", OpRule{"Sub", convert_prelu});
    r.emplace("Size", OpRule{"", convert_size});
    r.emplace("Range", OpRule{"", convert_range});
    r.emplace("Identity", OpRule{"", alias_input});
    r.emplace("Einsum", OpRule{"MatMul", convert_einsum});
    r.emplace("LSTM", OpRule{"Recurrence", convert_lstm});
    r.emplace("GRU", OpRule{"Recurrence", convert_gru});
    r.emplace("RNN", OpRule{"Recurrence", convert_rnn});
    r.emplace("HannWindow", OpRule{"", convert_hann_window});
    r.emplace("HammingWindow", OpRule{"", convert_hamming_window});
    r.emplace("BlackmanWindow", OpRule{"", convert_blackman_window});
    r.emplace("MelWeightMatrix", OpRule{"", convert_mel});
    r.emplace("DFT", OpRule{"MatMul", convert_dft_op});
    r.emplace("STFT", OpRule{"Conv", convert_stft_op});
    r.emplace("Dropout", OpRule{"", convert_dropout});
    r.emplace("LayerNormalization", OpRule{"LayerNormalization", convert_layer_norm});
    r.emplace("NegativeLogLikelihoodLoss", direct("NegativeLogLikelihoodLoss"));
    r.emplace("ReverseSequence", direct("ReverseSequence"));
    r.emplace("SoftmaxCrossEntropyLoss", OpRule{"NegativeLogLikelihoodLoss", convert_softmax_cross_entropy});
    return r;
  }();
  return rules;
}

}  // namespace kiln::onnx_import
