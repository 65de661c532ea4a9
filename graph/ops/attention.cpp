// Attention: softmax(scale * Q K^T + mask) V over a batch of heads, the
// pattern recognise_attention (graph/passes) collapses into one node so that
// it lowers to one kernel (shaders/attention_template.h). A kiln op: the
// importer never produces it.
//
// Inputs: Q [*batch, Lq, D]; K [*batch, Lk, D] (or K^T [*batch, D, Lk] with
// k_transposed=1); V [*batch, Lk, Dv]; optional additive mask that
// numpy-broadcasts to [*batch, Lq, Lk]. *batch is one or two dimensions
// ([B, H] or [B*H]) and the same for Q, K and V. Output [*batch, Lq, Dv].
// Attributes: scale (float, default 1/sqrt(D)), k_transposed (0 or 1).
#include <cmath>
#include <vector>

#include "graph/broadcast.h"
#include "graph/ops/ops.h"
#include "src/base/check.h"

namespace kiln::graph::ops {

namespace {

struct AttentionShape {
  Shape batch;
  std::int64_t lq = 0, lk = 0, d = 0, dv = 0;
  bool k_transposed = false;
  double scale = 1.0;
};

AttentionShape attention_shape(const Node& node, std::span<const TensorType> in) {
  check_known_attributes(node, {"scale", "k_transposed"});
  const TensorType& q = in[0];
  const TensorType& k = in[1];
  const TensorType& v = in[2];
  require_f32("Q", q);
  require_f32("K", k);
  require_f32("V", v);
  const std::size_t rank = q.shape.size();
  KILN_CHECK(rank == 3 || rank == 4, ErrorKind::ShapeMismatch,
             "Q must be [B, H, Lq, D] or [B*H, Lq, D], got " + describe("Q", q));
  require_rank("K", k, rank);
  require_rank("V", v, rank);
  AttentionShape s;
  s.k_transposed = get_flag(node, "k_transposed", false);
  s.batch.assign(q.shape.begin(), q.shape.end() - 2);
  const Shape k_batch(k.shape.begin(), k.shape.end() - 2);
  const Shape v_batch(v.shape.begin(), v.shape.end() - 2);
  KILN_CHECK(k_batch == s.batch && v_batch == s.batch, ErrorKind::ShapeMismatch,
             "Q, K and V must have the same batch dimensions: " + describe("Q", q) + ", " + describe("K", k) + ", " +
                 describe("V", v));
  s.lq = q.shape[rank - 2];
  s.d = q.shape[rank - 1];
  s.lk = s.k_transposed ? k.shape[rank - 1] : k.shape[rank - 2];
  const std::int64_t k_depth = s.k_transposed ? k.shape[rank - 2] : k.shape[rank - 1];
  KILN_CHECK(k_depth == s.d, ErrorKind::ShapeMismatch,
             "K's head dimension differs from Q's (" + std::to_string(k_depth) + " vs " + std::to_string(s.d) +
                 "): " + describe("Q", q) + ", " + describe("K", k) + (s.k_transposed ? " (k_transposed)" : ""));
  KILN_CHECK(v.shape[rank - 2] == s.lk, ErrorKind::ShapeMismatch,
             "V must have one row per key (" + std::to_string(s.lk) + "): " + describe("K", k) + ", " +
                 describe("V", v));
  s.dv = v.shape[rank - 1];
  KILN_CHECK(s.d > 0 && s.lk > 0, ErrorKind::ShapeMismatch,
             "attention needs at least one key and a non-empty head: " + describe("Q", q) + ", " + describe("K", k));
  s.scale = node.attrs.get_float("scale", 1.0 / std::sqrt(static_cast<double>(s.d)));
  KILN_CHECK(std::isfinite(s.scale), ErrorKind::InvalidArgument, "scale must be finite");
  if (in.size() > 3 && has_input(node, 3)) {
    require_f32("mask", in[3]);
    Shape scores = s.batch;
    scores.push_back(s.lq);
    scores.push_back(s.lk);
    KILN_CHECK(is_broadcastable_to(in[3].shape, scores), ErrorKind::ShapeMismatch,
               describe("mask", in[3]) + " does not broadcast to the scores " + shape_str(scores));
  }
  return s;
}

Shape output_shape(const AttentionShape& s) {
  Shape out = s.batch;
  out.push_back(s.lq);
  out.push_back(s.dv);
  return out;
}

std::vector<TensorType> infer_attention(const Node& node, std::span<const TensorType> in) {
  return {{DType::f32, output_shape(attention_shape(node, in))}};
}

// Row by row: scores in double, the max subtracted before exp, as Softmax does.
std::vector<Tensor> reference_attention(const Node& node, std::span<const Tensor> in) {
  const std::vector<TensorType> types = types_of(in);
  const AttentionShape s = attention_shape(node, types);
  const bool has_mask = in.size() > 3 && has_input(node, 3);
  const std::int64_t heads = num_elements(s.batch);
  Shape scores_shape = s.batch;
  scores_shape.push_back(s.lq);
  scores_shape.push_back(s.lk);
  const Strides mask_strides = has_mask ? broadcast_strides(in[3].shape(), scores_shape) : Strides{};
  const Strides score_strides = row_major_strides(scores_shape);
  auto q = in[0].values<float>();
  auto k = in[1].values<float>();
  auto v = in[2].values<float>();
  Tensor out(DType::f32, output_shape(s));
  auto y = out.values<float>();
  std::vector<double> p(static_cast<std::size_t>(s.lk));
  for (std::int64_t h = 0; h < heads; ++h)
    for (std::int64_t i = 0; i < s.lq; ++i) {
      double max = -INFINITY;
      for (std::int64_t j = 0; j < s.lk; ++j) {
        double dot = 0;
        for (std::int64_t c = 0; c < s.d; ++c) {
          const std::int64_t k_at = s.k_transposed ? (h * s.d + c) * s.lk + j : (h * s.lk + j) * s.d + c;
          dot += double(q[(h * s.lq + i) * s.d + c]) * k[k_at];
        }
        double score = s.scale * dot;
        if (has_mask) {
          // The mask element for score (h..., i, j): walk the score's coordinates.
          std::int64_t linear = (h * s.lq + i) * s.lk + j, offset = 0;
          for (std::size_t dim = 0; dim < scores_shape.size(); ++dim) {
            offset += linear / score_strides[dim] * mask_strides[dim];
            linear %= score_strides[dim];
          }
          score += in[3].values<float>()[offset];
        }
        p[j] = score;
        max = std::fmax(max, score);
      }
      double sum = 0;
      for (double& e : p) sum += (e = std::exp(e - max));
      for (std::int64_t c = 0; c < s.dv; ++c) {
        double acc = 0;
        for (std::int64_t j = 0; j < s.lk; ++j) acc += p[j] * v[(h * s.lk + j) * s.dv + c];
        y[(h * s.lq + i) * s.dv + c] = static_cast<float>(acc / sum);
      }
    }
  return {out};
}

}  // namespace

void register_attention_ops(OpTable& table) {
  add_op(table, make_schema("Attention", 3, 4, infer_attention, reference_attention,
                            "softmax(scale * Q K^T + mask) V per head; K given as K^T with k_transposed=1"));
}

}  // namespace kiln::graph::ops
