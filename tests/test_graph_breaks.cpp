#define BOOST_TEST_MODULE graph_breaks
#include <boost/test/unit_test.hpp>

#include <kiln/kiln.h>

#include "graph/ir.h"
#include "graph/op_registry.h"
#include "src/runtime/executor.h"
#include "src/runtime/internal_access.h"

#include <algorithm>
#include <functional>
#include <limits>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <vector>

using namespace kiln;
using namespace kiln::graph;

namespace {

void expect_error(const std::function<void()>& body, ErrorKind kind, const std::vector<std::string>& fragments) {
  try {
    body();
  } catch (const Error& e) {
    BOOST_TEST(error_kind_name(e.kind()) == error_kind_name(kind), "message: " << e.what());
    for (const std::string& fragment : fragments)
      BOOST_TEST(std::string(e.what()).find(fragment) != std::string::npos,
                 "'" << fragment << "' not in: " << e.what());
    return;
  }
  BOOST_FAIL("no kiln::Error thrown");
}

Attributes attrs_of(std::initializer_list<std::pair<std::string, Attribute>> list) {
  Attributes attrs;
  for (const auto& [name, value] : list) attrs.set(name, value);
  return attrs;
}

Node node_of(const std::string& op, std::size_t inputs, Attributes attrs = {}) {
  Node n;
  n.op = op;
  n.name = "test_" + op;
  for (std::size_t i = 0; i < inputs; ++i) n.inputs.push_back(static_cast<ValueId>(i));
  n.attrs = std::move(attrs);
  return n;
}

std::vector<std::int64_t> ints(const Tensor& t) {
  auto v = t.values<std::int64_t>();
  return {v.begin(), v.end()};
}

std::vector<float> floats(const Tensor& t) {
  auto v = t.values<float>();
  return {v.begin(), v.end()};
}

Tensor random_f32(const Shape& shape, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  Tensor t(DType::f32, shape);
  for (float& v : t.values<float>()) v = dist(rng);
  return t;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

// ONNX's suppress_by_IOU example: six boxes in [y1, x1, y2, x2].
Tensor nms_boxes() {
  return Tensor::from_f32({1, 6, 4}, {0, 0, 1, 1, 0, 0.1f, 1, 1.1f, 0, -0.1f, 1, 0.9f,
                                      0, 10, 1, 11, 0, 10.1f, 1, 11.1f, 0, 100, 1, 101});
}

// x[2, 16] -> Relu (kernel) -> TopK k=4 (host: no lowering, static outputs)
// -> Sigmoid (kernel, reads a host-made value); NonZero(Relu(x)) (host,
// dynamic); NonMaxSuppression(boxes, Sigmoid(logits)) (host, dynamic) ->
// Transpose (host: its input is dynamic).
Model break_model() {
  Builder b("breaks");
  auto x = b.input("x", DType::f32, {2, 16});
  auto boxes = b.input("boxes", DType::f32, {1, 6, 4});
  auto logits = b.input("logits", DType::f32, {1, 1, 6});
  auto relu = b.relu(x);
  auto topk = b.op("TopK", {relu}, attrs_of({{"k", std::int64_t{4}}, {"axis", std::int64_t{1}}}));
  auto top_sigmoid = b.sigmoid(topk[0]);
  auto nonzero = b.op("NonZero", {relu}, {});
  auto nms = b.op("NonMaxSuppression", {boxes, b.sigmoid(logits)},
                  attrs_of({{"max_output_boxes_per_class", std::int64_t{3}}, {"iou_threshold", 0.5}}));
  auto selected = b.transpose(nms[0], {1, 0});
  return b.build({top_sigmoid, topk[1], nonzero[0], selected});
}

std::vector<Tensor> break_inputs(unsigned seed) {
  return {random_f32({2, 16}, seed), nms_boxes(), random_f32({1, 1, 6}, seed + 1)};
}

void check_same(const std::vector<Tensor>& got, const std::vector<Tensor>& want) {
  BOOST_TEST_REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    BOOST_TEST_REQUIRE((got[i].dtype() == want[i].dtype()));
    BOOST_TEST_REQUIRE(got[i].shape() == want[i].shape(), "output " << i);
    if (got[i].dtype() == DType::f32) BOOST_TEST(max_abs_diff(got[i], want[i]) < 1e-5f, "output " << i);
    else BOOST_TEST(ints(got[i]) == ints(want[i]), "output " << i);
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(reference)

BOOST_AUTO_TEST_CASE(nonzero_lists_coordinates_in_row_major_order) {
  const OpSchema& op = get_op("NonZero");
  Tensor x = Tensor::from_f32({2, 3}, {1, 0, 2, 0, 0, -3});
  auto out = op.reference(node_of("NonZero", 1), std::vector<Tensor>{x});
  BOOST_TEST(out[0].shape() == (Shape{2, 3}));
  BOOST_TEST(ints(out[0]) == (std::vector<std::int64_t>{0, 0, 1, 0, 2, 2}));

  Tensor flags(DType::boolean, {4});
  flags.values<std::uint8_t>()[2] = 1;
  out = op.reference(node_of("NonZero", 1), std::vector<Tensor>{flags});
  BOOST_TEST(out[0].shape() == (Shape{1, 1}));
  BOOST_TEST(ints(out[0]) == (std::vector<std::int64_t>{2}));

  out = op.reference(node_of("NonZero", 1), std::vector<Tensor>{Tensor(DType::i64, {3})});
  BOOST_TEST(out[0].shape() == (Shape{1, 0}));
}

BOOST_AUTO_TEST_CASE(topk_largest_smallest_and_ties) {
  const OpSchema& op = get_op("TopK");
  Tensor x = Tensor::from_f32({2, 4}, {1, 5, 3, 5, 0, -1, 2, 7});
  auto out = op.reference(node_of("TopK", 1, attrs_of({{"k", std::int64_t{2}}})), std::vector<Tensor>{x});
  BOOST_TEST(floats(out[0]) == (std::vector<float>{5, 5, 7, 2}));
  BOOST_TEST(ints(out[1]) == (std::vector<std::int64_t>{1, 3, 3, 2}));  // ties: lower index first

  out = op.reference(node_of("TopK", 1, attrs_of({{"k", std::int64_t{1}}, {"largest", std::int64_t{0}},
                                                  {"axis", std::int64_t{0}}})),
                     std::vector<Tensor>{x});
  BOOST_TEST(out[0].shape() == (Shape{1, 4}));
  BOOST_TEST(floats(out[0]) == (std::vector<float>{0, -1, 2, 5}));
  BOOST_TEST(ints(out[1]) == (std::vector<std::int64_t>{1, 1, 1, 0}));

  // k read from a tensor: the output extent is dynamic in the type, concrete in the tensor.
  Tensor k = Tensor::from_i64({1}, {3});
  out = op.reference(node_of("TopK", 2), std::vector<Tensor>{x, k});
  BOOST_TEST(out[0].shape() == (Shape{2, 3}));
  BOOST_TEST(floats(out[0]) == (std::vector<float>{5, 5, 3, 7, 2, 0}));
  // With kiln's clamp_k, k beyond the axis takes the whole axis (torchvision's min(k, n)).
  out = op.reference(node_of("TopK", 1, attrs_of({{"k", std::int64_t{300}}, {"clamp_k", std::int64_t{1}}})),
                     std::vector<Tensor>{x});
  BOOST_TEST(out[0].shape() == (Shape{2, 4}));
  BOOST_TEST(floats(out[0]) == (std::vector<float>{5, 5, 3, 1, 7, 2, 0, -1}));

  expect_error([&] { op.reference(node_of("TopK", 1), std::vector<Tensor>{x}); }, ErrorKind::InvalidArgument,
               {"TopK", "needs k"});
}

// ONNX rejects a k past the axis; returning fewer values would be a silent
// wrong answer. Shape inference and the reference both check it.
BOOST_AUTO_TEST_CASE(topk_k_past_the_axis_or_negative_is_an_error) {
  const OpSchema& op = get_op("TopK");
  const Tensor x = Tensor::from_f32({2, 4}, {1, 5, 3, 5, 0, -1, 2, 7});
  expect_error([&] { op.reference(node_of("TopK", 1, attrs_of({{"k", std::int64_t{5}}})), std::vector<Tensor>{x}); },
               ErrorKind::InvalidArgument,
               {"node 'test_TopK' (TopK)", "attribute 'k' is k = 5, more than the 4 elements along axis 1 of X f32[2, 4]"});
  expect_error([&] { op.reference(node_of("TopK", 2), std::vector<Tensor>{x, Tensor::from_i64({1}, {9})}); },
               ErrorKind::InvalidArgument, {"input K is k = 9, more than the 4 elements along axis 1"});
  expect_error([&] { op.reference(node_of("TopK", 1, attrs_of({{"k", std::int64_t{-1}}})), std::vector<Tensor>{x}); },
               ErrorKind::InvalidArgument, {"attribute 'k' must not be negative, got k = -1"});
  expect_error([&] { op.reference(node_of("TopK", 2), std::vector<Tensor>{x, Tensor::from_i64({1}, {-3})}); },
               ErrorKind::InvalidArgument, {"input K must not be negative, got k = -3"});
  // Shape inference: a graph with such a node is refused when it is built.
  Graph g;
  const ValueId in = g.add_input("x", {DType::f32, {2, 4}});
  expect_error([&] { g.add_node("TopK", {in}, attrs_of({{"k", std::int64_t{7}}, {"axis", std::int64_t{0}}}), "top7"); },
               ErrorKind::InvalidArgument, {"node 'top7' (TopK)", "k = 7, more than the 2 elements along axis 0"});
  // k equal to the extent is fine, and clamp_k must be 0 or 1.
  BOOST_TEST(op.reference(node_of("TopK", 1, attrs_of({{"k", std::int64_t{4}}})), std::vector<Tensor>{x})[0].shape() ==
             (Shape{2, 4}));
  expect_error(
      [&] { op.reference(node_of("TopK", 1, attrs_of({{"k", std::int64_t{1}}, {"clamp_k", std::int64_t{2}}})), std::vector<Tensor>{x}); },
      ErrorKind::InvalidArgument, {"'clamp_k' must be 0 or 1"});
}

BOOST_AUTO_TEST_CASE(nms_matches_onnx_examples) {
  const OpSchema& op = get_op("NonMaxSuppression");
  Tensor scores = Tensor::from_f32({1, 1, 6}, {0.9f, 0.75f, 0.6f, 0.95f, 0.5f, 0.3f});
  Tensor max_out = Tensor::from_i64({1}, {3});
  Tensor iou = Tensor::from_f32({1}, {0.5f});
  Tensor score_threshold = Tensor::from_f32({1}, {0.0f});
  auto out = op.reference(node_of("NonMaxSuppression", 5),
                          std::vector<Tensor>{nms_boxes(), scores, max_out, iou, score_threshold});
  BOOST_TEST(out[0].shape() == (Shape{3, 3}));
  BOOST_TEST(ints(out[0]) == (std::vector<std::int64_t>{0, 0, 3, 0, 0, 0, 0, 0, 5}));

  // Score threshold 0.4 drops box 5; the attribute form gives the same as inputs.
  out = op.reference(node_of("NonMaxSuppression", 2,
                             attrs_of({{"max_output_boxes_per_class", std::int64_t{10}},
                                       {"iou_threshold", 0.5},
                                       {"score_threshold", 0.4}})),
                     std::vector<Tensor>{nms_boxes(), scores});
  BOOST_TEST(ints(out[0]) == (std::vector<std::int64_t>{0, 0, 3, 0, 0, 0}));

  // center_point_box: [x_center, y_center, width, height]; two overlapping boxes keep one.
  Tensor centers = Tensor::from_f32({1, 2, 4}, {0.5f, 0.5f, 1, 1, 0.55f, 0.5f, 1, 1});
  out = op.reference(node_of("NonMaxSuppression", 2,
                             attrs_of({{"center_point_box", std::int64_t{1}},
                                       {"max_output_boxes_per_class", std::int64_t{5}},
                                       {"iou_threshold", 0.5}})),
                     std::vector<Tensor>{centers, Tensor::from_f32({1, 1, 2}, {0.1f, 0.2f})});
  BOOST_TEST(ints(out[0]) == (std::vector<std::int64_t>{0, 0, 1}));

  expect_error([&] {
    op.reference(node_of("NonMaxSuppression", 2), std::vector<Tensor>{nms_boxes(), Tensor(DType::f32, {1, 1, 5})});
  }, ErrorKind::ShapeMismatch, {"NonMaxSuppression", "scores must be [batch, classes, boxes]"});
}

// The exhaustive greedy NMS of the ONNX definition, for one class: the
// reference implementation indexes kept boxes and must select exactly this.
std::vector<std::int64_t> exhaustive_nms(const std::vector<float>& boxes, const std::vector<float>& scores,
                                         std::int64_t max_kept, float iou_threshold) {
  struct Box {
    double y1, x1, y2, x2;
  };
  std::vector<Box> b;
  for (std::size_t i = 0; i < scores.size(); ++i) {
    const float* c = &boxes[i * 4];
    b.push_back({std::min<double>(c[0], c[2]), std::min<double>(c[1], c[3]), std::max<double>(c[0], c[2]),
                 std::max<double>(c[1], c[3])});
  }
  const auto iou = [](const Box& p, const Box& q) {
    const double h = std::min(p.y2, q.y2) - std::max(p.y1, q.y1);
    const double w = std::min(p.x2, q.x2) - std::max(p.x1, q.x1);
    if (h <= 0.0 || w <= 0.0) return 0.0;
    const double inter = h * w;
    const double uni = (p.y2 - p.y1) * (p.x2 - p.x1) + (q.y2 - q.y1) * (q.x2 - q.x1) - inter;
    return uni <= 0.0 ? 0.0 : inter / uni;
  };
  std::vector<std::int64_t> order(scores.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](std::int64_t x, std::int64_t y) { return scores[x] > scores[y]; });
  std::vector<std::int64_t> kept;
  for (std::int64_t i : order) {
    if (static_cast<std::int64_t>(kept.size()) >= max_kept) break;
    bool suppressed = false;
    for (std::int64_t j : kept) suppressed = suppressed || iou(b[i], b[j]) > iou_threshold;
    if (!suppressed) kept.push_back(i);
  }
  return kept;
}

BOOST_AUTO_TEST_CASE(nms_selects_what_the_exhaustive_scan_selects) {
  // Thousands of boxes in class-offset clusters (as torchvision's batched NMS
  // lays them out), widths from tiny to one box spanning everything, and
  // boxes with NaN and infinite corners.
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> unit(0.0f, 1.0f);
  const std::int64_t count = 3000;
  std::vector<float> boxes, scores;
  for (std::int64_t i = 0; i < count; ++i) {
    const float offset = static_cast<float>(i % 40) * 3.0f;
    const float y = unit(rng), x = offset + unit(rng) * 2.0f;
    const float h = 0.01f + unit(rng) * 0.5f, w = 0.01f + unit(rng) * (i % 97 == 0 ? 50.0f : 0.6f);
    if (i % 2 == 0) boxes.insert(boxes.end(), {y, x, y + h, x + w});
    else boxes.insert(boxes.end(), {y + h, x + w, y, x});  // the other diagonal
    scores.push_back(unit(rng));
  }
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::copy_n(std::vector<float>{0.1f, nan, 0.5f, 1.0f}.begin(), 4, boxes.begin() + 4 * 10);
  std::copy_n(std::vector<float>{0.0f, -inf, 1.0f, inf}.begin(), 4, boxes.begin() + 4 * 20);
  std::copy_n(std::vector<float>{0.2f, 5.0f, 0.2f, 5.5f}.begin(), 4, boxes.begin() + 4 * 30);  // zero height
  scores[10] = scores[20] = scores[30] = 0.999f;

  const OpSchema& op = get_op("NonMaxSuppression");
  for (const float threshold : {0.0f, 0.3f, 0.7f, 1.0f}) {
    for (const std::int64_t max_kept : {std::int64_t{50}, count}) {
      auto out = op.reference(node_of("NonMaxSuppression", 2,
                                      attrs_of({{"max_output_boxes_per_class", max_kept},
                                                {"iou_threshold", static_cast<double>(threshold)}})),
                              std::vector<Tensor>{Tensor::from_f32({1, count, 4}, std::vector<float>(boxes)),
                                                  Tensor::from_f32({1, 1, count}, std::vector<float>(scores))});
      std::vector<std::int64_t> selected;
      const std::vector<std::int64_t> triples = ints(out[0]);
      for (std::size_t r = 0; r < triples.size(); r += 3) selected.push_back(triples[r + 2]);
      const std::vector<std::int64_t> expected = exhaustive_nms(boxes, scores, max_kept, threshold);
      BOOST_TEST_INFO("iou_threshold " << threshold << ", max " << max_kept);
      BOOST_TEST(selected == expected, boost::test_tools::per_element());
      BOOST_TEST(expected.size() > 10u);
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(dynamic_shapes)

BOOST_AUTO_TEST_CASE(dynamic_types_propagate_through_the_graph) {
  Graph g;
  const ValueId x = g.add_input("x", {DType::f32, {2, 3}});
  const ValueId relu = g.add_node("Relu", {x}, {}, "relu")[0];
  const ValueId nz = g.add_node("NonZero", {relu}, {}, "nonzero")[0];
  BOOST_TEST(g.value(nz).type.dynamic);
  BOOST_TEST(type_str(g.value(nz).type) == "i64[2, ?]");
  // Static inference of Transpose, probed: the known extent stays known.
  const ValueId t = g.add_node("Transpose", {nz}, attrs_of({{"perm", std::vector<std::int64_t>{1, 0}}}), "t")[0];
  BOOST_TEST(type_str(g.value(t).type) == "i64[?, 2]");
  // A Reshape that needs the real extent: dynamic of unknown rank.
  const ValueId r = g.add_node("Reshape", {t}, attrs_of({{"shape", std::vector<std::int64_t>{4, -1}}}), "r")[0];
  BOOST_TEST(g.value(r).type.dynamic);
  BOOST_TEST(type_str(g.value(r).type) == "i64[?...]");
  g.set_outputs({relu, t, r});
  g.verify();

  BOOST_TEST(type_accepts(g.value(t).type, TensorType{DType::i64, {7, 2}}));
  BOOST_TEST(!type_accepts(g.value(t).type, TensorType{DType::i64, {7, 3}}));
  BOOST_TEST(!type_accepts(g.value(t).type, TensorType{DType::f32, {7, 2}}));

  auto out = run_reference(g, std::vector<Tensor>{Tensor::from_f32({2, 3}, {1, 0, 0, 0, 2, 0})});
  BOOST_TEST(out[1].shape() == (Shape{2, 2}));
  BOOST_TEST(ints(out[1]) == (std::vector<std::int64_t>{0, 0, 1, 1}));
  BOOST_TEST(out[2].shape() == (Shape{4, 1}));

  expect_error([&] { g.add_input("bad", dynamic_type(DType::f32, {kDynamicDim})); }, ErrorKind::Unsupported,
               {"bad", "static shapes"});
}

BOOST_AUTO_TEST_CASE(topk_with_a_k_tensor_is_dynamic_and_with_an_attribute_static) {
  Graph g;
  const ValueId x = g.add_input("x", {DType::f32, {2, 5}});
  const ValueId k = g.add_input("k", {DType::i64, {1}});
  const auto dyn = g.add_node("TopK", {x, k}, {}, "topk_dynamic");
  BOOST_TEST(type_str(g.value(dyn[0]).type) == "f32[2, ?]");
  BOOST_TEST(type_str(g.value(dyn[1]).type) == "i64[2, ?]");
  const auto fixed = g.add_node("TopK", {x}, attrs_of({{"k", std::int64_t{3}}}), "topk_static");
  BOOST_TEST(!g.value(fixed[0]).type.dynamic);
  BOOST_TEST(g.value(fixed[0]).type.shape == (Shape{2, 3}));
}

// torchvision's post-processing per class, as torch.onnx writes it: the
// scores above a threshold (NonZero, GatherND), k = min(3, their count) from
// the Shape of that data-dependent value, TopK with that k, and labels as
// ConstantOfShape of the TopK result's Shape. Values whose extents do not
// follow the data (the Shape, the count, k) get static types by probing.
Model shape_of_data_model() {
  Graph g;
  const ValueId scores = g.add_input("scores", {DType::f32, {10}});
  const ValueId threshold = g.add_constant("threshold", Tensor::scalar_f32(0.0f));
  const ValueId above = g.add_node("Greater", {scores, threshold}, {}, "above")[0];
  const ValueId nz = g.add_node("NonZero", {above}, {}, "nonzero")[0];
  const ValueId idx = g.add_node("Transpose", {nz}, attrs_of({{"perm", std::vector<std::int64_t>{1, 0}}}), "idx")[0];
  const ValueId kept = g.add_node("GatherND", {scores, idx}, {}, "kept")[0];
  const ValueId shape = g.add_node("Shape", {kept}, {}, "shape")[0];
  const ValueId three = g.add_constant("three", Tensor::from_i64({1}, {3}));
  const ValueId both = g.add_node("Concat", {three, shape}, attrs_of({{"axis", std::int64_t{0}}}), "both")[0];
  const ValueId k = g.add_node("ReduceMin", {both}, attrs_of({{"keepdims", std::int64_t{1}}}), "k")[0];
  const auto top = g.add_node("TopK", {kept, k}, {}, "top");
  const ValueId top_shape = g.add_node("Shape", {top[0]}, {}, "top_shape")[0];
  const ValueId label = g.add_constant("label", Tensor::from_i64({}, {7}));
  const ValueId labels = g.add_node("ConstantOfShape", {top_shape, label}, {}, "labels")[0];
  g.set_outputs({top[0], top[1], labels, k});
  g.verify();
  return kiln::internal::make_model(std::make_shared<const Graph>(std::move(g)), "shape_of_data");
}

BOOST_AUTO_TEST_CASE(shapes_of_data_dependent_values_are_static_and_feed_topk_and_constant_of_shape) {
  const Model model = shape_of_data_model();
  const Graph& g = kiln::internal::graph(model);
  auto type_of = [&](const std::string& name) {
    for (const Value& v : g.values())
      if (v.name == name) return type_str(v.type);
    return std::string("(none)");
  };
  BOOST_TEST(type_of("kept") == "f32[?]");
  BOOST_TEST(type_of("shape") == "i64[1]");  // static: its extent does not follow the data
  BOOST_TEST(type_of("k") == "i64[1]");
  BOOST_TEST(type_of("top:0") == "f32[?]");
  BOOST_TEST(type_of("labels") == "i64[?]");
  // 4 positive scores, so k = 3; then 1 positive score, so k = 1; then none.
  const std::vector<Tensor> cases = {
      Tensor::from_f32({10}, {-1, 0.5f, 2, -3, 0.25f, 0, 4, -1, -2, -0.5f}),
      Tensor::from_f32({10}, {-1, -0.5f, -2, -3, 0.25f, 0, -4, -1, -2, -0.5f}),
      Tensor::from_f32({10}, {-1, -0.5f, -2, -3, -0.25f, 0, -4, -1, -2, -0.5f})};
  auto compiled = compile(model);
  for (const Tensor& scores : cases) {
    const auto want = run_reference(g, std::vector<Tensor>{scores});
    check_same(compiled({scores}), want);
  }
  const auto first = run_reference(g, std::vector<Tensor>{cases[0]});
  BOOST_TEST(floats(first[0]) == (std::vector<float>{4, 2, 0.5f}));
  BOOST_TEST(ints(first[2]) == (std::vector<std::int64_t>{7, 7, 7}));
  const auto none = compiled({cases[2]});
  BOOST_TEST(none[0].shape() == (Shape{0}));
  BOOST_TEST(ints(none[3]) == (std::vector<std::int64_t>{0}));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(executor)

BOOST_AUTO_TEST_CASE(breaks_run_on_the_host_in_every_mode) {
  const Model model = break_model();
  auto eager_model = eager(model);
  auto compiled = compile(model);
  auto replayed = compile(model, {.mode = Mode::reduce_overhead});
  for (unsigned seed : {1u, 2u}) {
    const auto inputs = break_inputs(seed);
    const auto want = run_reference(kiln::internal::graph(model), inputs);
    BOOST_TEST_CONTEXT("seed " << seed) {
      check_same(eager_model(inputs), want);
      check_same(compiled(inputs), want);
      check_same(replayed(inputs), want);
    }
  }
  // TopK, NonZero, NonMaxSuppression and the Transpose of a dynamic value.
  BOOST_TEST(compiled.stats().host_steps_per_run == 4);
  BOOST_TEST(replayed.stats().host_steps_per_run == 4);
  BOOST_TEST(compiled.stats().dispatches_per_run >= 2);
  const auto& breaks = kiln::internal::engine(compiled).graph_breaks();
  BOOST_TEST_REQUIRE(breaks.size() == 4u);
  BOOST_TEST(breaks[1].op == "NonZero");
  BOOST_TEST(breaks[1].reason == "output shape depends on data");
  BOOST_TEST(breaks[3].reason == "input shape depends on data (input 'non_max_suppression')");
}

BOOST_AUTO_TEST_CASE(fullgraph_lists_every_break) {
  auto compiled = compile(break_model(), {.fullgraph = true});
  expect_error([&] { compiled.prepare(); }, ErrorKind::Unsupported,
               {"fullgraph", "4 graph break(s)", "graph break: TopK 'top_k': op 'TopK' has no lowering",
                "graph break: NonZero 'non_zero': output shape depends on data",
                "graph break: NonMaxSuppression 'non_max_suppression': output shape depends on data",
                "graph break: Transpose 'transpose': input shape depends on data (input 'non_max_suppression')"});
}

BOOST_AUTO_TEST_CASE(explain_shows_breaks_and_ops_per_backend) {
  auto compiled = compile(break_model());
  compiled.prepare();
  const std::string text = compiled.explain();
  BOOST_TEST(contains(text, "graph breaks: 4"), text);
  BOOST_TEST(contains(text, "NonZero: 0 on vulkan, 1 on host (output shape depends on data)"), text);
  BOOST_TEST(contains(text, "Relu: 1 on vulkan, 0 on host"), text);
  BOOST_TEST(contains(text, "4 host steps"), text);
  BOOST_TEST(contains(text, "[host] "), text);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(ssdlite)

// Small enough for CI: 64x64 input, 4 classes (background + 3).
Model small_ssdlite() {
  return models::build("ssdlite320_mobilenet_v3_large", {.batch = 1, .image_size = 64, .num_classes = 4, .seed = 3});
}

BOOST_AUTO_TEST_CASE(outputs_are_dynamic_detections) {
  const Model model = small_ssdlite();
  BOOST_TEST(model.task() == "detection");
  const Graph& g = kiln::internal::graph(model);
  BOOST_TEST_REQUIRE(g.outputs().size() == 3u);
  BOOST_TEST(type_str(g.value(g.outputs()[0]).type) == "f32[?, 4]");
  BOOST_TEST(type_str(g.value(g.outputs()[1]).type) == "f32[?]");
  BOOST_TEST(type_str(g.value(g.outputs()[2]).type) == "i64[?]");
}

BOOST_AUTO_TEST_CASE(compiled_with_breaks_matches_the_reference) {
  const Model model = small_ssdlite();
  const Tensor image = random_f32({1, 3, 64, 64}, 21);
  const auto want = run_reference(kiln::internal::graph(model), std::vector<Tensor>{image});
  BOOST_TEST(want[0].shape()[0] > 0);
  BOOST_TEST(want[0].shape()[0] <= 300);
  auto compiled = compile(model);
  const auto got = compiled({image});
  BOOST_TEST_REQUIRE(got.size() == 3u);
  BOOST_TEST_REQUIRE(got[0].shape() == want[0].shape());
  BOOST_TEST(max_abs_diff(got[0], want[0]) < 1e-2f);
  BOOST_TEST(max_abs_diff(got[1], want[1]) < 1e-4f);
  BOOST_TEST(ints(got[2]) == ints(want[2]));
  // Scores come out best first, as torchvision's batched_nms orders them.
  const auto scores = floats(got[1]);
  BOOST_TEST(std::is_sorted(scores.rbegin(), scores.rend()));
  BOOST_TEST(compiled.stats().host_steps_per_run > 0);
  BOOST_TEST(compiled.stats().dispatches_per_run > 50);

  const std::string text = compiled.explain();
  BOOST_TEST(contains(text, "NonMaxSuppression: 0 on vulkan, 1 on host (input shape depends on data)"), text);
  BOOST_TEST(contains(text, "TopK: 0 on vulkan, 3 on host (input shape depends on data)"), text);
  BOOST_TEST(contains(text, "Conv: "), text);
  BOOST_TEST(contains(text, "NonZero: 0 on vulkan, 3 on host (output shape depends on data)"), text);
}

BOOST_AUTO_TEST_CASE(fullgraph_fails_listing_the_post_processing_breaks) {
  auto compiled = compile(small_ssdlite(), {.fullgraph = true});
  // 39 breaks: the message lists the first 32 and counts the rest (a hostile
  // model may have a million); explain() has them all.
  expect_error([&] { compiled.prepare(); }, ErrorKind::Unsupported,
               {"fullgraph", "has 39 graph break(s)", "graph break: NonZero 'postprocess.class1.",
                "output shape depends on data", "graph break: TopK 'postprocess.class3.",
                "... (7 more; explain() lists them all)"});
}

BOOST_AUTO_TEST_SUITE_END()
