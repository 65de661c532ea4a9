// ONNX's signal ops (opset 17), as audio front ends use them:
//
// - HannWindow, HammingWindow, BlackmanWindow and MelWeightMatrix take only
//   sizes and frequencies, which are constants in every exported model: they
//   fold to constant tensors here, computed in double precision as ONNX
//   Runtime computes them.
// - DFT is a matrix product with a constant basis of cosines and sines
//   (Y = X B over the signal axis, real and imaginary parts interleaved), so
//   it runs on the GEMM template; STFT is the same basis, times the window,
//   as a strided convolution over the signal: one kernel for every frame.
// A direct DFT costs O(N^2) per frame; audio models use frames of 256 to
// 2048 samples, where the basis (N x 2K floats) stays a few MiB.
#include "graph/onnx/convert_audio.h"

#include "graph/onnx/constant_inputs.h"
#include "src/base/check.h"

#include <cmath>
#include <numbers>

namespace kiln::onnx_import {

using graph::Attributes;
using graph::ValueId;

namespace {

// The largest DFT basis kiln builds (N x 2K f32); past it the op is refused.
constexpr std::int64_t kMaxBasisBytes = std::int64_t{64} << 20;

ValueId with_ints(const OnnxNode& n, ImportContext& ctx, const std::string& op, ValueId value, const std::string& name,
                  std::vector<std::int64_t> ints, const std::string& suffix) {
  Attributes attrs;
  attrs.set(name, std::move(ints));
  return ctx.emit_one(n, op, {value}, std::move(attrs), suffix);
}

// A scalar size input (a window's length, a frame step): a positive constant.
std::int64_t size_input(const OnnxNode& n, ImportContext& ctx, std::size_t index, const std::string& role,
                        std::int64_t minimum = 1) {
  const std::int64_t value = to_scalar_int(n, require_constant(n, ctx, index, role), role);
  KILN_CHECK(value >= minimum && value <= (std::int64_t{1} << 24), ErrorKind::InvalidArgument,
             n.where + role + " is " + std::to_string(value) + "; it must be in [" + std::to_string(minimum) +
                 ", 16777216]");
  return value;
}

double float_input(const OnnxNode& n, ImportContext& ctx, std::size_t index, const std::string& role) {
  const std::vector<double> values = to_floats(n, require_constant(n, ctx, index, role), role);
  KILN_CHECK(values.size() == 1 && std::isfinite(values[0]), ErrorKind::InvalidArgument,
             n.where + role + " must be one finite value");
  return values[0];
}

// output_datatype: the window ops and MelWeightMatrix make f32 (ONNX's default, FLOAT = 1).
void require_float_output(const OnnxNode& n) {
  const std::int64_t type = n.attrs.get_int("output_datatype", 1);
  KILN_CHECK(type == 1, ErrorKind::Unsupported,
             n.where + "output_datatype " + std::to_string(type) + " is not supported (kiln makes FLOAT, 1)");
}

ValueId constant(const OnnxNode& n, ImportContext& ctx, Shape shape, const std::vector<double>& values) {
  Tensor t(DType::f32, std::move(shape));
  ctx.charge_folded_bytes(n, static_cast<std::int64_t>(t.nbytes()));
  auto out = t.values<float>();
  for (std::size_t i = 0; i < values.size(); ++i) out[i] = static_cast<float>(values[i]);
  return ctx.add_constant(n, std::move(t));
}

// Generalised cosine windows: w[i] = a0 - a1 cos(2 pi i / d) + a2 cos(4 pi i / d),
// d = size (periodic, the default) or size - 1 (symmetric).
std::vector<ValueId> convert_window(const OnnxNode& n, ImportContext& ctx, double a0, double a1, double a2) {
  require_float_output(n);
  const std::int64_t size = size_input(n, ctx, 0, "the size input");
  const bool periodic = n.attrs.get_int("periodic", 1) != 0;
  const double d = static_cast<double>(periodic ? size : std::max<std::int64_t>(size - 1, 1));
  std::vector<double> w(static_cast<std::size_t>(size));
  for (std::int64_t i = 0; i < size; ++i) {
    const double x = 2.0 * std::numbers::pi * static_cast<double>(i) / d;
    w[static_cast<std::size_t>(i)] = a0 - a1 * std::cos(x) + a2 * std::cos(2.0 * x);
  }
  return {constant(n, ctx, {size}, w)};
}

// The mel filter bank [dft_length / 2 + 1, num_mel_bins]: triangles between
// points equally spaced in mel (2595 log10(1 + f / 700)) over num_mel_bins + 2
// steps, each point's DFT bin floor((dft_length + 1) f / sample_rate).
std::vector<ValueId> convert_mel_weight_matrix(const OnnxNode& n, ImportContext& ctx) {
  require_float_output(n);
  const std::int64_t mels = size_input(n, ctx, 0, "num_mel_bins");
  const std::int64_t dft_length = size_input(n, ctx, 1, "dft_length");
  const std::int64_t rate = size_input(n, ctx, 2, "sample_rate");
  const double low = float_input(n, ctx, 3, "lower_edge_hertz");
  const double high = float_input(n, ctx, 4, "upper_edge_hertz");
  KILN_CHECK(low >= 0 && low < high, ErrorKind::InvalidArgument,
             n.where + "the frequency edges must satisfy 0 <= lower < upper");
  const std::int64_t bins = dft_length / 2 + 1;
  KILN_CHECK(bins * mels <= (std::int64_t{1} << 26), ErrorKind::InvalidArgument,
             n.where + "a mel matrix of " + std::to_string(bins) + " x " + std::to_string(mels) + " is too large");
  auto to_mel = [](double hz) { return 2595.0 * std::log10(1.0 + hz / 700.0); };
  const double low_mel = to_mel(low), step = (to_mel(high) - low_mel) / static_cast<double>(mels + 2);
  std::vector<std::int64_t> points(static_cast<std::size_t>(mels + 2));
  for (std::int64_t i = 0; i < mels + 2; ++i) {
    const double hz = 700.0 * (std::pow(10.0, (low_mel + step * static_cast<double>(i)) / 2595.0) - 1.0);
    points[static_cast<std::size_t>(i)] =
        static_cast<std::int64_t>(std::floor(static_cast<double>(dft_length + 1) * hz / static_cast<double>(rate)));
  }
  std::vector<double> w(static_cast<std::size_t>(bins * mels), 0.0);
  auto set = [&](std::int64_t bin, std::int64_t mel, double value) {
    if (bin >= 0 && bin < bins) w[static_cast<std::size_t>(bin * mels + mel)] = value;
  };
  for (std::int64_t m = 0; m < mels; ++m) {
    const std::int64_t left = points[m], center = points[m + 1], right = points[m + 2];
    if (center == left) set(center, m, 1.0);
    else
      for (std::int64_t j = left; j <= center; ++j)
        set(j, m, static_cast<double>(j - left) / static_cast<double>(center - left));
    for (std::int64_t j = center; j < right; ++j)
      set(j, m, static_cast<double>(right - j) / static_cast<double>(right - center));
  }
  return {constant(n, ctx, {bins, mels}, w)};
}

// The DFT basis for `length` samples of `channels` (1: real, 2: complex
// interleaved) to `outputs` frequencies, real and imaginary interleaved:
// row n * channels + c, column 2k + part. Forward: e^{-2 pi i kn / N};
// inverse: e^{+2 pi i kn / N} / N. `window` multiplies each sample's row.
std::vector<double> dft_basis(std::int64_t length, std::int64_t channels, std::int64_t outputs, bool inverse,
                              const std::vector<double>& window) {
  std::vector<double> basis(static_cast<std::size_t>(length * channels * outputs * 2));
  const double sign = inverse ? 1.0 : -1.0;
  const double scale = inverse ? 1.0 / static_cast<double>(length) : 1.0;
  for (std::int64_t s = 0; s < length; ++s) {
    const double w = window.empty() ? 1.0 : window[static_cast<std::size_t>(s)];
    for (std::int64_t k = 0; k < outputs; ++k) {
      // (k s) mod N keeps the angle exact for long transforms.
      const double angle = 2.0 * std::numbers::pi * static_cast<double>((k * s) % length) / static_cast<double>(length);
      const double c = std::cos(angle) * scale * w, sn = sign * std::sin(angle) * scale * w;
      const auto at = [&](std::int64_t channel, std::int64_t part) {
        return static_cast<std::size_t>(((s * channels + channel) * outputs + k) * 2 + part);
      };
      basis[at(0, 0)] = c;  // (a + ib)(c + i sn) = (a c - b sn) + i (a sn + b c)
      basis[at(0, 1)] = sn;
      if (channels == 2) {
        basis[at(1, 0)] = -sn;
        basis[at(1, 1)] = c;
      }
    }
  }
  return basis;
}

void check_basis_size(const OnnxNode& n, std::int64_t length, std::int64_t channels, std::int64_t outputs) {
  const std::int64_t bytes = length * channels * outputs * 2 * 4;
  KILN_CHECK(bytes <= kMaxBasisBytes, ErrorKind::Unsupported,
             n.where + "a transform of " + std::to_string(length) + " samples needs a " + std::to_string(bytes >> 20) +
                 " MiB basis; kiln computes DFT and STFT as products with their basis, up to " +
                 std::to_string(kMaxBasisBytes >> 20) + " MiB");
}

std::vector<std::int64_t> identity_perm(std::size_t rank) {
  std::vector<std::int64_t> perm(rank);
  for (std::size_t i = 0; i < rank; ++i) perm[i] = static_cast<std::int64_t>(i);
  return perm;
}

std::vector<ValueId> convert_dft(const OnnxNode& n, ImportContext& ctx) {
  KILN_CHECK(present(n, 0), ErrorKind::Corrupt, n.where + "the input is missing");
  const graph::TensorType type = ctx.type(n.inputs[0]);  // a copy: emitting nodes moves the graph's values
  const auto rank = static_cast<std::int64_t>(type.shape.size());
  KILN_CHECK(rank >= 2 && (type.shape.back() == 1 || type.shape.back() == 2), ErrorKind::ShapeMismatch,
             n.where + "the input must be [..., 1] (real) or [..., 2] (complex), got " + type_str(type));
  KILN_CHECK(type.dtype == DType::f32, ErrorKind::Unsupported,
             n.where + "only f32 signals are supported, got " + type_str(type));
  std::int64_t axis = n.attrs.get_int("axis", 1);
  KILN_CHECK(axis >= -rank && axis <= rank - 2 && axis != -1, ErrorKind::InvalidArgument,
             n.where + "axis " + std::to_string(axis) + " is not a signal axis of " + type_str(type));
  if (axis < 0) axis += rank;
  const bool inverse = n.attrs.get_int("inverse", 0) != 0;
  const bool onesided = n.attrs.get_int("onesided", 0) != 0;
  KILN_CHECK(!(inverse && onesided), ErrorKind::Unsupported, n.where + "onesided inverse DFTs are not supported");
  const std::int64_t channels = type.shape.back();
  const std::int64_t samples = type.shape[static_cast<std::size_t>(axis)];
  const std::int64_t length = present(n, 1) ? size_input(n, ctx, 1, "dft_length") : samples;
  const std::int64_t outputs = onesided ? length / 2 + 1 : length;
  check_basis_size(n, length, channels, outputs);

  // The signal axis moved next to the complex one: [..., N, C].
  ValueId x = n.inputs[0];
  std::vector<std::int64_t> perm = identity_perm(static_cast<std::size_t>(rank));
  const bool moved = axis != rank - 2;
  if (moved) {
    perm.erase(perm.begin() + axis);
    perm.insert(perm.end() - 1, axis);
    x = with_ints(n, ctx, "Transpose", x, "perm", perm, "signal_last");
  }
  // dft_length: zero-pad or truncate the signal.
  if (length != samples) {
    if (length > samples) {
      std::vector<std::int64_t> pads(static_cast<std::size_t>(2 * rank), 0);
      pads[static_cast<std::size_t>(rank + rank - 2)] = length - samples;
      x = with_ints(n, ctx, "Pad", x, "pads", pads, "zero_pad");
    } else {
      Attributes slice;
      slice.set("starts", std::vector<std::int64_t>{0});
      slice.set("ends", std::vector<std::int64_t>{length});
      slice.set("axes", std::vector<std::int64_t>{rank - 2});
      x = ctx.emit_one(n, "Slice", {x}, std::move(slice), "truncate");
    }
  }
  Shape outer(type.shape.begin(), type.shape.end() - 1);
  if (moved) {
    outer.erase(outer.begin() + axis);
  } else {
    outer.pop_back();
  }
  std::vector<std::int64_t> rows = outer;
  rows.push_back(length * channels);
  x = with_ints(n, ctx, "Reshape", x, "shape", rows, "rows");
  const ValueId basis = constant(n, ctx, {length * channels, 2 * outputs}, dft_basis(length, channels, outputs, inverse, {}));
  ValueId y = ctx.emit_one(n, "MatMul", {x, basis}, {}, "");
  std::vector<std::int64_t> out = outer;
  out.push_back(outputs);
  out.push_back(2);
  y = with_ints(n, ctx, "Reshape", y, "shape", out, "complex");
  if (moved) {
    // Back: the frequency axis to where the signal axis was.
    std::vector<std::int64_t> back = identity_perm(static_cast<std::size_t>(rank));
    back.erase(back.end() - 2);
    back.insert(back.begin() + axis, rank - 2);
    y = with_ints(n, ctx, "Transpose", y, "perm", back, "axis_back");
  }
  return {y};
}

// STFT: frames of frame_length samples every frame_step, each windowed and
// transformed: a Conv of the signal (channels: real, or real and imaginary)
// with the windowed basis as 2K filters, stride frame_step.
std::vector<ValueId> convert_stft(const OnnxNode& n, ImportContext& ctx) {
  KILN_CHECK(present(n, 0), ErrorKind::Corrupt, n.where + "the signal is missing");
  const graph::TensorType type = ctx.type(n.inputs[0]);  // a copy: emitting nodes moves the graph's values
  KILN_CHECK(type.shape.size() == 3 && (type.shape[2] == 1 || type.shape[2] == 2) && type.dtype == DType::f32,
             ErrorKind::ShapeMismatch,
             n.where + "the signal must be f32[batch, length, 1] (real) or [batch, length, 2] (complex), got " +
                 type_str(type));
  const std::int64_t batch = type.shape[0], samples = type.shape[1], channels = type.shape[2];
  const std::int64_t step = size_input(n, ctx, 1, "frame_step");
  std::vector<double> window;
  std::int64_t length = 0;
  const bool constant_window = present(n, 2) && ctx.constant(n.inputs[2]) != nullptr;
  if (present(n, 2)) {
    const graph::TensorType w = ctx.type(n.inputs[2]);
    KILN_CHECK(w.shape.size() == 1 && w.dtype == DType::f32, ErrorKind::ShapeMismatch,
               n.where + "the window must be f32[frame_length], got " + type_str(w));
    length = w.shape[0];
    if (constant_window) window = to_floats(n, *ctx.constant(n.inputs[2]), "the window");
  }
  if (present(n, 3)) {
    const std::int64_t given = size_input(n, ctx, 3, "frame_length");
    KILN_CHECK(length == 0 || length == given, ErrorKind::ShapeMismatch,
               n.where + "frame_length " + std::to_string(given) + " differs from the window's length " +
                   std::to_string(length));
    length = given;
  }
  KILN_CHECK(length > 0, ErrorKind::Corrupt, n.where + "needs a window or a frame_length");
  KILN_CHECK(length <= samples, ErrorKind::ShapeMismatch,
             n.where + "a frame of " + std::to_string(length) + " samples is longer than the signal (" +
                 std::to_string(samples) + ")");
  const bool onesided = n.attrs.get_int("onesided", 1) != 0;
  KILN_CHECK(!(onesided && channels == 2), ErrorKind::InvalidArgument,
             n.where + "onesided is for real signals; this one is complex");
  const std::int64_t outputs = onesided ? length / 2 + 1 : length;
  check_basis_size(n, length, channels, outputs);

  // The basis as filters [2K, C, 1, L]: filter 2k + part, channel c, tap s.
  const std::vector<double> basis = dft_basis(length, channels, outputs, false, window);
  std::vector<double> filters(basis.size());
  for (std::int64_t s = 0; s < length; ++s)
    for (std::int64_t c = 0; c < channels; ++c)
      for (std::int64_t col = 0; col < 2 * outputs; ++col)
        filters[static_cast<std::size_t>((col * channels + c) * length + s)] =
            basis[static_cast<std::size_t>((s * channels + c) * 2 * outputs + col)];
  ValueId weight = constant(n, ctx, {2 * outputs, channels, 1, length}, filters);
  if (present(n, 2) && !constant_window) {
    const ValueId taps = with_ints(n, ctx, "Reshape", n.inputs[2], "shape", {1, 1, 1, length}, "window_taps");
    weight = ctx.emit_one(n, "Mul", {weight, taps}, {}, "windowed_basis");
  }
  // [batch, length, C] -> [batch, C, 1, length], convolved to [batch, 2K, 1, frames].
  ValueId x = with_ints(n, ctx, "Transpose", n.inputs[0], "perm", {0, 2, 1}, "channels_first");
  x = with_ints(n, ctx, "Reshape", x, "shape", {batch, channels, 1, samples}, "as_image");
  Attributes conv;
  conv.set("strides", std::vector<std::int64_t>{1, step});
  conv.set("kernel_shape", std::vector<std::int64_t>{1, length});
  const ValueId frames = ctx.emit_one(n, "Conv", {x, weight}, std::move(conv), "frames");
  const std::int64_t count = (samples - length) / step + 1;
  ValueId y = with_ints(n, ctx, "Reshape", frames, "shape", {batch, outputs, 2, count}, "split_parts");
  y = with_ints(n, ctx, "Transpose", y, "perm", {0, 3, 1, 2}, "");
  return {y};
}

}  // namespace

std::vector<ValueId> convert_hann_window(const OnnxNode& n, ImportContext& ctx) { return convert_window(n, ctx, 0.5, 0.5, 0.0); }
std::vector<ValueId> convert_hamming_window(const OnnxNode& n, ImportContext& ctx) {
  return convert_window(n, ctx, 25.0 / 46.0, 21.0 / 46.0, 0.0);
}
std::vector<ValueId> convert_blackman_window(const OnnxNode& n, ImportContext& ctx) {
  return convert_window(n, ctx, 0.42, 0.5, 0.08);
}
std::vector<ValueId> convert_mel(const OnnxNode& n, ImportContext& ctx) { return convert_mel_weight_matrix(n, ctx); }
std::vector<ValueId> convert_dft_op(const OnnxNode& n, ImportContext& ctx) { return convert_dft(n, ctx); }
std::vector<ValueId> convert_stft_op(const OnnxNode& n, ImportContext& ctx) { return convert_stft(n, ctx); }

}  // namespace kiln::onnx_import
