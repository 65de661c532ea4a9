// Data-moving shape ops: Transpose (a gather by permuted strides) and Concat
// (one kernel that picks its source input by the coordinate on the axis).
// Reshape, Flatten and Identity move no data; lower.cpp makes them aliases.
#include "graph/broadcast.h"
#include "src/base/check.h"
#include "src/lower/index.h"
#include "src/lower/lowerings.h"

#include <kiln/error.h>

#include <numeric>

namespace kiln::lower {

using kir::Access;
using kir::Expr;
using kir::ScalarType;
using kir::Stmt;

namespace {

std::vector<std::int64_t> transpose_perm(const OpContext& ctx) {
  const std::size_t rank = ctx.input_shape(0).size();
  std::vector<std::int64_t> reversed(rank);
  std::iota(reversed.rbegin(), reversed.rend(), std::int64_t{0});
  return get_ints_exactly(ctx, "perm", rank, reversed);
}

}  // namespace

std::optional<std::string> transpose_unsupported(const OpContext& ctx) {
  const Shape& x = ctx.input_shape(0);
  const std::vector<std::int64_t> perm = transpose_perm(ctx);
  std::vector<bool> seen(x.size(), false);
  Shape expected;
  for (std::int64_t axis : perm) {
    if (axis < 0 || axis >= static_cast<std::int64_t>(x.size()) || seen[static_cast<std::size_t>(axis)])
      return "perm is not a permutation of the " + std::to_string(x.size()) + " axes";
    seen[static_cast<std::size_t>(axis)] = true;
    expected.push_back(x[static_cast<std::size_t>(axis)]);
  }
  if (ctx.output_shape() != expected)
    return "output " + shape_str(ctx.output_shape()) + " is not the expected " + shape_str(expected);
  return std::nullopt;
}

kir::Kernel lower_transpose(const OpContext& ctx) {
  const Shape& in_shape = ctx.input_shape(0);
  const Shape& out_shape = ctx.output_shape();
  const std::vector<std::int64_t> perm = transpose_perm(ctx);
  kir::Kernel kernel = make_kernel("transpose", num_elements(out_shape));
  const ScalarType type = element_type(ctx.outputs[0].dtype);
  const kir::Buf x = kernel.add_buffer("x", type, Access::read);
  const kir::Buf y = kernel.add_buffer("y", type, Access::write);

  // Output dimension d walks input dimension perm[d].
  const Expr index = kir::global_index();
  const std::vector<Expr> coords = unravel(kernel.body, index, out_shape, "out");
  const std::vector<std::int64_t> in_strides = graph::row_major_strides(in_shape);
  IndexSum source;
  for (std::size_t d = 0; d < out_shape.size(); ++d) source.add(coords[d], in_strides[static_cast<std::size_t>(perm[d])]);
  kernel.body.push_back(kir::store(y, index, kir::load(x, source.expr(), type)));
  return kernel;
}

std::optional<std::string> concat_unsupported(const OpContext& ctx) {
  const Shape& first = ctx.input_shape(0);
  if (first.empty()) return "scalars cannot be concatenated";
  if (!ctx.node.attrs.has("axis")) return "attribute 'axis' is missing";
  const std::size_t axis = get_axis(ctx, "axis", 0, first.size());
  Shape expected = first;
  expected[axis] = 0;
  for (std::size_t slot = 0; slot < ctx.inputs.size(); ++slot) {
    if (!ctx.has_input(slot)) return "input " + std::to_string(slot) + " is missing";
    const Shape& shape = ctx.input_shape(slot);
    bool fits = shape.size() == first.size();
    for (std::size_t d = 0; fits && d < shape.size(); ++d) fits = d == axis || shape[d] == first[d];
    if (!fits)
      return "input " + std::to_string(slot) + " " + shape_str(shape) + " does not fit input 0 " + shape_str(first) +
             " on axes other than " + std::to_string(axis);
    expected[axis] += shape[axis];
  }
  if (ctx.output_shape() != expected)
    return "output " + shape_str(ctx.output_shape()) + " is not the expected " + shape_str(expected);
  return std::nullopt;
}

kir::Kernel lower_concat(const OpContext& ctx) {
  const Shape& out_shape = ctx.output_shape();
  const std::size_t axis = get_axis(ctx, "axis", 0, out_shape.size());
  const std::int64_t outer = extent_product(out_shape, 0, axis);
  const std::int64_t total = out_shape[axis];
  const std::int64_t inner = extent_product(out_shape, axis + 1, out_shape.size());

  kir::Kernel kernel = make_kernel("concat", num_elements(out_shape));
  const ScalarType type = element_type(ctx.outputs[0].dtype);
  std::vector<kir::Buf> inputs;
  for (std::size_t slot = 0; slot < ctx.inputs.size(); ++slot)
    inputs.push_back(kernel.add_buffer("x" + std::to_string(slot), type, Access::read));
  const kir::Buf y = kernel.add_buffer("y", type, Access::write);

  // Output element (o, a, i) of [outer, total, inner] comes from the input
  // whose slice [start, start + length) of the axis holds a.
  const Expr index = kir::global_index();
  const std::vector<Expr> c = unravel(kernel.body, index, {outer, total, inner}, "out");
  std::vector<std::vector<Stmt>> copies;
  std::vector<std::int64_t> ends;
  std::int64_t start = 0;
  for (std::size_t slot = 0; slot < inputs.size(); ++slot) {
    const std::int64_t length = ctx.input_shape(slot)[axis];
    if (length == 0) continue;  // an empty input contributes nothing
    const Expr source = IndexSum(-start * inner).add(c[0], length * inner).add(c[1], inner).add(c[2]).expr();
    copies.push_back({kir::store(y, index, kir::load(inputs[slot], source, type))});
    start += length;
    ends.push_back(start);
  }
  KILN_ASSERT(!copies.empty());  // the output is not empty, so some input is not
  // if (a < end0) copy0 else if (a < end1) copy1 ... else copy_last
  std::vector<Stmt> chain = std::move(copies.back());
  for (std::size_t k = copies.size() - 1; k-- > 0;)
    chain = {kir::branch(c[1] < kir::i32(ends[k]), std::move(copies[k]), std::move(chain))};
  for (Stmt& stmt : chain) kernel.body.push_back(std::move(stmt));
  return kernel;
}

}  // namespace kiln::lower
