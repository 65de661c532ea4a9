// Silu: x * sigmoid(x), the activation EfficientNet and its kin use. A kiln
// op: recognise_silu (graph/passes) writes it for the Mul(x, Sigmoid(x)) that
// torch.onnx.export spells out, so that it lowers to one pointwise kernel the
// producing convolution takes as its epilogue. The ONNX importer never
// produces it (no ONNX operator of that name; graph/onnx only converts ONNX's
// own operators).
#include <cmath>

#include "graph/ops/ops.h"

namespace kiln::graph::ops {

void register_silu_ops(OpTable& table) {
  add_op(table, f32_unary_schema(
                    "Silu", {},
                    [](const Node&) -> ElementFn { return [](double x) { return x / (1.0 + std::exp(-x)); }; },
                    "x * sigmoid(x) (kiln's, from recognise_silu)"));
}

}  // namespace kiln::graph::ops
