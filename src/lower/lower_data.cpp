// Lowerings of the data-movement ops. Each output element is a load (or, for
// linear Resize, a weighted sum of loads) from an input position computed
// from the output coordinates; the attribute rules come from the same plans
// the reference uses (graph/ops/data_plans.h). Squeeze and Unsqueeze move no
// data: they are views. Gather with a runtime indices tensor (i64),
// GatherElements (its indices are always a runtime i64/i32 tensor), Trilu with
// a runtime k, Shape and ConstantOfShape have no kernel: they fold at compile
// time or run on the host.
#include "graph/broadcast.h"
#include "graph/ops/data_plans.h"
#include "src/base/check.h"
#include "src/lower/index.h"
#include "src/lower/lowerings.h"

#include <kiln/error.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>

namespace kiln::lower {

using graph::ops::CoordinateMode;
using graph::ops::NearestMode;
using graph::ops::PadMode;
using graph::ops::ResizeAxis;
using graph::ops::ResizeMode;
using kir::Access;
using kir::Expr;
using kir::ScalarType;
using kir::Stmt;

namespace {

// A kernel over the output elements with buffers x (input 0) and y (output
// 0), both of the output's element type: these ops move elements of any type.
struct CopyKernel {
  kir::Kernel kernel;
  kir::Buf x, y;
  Expr index;
  ScalarType type;

  Expr load_x(Expr at) const { return kir::load(x, std::move(at), type); }
};

CopyKernel make_copy_kernel(const std::string& name, const OpContext& ctx) {
  const ScalarType type = element_type(ctx.outputs[0].dtype);
  CopyKernel k{make_kernel(name, num_elements(ctx.output_shape())), {}, {}, kir::global_index(), type};
  k.x = k.kernel.add_buffer("x", type, Access::read);
  k.y = k.kernel.add_buffer("y", type, Access::write);
  return k;
}

// ---- Slice ------------------------------------------------------------------------

kir::Kernel lower_slice(const OpContext& ctx) {
  const graph::ops::SlicePlan plan = graph::ops::slice_plan(ctx.node, ctx.input_shape(0));
  const graph::Strides strides = graph::row_major_strides(ctx.input_shape(0));
  CopyKernel k = make_copy_kernel("slice", ctx);
  const std::vector<Expr> coords = unravel(k.kernel.body, k.index, ctx.output_shape(), "out");
  IndexSum source;
  for (std::size_t d = 0; d < coords.size(); ++d) {
    source.add(plan.starts[d] * strides[d]);
    source.add(coords[d], plan.steps[d] * strides[d]);
  }
  k.kernel.body.push_back(kir::store(k.y, k.index, k.load_x(source.expr())));
  return std::move(k.kernel);
}

// ---- Split: one invocation per input element, stored into the output that owns it --

kir::Kernel lower_split(const OpContext& ctx) {
  const Shape& in_shape = ctx.input_shape(0);
  const graph::ops::SplitPlan plan = graph::ops::split_plan(ctx.node, in_shape);
  const auto axis = static_cast<std::size_t>(plan.axis);
  const std::int64_t outer = extent_product(in_shape, 0, axis);
  const std::int64_t inner = extent_product(in_shape, axis + 1, in_shape.size());

  kir::Kernel kernel = make_kernel("split", num_elements(in_shape));
  const ScalarType type = element_type(ctx.inputs[0]->dtype);
  const kir::Buf x = kernel.add_buffer("x", type, Access::read);
  std::vector<kir::Buf> outputs;
  for (std::size_t k = 0; k < plan.sizes.size(); ++k)
    outputs.push_back(kernel.add_buffer("y" + std::to_string(k), type, Access::write));

  const Expr index = kir::global_index();
  const std::vector<Expr> c = unravel(kernel.body, index, {outer, in_shape[axis], inner}, "in");
  const Expr value = kir::load(x, index, type);
  // if (a < end0) store0 else if (a < end1) store1 ... else store_last
  std::vector<std::vector<Stmt>> stores;
  std::vector<std::int64_t> ends;
  std::int64_t start = 0;
  for (std::size_t k = 0; k < plan.sizes.size(); ++k) {
    const std::int64_t length = plan.sizes[k];
    const Expr target = IndexSum(-start * inner).add(c[0], length * inner).add(c[1], inner).add(c[2]).expr();
    stores.push_back({kir::store(outputs[k], target, value)});
    start += length;
    ends.push_back(start);
  }
  std::vector<Stmt> chain = std::move(stores.back());
  for (std::size_t k = stores.size() - 1; k-- > 0;)
    chain = {kir::branch(c[1] < kir::i32(ends[k]), std::move(stores[k]), std::move(chain))};
  for (Stmt& stmt : chain) kernel.body.push_back(std::move(stmt));
  return kernel;
}

// ---- Gather (constant indices baked into the kernel) ---------------------------------

// A run of the index list: positions [begin, end) hold first + (p - begin) * step.
struct IndexRun {
  std::int64_t begin, end, first, step;
};

// At most this many runs become a select chain; longer irregular lists would
// make a kernel as large as the list.
constexpr std::size_t kMaxIndexRuns = 16;

std::vector<IndexRun> index_runs(const std::vector<std::int64_t>& indices) {
  std::vector<IndexRun> runs;
  for (std::size_t p = 0; p < indices.size();) {
    IndexRun run{static_cast<std::int64_t>(p), static_cast<std::int64_t>(p) + 1, indices[p], 0};
    if (p + 1 < indices.size()) run.step = indices[p + 1] - indices[p];
    while (static_cast<std::size_t>(run.end) < indices.size() &&
           indices[static_cast<std::size_t>(run.end)] == run.first + (run.end - run.begin) * run.step)
      ++run.end;
    runs.push_back(run);
    p = static_cast<std::size_t>(run.end);
  }
  return runs;
}

// Runtime indices: a kernel cannot raise for an out-of-range index as the
// reference does, so it poisons that element with NaN instead, which only
// f32 data has (embedding tables are f32; other data stays on the host).
std::optional<std::string> runtime_indices_unsupported(const OpContext& ctx) {
  if (ctx.inputs[0]->dtype != DType::f32)
    return "runtime indices into " + std::string(dtype_name(ctx.inputs[0]->dtype)) +
           " data: an out-of-range index must poison its element with NaN, which only f32 has";
  const DType indices = ctx.inputs[1]->dtype;
  if (indices != DType::i64 && indices != DType::i32) return "the indices are not i32 or i64";
  return std::nullopt;
}

// `raw` (an index of `type`) moved into [0, extent) if negative, into the
// i32 variable `name`; `valid` tells whether it was in [-extent, extent).
struct RuntimeIndex {
  Expr index, valid;
};

RuntimeIndex declare_runtime_index(std::vector<Stmt>& body, const std::string& name, Expr raw, ScalarType type,
                                   std::int64_t extent) {
  body.push_back(kir::declare(name + "_raw", type, std::move(raw)));
  const Expr r = kir::var(name + "_raw", type);
  const Expr n = constant_of(type, static_cast<double>(extent));
  const Expr zero = constant_of(type, 0.0);
  const Expr valid = r >= -n && r < n;
  // Narrowed only where valid (|r| < extent < 2^31), so the cast is exact there.
  Expr normalised = kir::select(r < zero, r + n, r);
  if (type != ScalarType::i32) normalised = kir::cast(ScalarType::i32, kir::select(valid, normalised, zero));
  body.push_back(kir::declare(name, ScalarType::i32, normalised));
  return {kir::var(name, ScalarType::i32), valid};
}

kir::Kernel lower_gather_runtime(const OpContext& ctx) {
  std::vector<graph::TensorType> types{*ctx.inputs[0], *ctx.inputs[1]};
  const graph::ops::GatherPlan plan = graph::ops::gather_plan(ctx.node, types);
  const std::int64_t count = num_elements(ctx.input_shape(1));
  const ScalarType index_type = element_type(ctx.inputs[1]->dtype);
  kir::Kernel kernel = make_kernel("gather_runtime", num_elements(ctx.output_shape()));
  const kir::Buf x = kernel.add_buffer("x", ScalarType::f32, Access::read);
  const kir::Buf indices = kernel.add_buffer("indices", index_type, Access::read);
  const kir::Buf y = kernel.add_buffer("y", ScalarType::f32, Access::write);
  const Expr index = kir::global_index();
  const std::vector<Expr> c = unravel(kernel.body, index, {plan.outer, count, plan.inner}, "out");
  const RuntimeIndex row =
      declare_runtime_index(kernel.body, "row", kir::load(indices, c[1], index_type), index_type, plan.extent);
  const Expr source = IndexSum().add(c[0], plan.extent * plan.inner).add(row.index, plan.inner).add(c[2]).expr();
  kernel.body.push_back(
      kir::store(y, index, kir::select(row.valid, kir::load(x, source, ScalarType::f32), kir::f32(NAN))));
  return kernel;
}

std::optional<std::string> gather_unsupported(const OpContext& ctx) {
  if (ctx.has_input(1)) return runtime_indices_unsupported(ctx);
  std::vector<graph::TensorType> types{*ctx.inputs[0]};
  const graph::ops::GatherPlan plan = graph::ops::gather_plan(ctx.node, types);
  if (const std::size_t runs = index_runs(plan.indices).size(); runs > kMaxIndexRuns)
    return "the indices form " + std::to_string(runs) + " arithmetic runs; kernels take at most " +
           std::to_string(kMaxIndexRuns);
  return std::nullopt;
}

kir::Kernel lower_gather(const OpContext& ctx) {
  if (ctx.has_input(1)) return lower_gather_runtime(ctx);
  std::vector<graph::TensorType> types{*ctx.inputs[0]};
  const graph::ops::GatherPlan plan = graph::ops::gather_plan(ctx.node, types);
  const auto count = static_cast<std::int64_t>(plan.indices.size());
  CopyKernel k = make_copy_kernel("gather", ctx);
  const std::vector<Expr> c = unravel(k.kernel.body, k.index, {plan.outer, count, plan.inner}, "out");
  // The index at position c[1]: a select over the runs, last run as the default.
  const std::vector<IndexRun> runs = index_runs(plan.indices);
  auto run_value = [&](const IndexRun& run) {
    return IndexSum(run.first - run.begin * run.step).add(c[1], run.step).expr();
  };
  Expr picked = run_value(runs.back());
  for (std::size_t r = runs.size() - 1; r-- > 0;) picked = kir::select(c[1] < kir::i32(runs[r].end), run_value(runs[r]), picked);
  const Expr row = runs.size() == 1 ? picked : declare_index(k.kernel.body, "row", picked);
  const Expr source = IndexSum().add(c[0], plan.extent * plan.inner).add(row, plan.inner).add(c[2]).expr();
  k.kernel.body.push_back(kir::store(k.y, k.index, k.load_x(source)));
  return std::move(k.kernel);
}

// ---- Expand, Tile ---------------------------------------------------------------------

kir::Kernel lower_expand(const OpContext& ctx) {
  CopyKernel k = make_copy_kernel("expand", ctx);
  const Shape in_shapes[] = {ctx.input_shape(0)};
  const std::vector<Expr> offsets = broadcast_offsets(k.kernel.body, k.index, ctx.output_shape(), in_shapes, "out");
  k.kernel.body.push_back(kir::store(k.y, k.index, k.load_x(offsets[0])));
  return std::move(k.kernel);
}

kir::Kernel lower_tile(const OpContext& ctx) {
  const Shape& in_shape = ctx.input_shape(0);
  const graph::Strides strides = graph::row_major_strides(in_shape);
  CopyKernel k = make_copy_kernel("tile", ctx);
  const std::vector<Expr> coords = unravel(k.kernel.body, k.index, ctx.output_shape(), "out");
  IndexSum source;
  for (std::size_t d = 0; d < coords.size(); ++d) {
    if (in_shape[d] == 1) continue;  // every repeat reads position 0
    const bool repeated = ctx.output_shape()[d] != in_shape[d];
    source.add(repeated ? coords[d] % kir::i32(in_shape[d]) : coords[d], strides[d]);
  }
  k.kernel.body.push_back(kir::store(k.y, k.index, k.load_x(source.expr())));
  return std::move(k.kernel);
}

// ---- Pad ---------------------------------------------------------------------------

kir::Kernel lower_pad(const OpContext& ctx) {
  const Shape& in_shape = ctx.input_shape(0);
  const graph::ops::PadPlan plan = graph::ops::pad_plan(ctx.node, in_shape);
  const graph::Strides strides = graph::row_major_strides(in_shape);
  CopyKernel k = make_copy_kernel("pad", ctx);
  std::vector<Stmt>& body = k.kernel.body;
  const std::vector<Expr> coords = unravel(body, k.index, ctx.output_shape(), "out");
  IndexSum source;
  Expr inside;  // constant mode: the conjunction of the bounds checks that can fail
  auto require = [&inside](Expr condition) { inside = inside ? (inside && condition) : condition; };
  for (std::size_t d = 0; d < coords.size(); ++d) {
    const std::int64_t extent = in_shape[d];
    const bool below = plan.begins[d] > 0, above = plan.ends[d] > 0;
    Expr position = IndexSum(-plan.begins[d]).add(coords[d]).expr();
    if (below || above) {
      position = declare_index(body, "in" + std::to_string(d), position);
      switch (plan.mode) {
        case PadMode::constant:
          if (below) require(position >= kir::i32(0));
          if (above) require(position < kir::i32(extent));
          break;
        case PadMode::edge:
          if (below) position = kir::max(position, kir::i32(0));
          if (above) position = kir::min(position, kir::i32(extent - 1));
          break;
        case PadMode::reflect:
          // One reflection suffices: pads are smaller than the extent.
          if (below) position = kir::abs(position);
          if (above)
            position = kir::select(position >= kir::i32(extent), kir::i32(2 * (extent - 1)) - position, position);
          break;
      }
    }
    source.add(position, strides[d]);
  }
  Expr value = k.load_x(source.expr());
  // select evaluates only the chosen operand, so padding never loads out of bounds.
  if (inside) value = kir::select(inside, value, constant_of(k.type, plan.value));
  body.push_back(kir::store(k.y, k.index, value));
  return std::move(k.kernel);
}

// ---- Resize ----------------------------------------------------------------------

// The f32 input coordinate of output position `x` on `axis`: the operations of
// graph::ops::resize_coordinate<float>, in the same order.
Expr coordinate_expr(const ResizeAxis& axis, Expr x) {
  const auto scale = static_cast<float>(axis.scale);
  const auto resized = static_cast<float>(axis.scale * static_cast<double>(axis.input_extent));
  const auto in = static_cast<float>(axis.input_extent);
  const Expr pos = kir::cast(ScalarType::f32, x);
  const Expr half_pixel = (pos + kir::f32(0.5)) / kir::f32(scale) - kir::f32(0.5);
  switch (axis.coordinate) {
    case CoordinateMode::half_pixel: return half_pixel;
    case CoordinateMode::half_pixel_symmetric: {
      const float adjustment = static_cast<float>(axis.output_extent) / resized;
      const float offset = in / 2.0f * (1.0f - adjustment);
      return kir::f32(offset) + half_pixel;
    }
    case CoordinateMode::pytorch_half_pixel: return resized == 1.0f ? kir::f32(0.0) : half_pixel;
    case CoordinateMode::align_corners:
      return resized == 1.0f ? kir::f32(0.0) : pos * kir::f32(in - 1.0f) / kir::f32(resized - 1.0f);
    case CoordinateMode::asymmetric: return pos / kir::f32(scale);
    case CoordinateMode::tf_half_pixel_for_nn: return (pos + kir::f32(0.5)) / kir::f32(scale);
  }
  throw_error(ErrorKind::Internal, "resize: unknown coordinate transformation mode");
}

Expr clamp_index(Expr index, std::int64_t extent) {
  return kir::min(kir::max(index, kir::i32(0)), kir::i32(extent - 1));
}

// How a kernel finds one axis's nearest input position. The reference maps
// coordinates in double; f32 (or even exact) arithmetic rounds differently at
// a few positions, so each formula is checked against the reference on every
// output position of the axis, and the few positions where it differs are
// patched with their reference value.
struct NearestAxis {
  // integer: clamp((x * step + base) / divisor) in exact i32 arithmetic (the
  // coordinate is a ratio of integers when the scale is output / input);
  // otherwise the f32 formula of graph::ops::resize_coordinate<float>.
  bool integer = false;
  std::int64_t step = 0, base = 0, divisor = 1;
  std::vector<std::pair<std::int64_t, std::int64_t>> patches;  // (output position, input position)
};

// At most this many patched positions per axis; more make the kernel too large.
constexpr std::size_t kMaxNearestPatches = 8;

// floor(c) for the coordinate c = (x * a + b) / d, as floor((x * step + base) / divisor)
// with the rounding of `mode` folded in; nullopt unless the scale is exactly
// output / input (then every coordinate mode is a ratio of integers).
std::optional<NearestAxis> integer_nearest(const ResizeAxis& axis, NearestMode mode) {
  const std::int64_t in = axis.input_extent, out = axis.output_extent;
  if (axis.scale != static_cast<double>(out) / static_cast<double>(in)) return std::nullopt;
  std::int64_t a = 0, b = 0, d = 1;
  switch (axis.coordinate) {
    case CoordinateMode::half_pixel:
    case CoordinateMode::half_pixel_symmetric:  // its offset is 0 when the scale is output / input
      a = 2 * in, b = in - out, d = 2 * out;
      break;
    case CoordinateMode::pytorch_half_pixel:
      if (out > 1) a = 2 * in, b = in - out, d = 2 * out;
      break;
    case CoordinateMode::align_corners:
      if (out > 1) a = in - 1, d = out - 1;
      break;
    case CoordinateMode::asymmetric: a = in, d = out; break;
    case CoordinateMode::tf_half_pixel_for_nn: a = 2 * in, b = in, d = 2 * out; break;
  }
  NearestAxis code;
  code.integer = true;
  switch (mode) {
    case NearestMode::floor: code.step = a, code.base = b, code.divisor = d; break;
    case NearestMode::ceil: code.step = a, code.base = b + d - 1, code.divisor = d; break;
    case NearestMode::round_prefer_floor: code.step = 2 * a, code.base = 2 * b + d - 1, code.divisor = 2 * d; break;
    case NearestMode::round_prefer_ceil: code.step = 2 * a, code.base = 2 * b + d, code.divisor = 2 * d; break;
  }
  // Every numerator must fit i32.
  const std::int64_t limit = std::numeric_limits<std::int32_t>::max();
  const std::int64_t last = (out - 1) * code.step + code.base;
  if (std::abs(code.base) > limit || std::abs(last) > limit || code.divisor > limit) return std::nullopt;
  return code;
}

// The input position `code` computes for output position x (before patches),
// clamped into [0, extent) as the kernel does; truncating division equals
// floor division after the clamp at 0.
std::int64_t nearest_by_code(const NearestAxis& code, const ResizeAxis& axis, NearestMode mode, std::int64_t x) {
  if (!code.integer)
    return graph::ops::resize_nearest_index(mode, graph::ops::resize_coordinate<float>(axis, x), axis.input_extent);
  const std::int64_t index = (x * code.step + code.base) / code.divisor;
  return std::clamp<std::int64_t>(index, 0, axis.input_extent - 1);
}

// The cheapest formula for the axis with its patches; nullopt if every
// formula needs more than kMaxNearestPatches.
std::optional<NearestAxis> plan_nearest_axis(const ResizeAxis& axis, NearestMode mode) {
  std::vector<NearestAxis> candidates;
  if (auto integer = integer_nearest(axis, mode)) candidates.push_back(*integer);
  candidates.push_back(NearestAxis{});
  std::optional<NearestAxis> best;
  for (NearestAxis& code : candidates) {
    for (std::int64_t x = 0; x < axis.output_extent && code.patches.size() <= kMaxNearestPatches; ++x) {
      const std::int64_t want = graph::ops::resize_nearest_index(
          mode, graph::ops::resize_coordinate<double>(axis, x), axis.input_extent);
      if (nearest_by_code(code, axis, mode, x) != want) code.patches.emplace_back(x, want);
    }
    if (code.patches.size() <= kMaxNearestPatches && (!best || code.patches.size() < best->patches.size()))
      best = code;
  }
  return best;
}

// The nearest input position of output position `x` by `code`, as a declared i32.
Expr nearest_expr(std::vector<Stmt>& body, const NearestAxis& code, const ResizeAxis& axis, NearestMode mode, Expr x,
                  const std::string& name) {
  Expr chosen;
  if (code.integer) {
    chosen = IndexSum(code.base).add(x, code.step).expr() / kir::i32(code.divisor);
  } else {
    body.push_back(kir::declare(name + "c", ScalarType::f32, coordinate_expr(axis, x)));
    const Expr c = kir::var(name + "c", ScalarType::f32);
    const Expr below = kir::floor(c);
    Expr rounded = below;
    switch (mode) {
      case NearestMode::round_prefer_floor: rounded = kir::select(c - below > kir::f32(0.5), below + kir::f32(1.0), below); break;
      case NearestMode::round_prefer_ceil: rounded = kir::select(c - below >= kir::f32(0.5), below + kir::f32(1.0), below); break;
      case NearestMode::floor: break;
      case NearestMode::ceil: rounded = kir::ceil(c); break;
    }
    chosen = kir::cast(ScalarType::i32, rounded);
  }
  Expr index = clamp_index(chosen, axis.input_extent);
  for (const auto& [position, value] : code.patches) index = kir::select(eq(x, kir::i32(position)), kir::i32(value), index);
  return declare_index(body, name, index);
}

// At most this many interpolated axes: a kernel sums 2^n loads per element.
constexpr std::size_t kMaxLinearAxes = 4;

std::optional<std::string> resize_unsupported(const OpContext& ctx) {
  const graph::ops::ResizePlan plan = graph::ops::resize_plan(ctx.node, ctx.input_shape(0));
  std::size_t interpolated = 0;
  for (std::size_t d = 0; d < plan.axes.size(); ++d) {
    if (plan.axes[d].identity()) continue;
    ++interpolated;
    if (plan.mode == ResizeMode::nearest && !plan_nearest_axis(plan.axes[d], plan.nearest))
      return "axis " + std::to_string(d) + ": more than " + std::to_string(kMaxNearestPatches) +
             " output positions where i32 and f32 coordinates round differently from the reference's double";
  }
  if (plan.mode == ResizeMode::linear && interpolated > kMaxLinearAxes)
    return "linear resize over " + std::to_string(interpolated) + " axes; kernels interpolate at most " +
           std::to_string(kMaxLinearAxes);
  return std::nullopt;
}

kir::Kernel lower_resize(const OpContext& ctx) {
  const Shape& in_shape = ctx.input_shape(0);
  const graph::ops::ResizePlan plan = graph::ops::resize_plan(ctx.node, in_shape);
  const graph::Strides strides = graph::row_major_strides(in_shape);
  CopyKernel k = make_copy_kernel(plan.mode == ResizeMode::nearest ? "resize_nearest" : "resize_linear", ctx);
  std::vector<Stmt>& body = k.kernel.body;
  const std::vector<Expr> coords = unravel(body, k.index, ctx.output_shape(), "out");

  if (plan.mode == ResizeMode::nearest) {
    IndexSum source;
    for (std::size_t d = 0; d < coords.size(); ++d) {
      const ResizeAxis& axis = plan.axes[d];
      if (axis.identity()) {
        source.add(coords[d], strides[d]);
        continue;
      }
      const std::optional<NearestAxis> code = plan_nearest_axis(axis, plan.nearest);
      KILN_ASSERT(code.has_value());  // resize_unsupported checked it
      source.add(nearest_expr(body, *code, axis, plan.nearest, coords[d], "in" + std::to_string(d)), strides[d]);
    }
    body.push_back(kir::store(k.y, k.index, k.load_x(source.expr())));
    return std::move(k.kernel);
  }

  // Linear: per interpolated axis two clamped neighbours and a ratio; the
  // value sums every corner of the cell weighted by the product of ratios.
  IndexSum fixed;
  struct Interpolated {
    std::int64_t stride;
    Expr low, high, ratio;
  };
  std::vector<Interpolated> axes;
  for (std::size_t d = 0; d < coords.size(); ++d) {
    const ResizeAxis& axis = plan.axes[d];
    if (axis.identity()) {
      fixed.add(coords[d], strides[d]);
      continue;
    }
    const std::string name = "in" + std::to_string(d);
    body.push_back(kir::declare(name + "c", ScalarType::f32, coordinate_expr(axis, coords[d])));
    const Expr c = kir::var(name + "c", ScalarType::f32);
    body.push_back(kir::declare(name + "f", ScalarType::f32, kir::floor(c)));
    const Expr below = kir::var(name + "f", ScalarType::f32);
    body.push_back(kir::declare(name + "r", ScalarType::f32, c - below));
    const Expr low = declare_index(body, name + "lo", kir::cast(ScalarType::i32, below));
    axes.push_back({strides[d], declare_index(body, name + "a", clamp_index(low, axis.input_extent)),
                    declare_index(body, name + "b", clamp_index(low + kir::i32(1), axis.input_extent)),
                    kir::var(name + "r", ScalarType::f32)});
  }
  const Expr base = declare_index(body, "base", fixed.expr());
  Expr sum;
  for (std::size_t corner = 0; corner < (std::size_t{1} << axes.size()); ++corner) {
    IndexSum offset;
    offset.add(base);
    Expr weight;
    for (std::size_t a = 0; a < axes.size(); ++a) {
      const bool high = (corner >> a) & 1u;
      offset.add(high ? axes[a].high : axes[a].low, axes[a].stride);
      const Expr w = high ? axes[a].ratio : kir::f32(1.0) - axes[a].ratio;
      weight = weight ? weight * w : w;
    }
    const Expr term = kir::load(k.x, offset.expr(), ScalarType::f32);
    const Expr weighted = weight ? weight * term : term;
    sum = sum ? sum + weighted : weighted;
  }
  body.push_back(kir::store(k.y, k.index, sum));
  return std::move(k.kernel);
}

// ---- Trilu: each element kept or zeroed by its side of the diagonal ----------------

std::optional<std::string> trilu_unsupported(const OpContext& ctx) {
  if (ctx.has_input(1)) return "k is a runtime tensor; only a constant k (the `k` attribute) lowers to a kernel";
  if (ctx.input_shape(0).size() < 2) return "the input is not a stack of matrices (rank < 2)";
  return std::nullopt;
}

kir::Kernel lower_trilu(const OpContext& ctx) {
  const Shape& shape = ctx.input_shape(0);
  const std::int64_t rows = shape[shape.size() - 2];
  const std::int64_t columns = shape.back();
  const bool upper = ctx.node.attrs.get_int("upper", 1) != 0;
  // column - row lies in [1 - rows, columns - 1]: a k outside [-rows, columns]
  // selects what the nearest bound does, and the bound fits an i32.
  const std::int64_t k = std::clamp<std::int64_t>(ctx.node.attrs.get_int("k", 0), -rows, columns);
  const std::int64_t matrices = extent_product(shape, 0, shape.size() - 2);
  CopyKernel t = make_copy_kernel("trilu", ctx);
  std::vector<Stmt>& body = t.kernel.body;
  const std::vector<Expr> c = unravel(body, t.index, {matrices, rows, columns}, "m");
  const Expr diagonal = declare_index(body, "diagonal", IndexSum().add(c[2]).add(c[1], -1).expr());
  const Expr keep = upper ? diagonal >= kir::i32(k) : diagonal <= kir::i32(k);
  body.push_back(kir::store(t.y, t.index, kir::select(keep, t.load_x(t.index), constant_of(t.type, 0.0))));
  return std::move(t.kernel);
}

// ---- ReverseSequence: the first sequence_lens[b] steps reversed ----------------------

std::optional<std::string> reverse_sequence_unsupported(const OpContext& ctx) {
  const std::int64_t batch = ctx.node.attrs.get_int("batch_axis", 1), time = ctx.node.attrs.get_int("time_axis", 0);
  if (!((batch == 0 && time == 1) || (batch == 1 && time == 0))) return "batch_axis and time_axis must be 0 and 1";
  return std::nullopt;
}

// One invocation per element: inside its sequence's length, the element at
// the mirrored step; past it, its own. A length outside [0, steps] is clamped
// (a kernel cannot raise as the reference does).
kir::Kernel lower_reverse_sequence(const OpContext& ctx) {
  const Shape& shape = ctx.input_shape(0);
  const bool time_first = ctx.node.attrs.get_int("time_axis", 0) == 0;
  const std::int64_t rest = extent_product(shape, 2, shape.size());
  const std::int64_t steps = shape[time_first ? 0 : 1];
  const std::int64_t time_stride = time_first ? shape[1] * rest : rest;
  const ScalarType type = element_type(ctx.outputs[0].dtype);
  const ScalarType length_type = element_type(ctx.inputs[1]->dtype);
  kir::Kernel kernel = make_kernel("reverse_sequence", num_elements(shape));
  const kir::Buf x = kernel.add_buffer("x", type, Access::read);
  const kir::Buf lengths = kernel.add_buffer("lengths", length_type, Access::read);
  const kir::Buf y = kernel.add_buffer("y", type, Access::write);
  std::vector<Stmt>& body = kernel.body;
  const Expr index = kir::global_index();
  const std::vector<Expr> c = unravel(body, index, {shape[0], shape[1], rest}, "c");
  const Expr b = time_first ? c[1] : c[0], t = time_first ? c[0] : c[1];
  const Expr length = declare_index(
      body, "length",
      kir::min(kir::max(kir::cast(ScalarType::i32, kir::load(lengths, b, length_type)), kir::i32(0)), kir::i32(steps)));
  const Expr mirrored = IndexSum().add(index).add(length, time_stride).add(t, -2 * time_stride).add(-time_stride).expr();
  const Expr source = declare_index(body, "source", kir::select(t < length, mirrored, index));
  body.push_back(kir::store(y, index, kir::load(x, source, type)));
  return kernel;
}

// ---- ops that stay on the host ----------------------------------------------------

// ---- GatherElements: out[c] = data[c with c[axis] = indices[c]] -----------------------

std::optional<std::string> gather_elements_unsupported(const OpContext& ctx) {
  return runtime_indices_unsupported(ctx);
}

kir::Kernel lower_gather_elements(const OpContext& ctx) {
  const Shape& data_shape = ctx.input_shape(0);
  const Shape& out_shape = ctx.input_shape(1);
  const std::size_t axis = get_axis(ctx, "axis", 0, data_shape.size());
  const ScalarType index_type = element_type(ctx.inputs[1]->dtype);
  kir::Kernel kernel = make_kernel("gather_elements", num_elements(out_shape));
  const kir::Buf x = kernel.add_buffer("x", ScalarType::f32, Access::read);
  const kir::Buf indices = kernel.add_buffer("indices", index_type, Access::read);
  const kir::Buf y = kernel.add_buffer("y", ScalarType::f32, Access::write);
  const Expr index = kir::global_index();
  const std::vector<Expr> c = unravel(kernel.body, index, out_shape, "out");
  const RuntimeIndex at =
      declare_runtime_index(kernel.body, "at", kir::load(indices, index, index_type), index_type, data_shape[axis]);
  const graph::Strides strides = graph::row_major_strides(data_shape);
  IndexSum source;
  for (std::size_t d = 0; d < c.size(); ++d) source.add(d == axis ? at.index : c[d], strides[d]);
  kernel.body.push_back(
      kir::store(y, index, kir::select(at.valid, kir::load(x, source.expr(), ScalarType::f32), kir::f32(NAN))));
  return kernel;
}

// ---- TensorScatter ---------------------------------------------------------------

// Batch entry `b`'s write index (write_indices[b], 0 without them) as an i32
// `write`, and whether it is one the reference accepts: a kernel cannot raise,
// so it writes nothing for an invalid one. Circular mode reduces it modulo
// the cache length first.
struct WriteIndex {
  Expr index, valid;
};

WriteIndex declare_write_index(std::vector<Stmt>& body, const graph::ops::TensorScatterPlan& plan,
                               std::optional<kir::Buf> indices, Expr b) {
  if (!indices) return {kir::i32(0), kir::boolean(true)};
  body.push_back(kir::declare("write_raw", ScalarType::i64, kir::load(*indices, std::move(b), ScalarType::i64)));
  const Expr raw = kir::var("write_raw", ScalarType::i64);
  const std::int64_t last = plan.circular ? std::numeric_limits<std::int32_t>::max() : plan.cache - plan.length;
  const Expr valid = raw >= kir::i64(0) && raw <= kir::i64(last);
  Expr write = kir::cast(ScalarType::i32, kir::select(valid, raw, kir::i64(0)));
  if (plan.circular) write = write % kir::i32(plan.cache);
  body.push_back(kir::declare("write", ScalarType::i32, write));
  return {kir::var("write", ScalarType::i32), valid};
}

graph::ops::TensorScatterPlan tensor_scatter_plan_of(const OpContext& ctx) {
  std::vector<graph::TensorType> types;
  for (std::size_t i = 0; i < ctx.inputs.size(); ++i) types.push_back(ctx.has_input(i) ? *ctx.inputs[i] : graph::TensorType{});
  return graph::ops::tensor_scatter_plan(ctx.node, types);
}

std::optional<std::string> tensor_scatter_unsupported(const OpContext& ctx) {
  tensor_scatter_plan_of(ctx);  // throws on a malformed node
  return std::nullopt;
}

// A TensorScatter kernel of `invocations` with its buffers: past (the
// functional form only), update, write_indices when given, present.
struct ScatterKernel {
  kir::Kernel kernel;
  std::optional<kir::Buf> past, indices;
  kir::Buf update, present;
  ScalarType type;
};

ScatterKernel make_scatter_kernel(const std::string& name, const OpContext& ctx, const graph::ops::TensorScatterPlan& plan,
                                  std::int64_t invocations, bool reads_past) {
  ScatterKernel k{make_kernel(name, invocations), {}, {}, {}, {}, element_type(ctx.outputs[0].dtype)};
  if (reads_past) k.past = k.kernel.add_buffer("past", k.type, Access::read);
  k.update = k.kernel.add_buffer("update", k.type, Access::read);
  if (plan.has_indices) k.indices = k.kernel.add_buffer("write_indices", ScalarType::i64, Access::read);
  k.present = k.kernel.add_buffer("present", k.type, Access::write);
  return k;
}

// The functional form, over every output element: the update's row where
// one lands, else the past's element.
kir::Kernel lower_tensor_scatter(const OpContext& ctx) {
  const graph::ops::TensorScatterPlan plan = tensor_scatter_plan_of(ctx);
  ScatterKernel k = make_scatter_kernel("tensor_scatter", ctx, plan, num_elements(ctx.output_shape()), true);
  kir::Kernel& kernel = k.kernel;
  const Expr index = kir::global_index();
  const std::vector<Expr> c = unravel(kernel.body, index, {plan.batch, plan.middle, plan.cache, plan.inner}, "out");
  const WriteIndex write = declare_write_index(kernel.body, plan, k.indices, c[0]);
  Expr row = c[2] - write.index;  // the update row landing here, if in [0, length)
  if (plan.circular) row = (row + kir::i32(plan.cache)) % kir::i32(plan.cache);
  kernel.body.push_back(kir::declare("row", ScalarType::i32, row));
  const Expr r = kir::var("row", ScalarType::i32);
  kernel.body.push_back(kir::declare("written", ScalarType::boolean, write.valid && r >= kir::i32(0) && r < kir::i32(plan.length)));
  const Expr written = kir::var("written", ScalarType::boolean);
  const Expr source = IndexSum()
                          .add(c[0], plan.middle * plan.length * plan.inner)
                          .add(c[1], plan.length * plan.inner)
                          .add(kir::select(written, r, kir::i32(0)), plan.inner)
                          .add(c[3])
                          .expr();
  kernel.body.push_back(kir::store(
      k.present, index, kir::select(written, kir::load(k.update, source, k.type), kir::load(*k.past, index, k.type))));
  return std::move(k.kernel);
}

}  // namespace

// The in-place form, over the update's elements only: each stored at its
// cache row in the output, which is the past's own storage.
kir::Kernel lower_tensor_scatter_in_place(const OpContext& ctx) {
  const graph::ops::TensorScatterPlan plan = tensor_scatter_plan_of(ctx);
  ScatterKernel k = make_scatter_kernel("tensor_scatter_in_place", ctx, plan,
                                        plan.batch * plan.middle * plan.length * plan.inner, false);
  kir::Kernel& kernel = k.kernel;
  const Expr index = kir::global_index();
  const std::vector<Expr> c = unravel(kernel.body, index, {plan.batch, plan.middle, plan.length, plan.inner}, "in");
  const WriteIndex write = declare_write_index(kernel.body, plan, k.indices, c[0]);
  Expr slot = write.index + c[2];
  if (plan.circular) slot = slot % kir::i32(plan.cache);
  const Expr target = IndexSum()
                          .add(c[0], plan.middle * plan.cache * plan.inner)
                          .add(c[1], plan.cache * plan.inner)
                          .add(slot, plan.inner)
                          .add(c[3])
                          .expr();
  kernel.body.push_back(kir::branch(write.valid, {kir::store(k.present, target, kir::load(k.update, index, k.type))}));
  return std::move(k.kernel);
}

namespace {

constexpr OpLowering kDataLowerings[] = {
    {"Slice", 1, 1, nullptr, lower_slice, 1, KernelDTypes::any},
    {"Split", 1, 1, nullptr, lower_split, kAnyCount, KernelDTypes::any},
    {"Gather", 1, 2, gather_unsupported, lower_gather, 1, KernelDTypes::any},
    {"Squeeze", 1, 1, nullptr, nullptr, 1, KernelDTypes::any},
    {"Unsqueeze", 1, 1, nullptr, nullptr, 1, KernelDTypes::any},
    {"Expand", 1, 1, nullptr, lower_expand, 1, KernelDTypes::any},
    {"Tile", 1, 1, nullptr, lower_tile, 1, KernelDTypes::any},
    {"Pad", 1, 1, nullptr, lower_pad, 1, KernelDTypes::any},
    {"Resize", 1, 1, resize_unsupported, lower_resize},
    {"Trilu", 1, 2, trilu_unsupported, lower_trilu, 1, KernelDTypes::any},
    {"ReverseSequence", 2, 2, reverse_sequence_unsupported, lower_reverse_sequence, 1, KernelDTypes::any},
    {"GatherElements", 2, 2, gather_elements_unsupported, lower_gather_elements, 1, KernelDTypes::any},
    {"TensorScatter", 2, 3, tensor_scatter_unsupported, lower_tensor_scatter, 1, KernelDTypes::any},
};

}  // namespace

std::span<const OpLowering> data_lowerings() { return kDataLowerings; }

}  // namespace kiln::lower
