// Op cases of the data-movement family: Slice, Split, Gather, Squeeze,
// Unsqueeze, Expand, Tile, Pad, Resize, Trilu and TensorScatter, over the
// attribute forms their kernels specialise on. Every case is f32 end to end
// (but TensorScatter's i64 write indices), so it must compile without graph
// breaks on every backend. Squeeze and Unsqueeze are views, so
// their cases add an elementwise op to give the backend a kernel to run.
#include "op_cases.h"

#include <kiln/builder.h>

#include "graph/ir.h"

#include <cstdint>
#include <functional>
#include <limits>
#include <optional>

namespace kiln::testing {
namespace {

using V = Builder::Value;
using Vs = std::vector<V>;
using Ints = std::vector<std::int64_t>;

constexpr std::int64_t kMaxInt = std::numeric_limits<std::int64_t>::max();
constexpr std::int64_t kMinInt = std::numeric_limits<std::int64_t>::min();

// Uniform values in [-1, 1) from a seeded linear congruential generator, the
// same on every platform.
Tensor seeded_tensor(std::uint64_t seed, const Shape& shape) {
  Tensor t(DType::f32, shape);
  std::uint64_t state = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (float& v : t.values<float>()) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    v = -1.0f + 2.0f * (static_cast<float>(state >> 40) / static_cast<float>(1ull << 24));
  }
  return t;
}

struct DataCases {
  std::vector<OpCase>& cases;
  std::uint64_t seed = 2000;

  // A case with f32 inputs of `shapes`; `body` returns the outputs.
  void add(const std::string& name, const std::vector<Shape>& shapes, const std::function<Vs(Builder&, Vs&)>& body) {
    Builder b(name);
    Vs xs;
    std::vector<Tensor> inputs;
    for (std::size_t i = 0; i < shapes.size(); ++i) {
      xs.push_back(b.input("x" + std::to_string(i), DType::f32, shapes[i]));
      inputs.push_back(seeded_tensor(seed++, shapes[i]));
    }
    const Vs outputs = body(b, xs);
    cases.push_back({name, b.build(outputs), std::move(inputs), 1e-5f});
  }

  // A case running one op on one input.
  void add_op(const std::string& name, const Shape& shape, const std::string& op, const graph::Attributes& attrs) {
    add(name, {shape}, [&](Builder& b, Vs& xs) { return b.op(op, {xs[0]}, attrs); });
  }
};

graph::Attributes attrs(std::initializer_list<std::pair<std::string, graph::Attribute>> list) {
  graph::Attributes a;
  for (const auto& [name, value] : list) a.set(name, value);
  return a;
}

void slice_cases(DataCases& c) {
  c.add_op("Slice/window_hw", {1, 3, 8, 8}, "Slice", attrs({{"starts", Ints{1, 2}}, {"ends", Ints{7, 8}}, {"axes", Ints{2, 3}}}));
  c.add_op("Slice/reverse_step2", {2, 3, 9}, "Slice",
           attrs({{"starts", Ints{-1}}, {"ends", Ints{kMinInt}}, {"axes", Ints{-1}}, {"steps", Ints{-2}}}));
  c.add_op("Slice/clamped_strided", {2, 5, 7}, "Slice",
           attrs({{"starts", Ints{1, -100}}, {"ends", Ints{kMaxInt, 100}}, {"axes", Ints{1, 2}}, {"steps", Ints{2, 3}}}));
}

void split_cases(DataCases& c) {
  c.add_op("Split/sizes_axis1", {2, 6, 4}, "Split", attrs({{"axis", std::int64_t{1}}, {"split", Ints{1, 2, 3}}}));
  c.add_op("Split/num_outputs_last_axis", {3, 7}, "Split",
           attrs({{"axis", std::int64_t{-1}}, {"num_outputs", std::int64_t{3}}}));
}

void gather_cases(DataCases& c) {
  // x[:, 0] as PyTorch exports it (a ViT's class token).
  c.add_op("Gather/scalar_index", {2, 5, 4}, "Gather",
           attrs({{"axis", std::int64_t{1}}, {"indices", Ints{0}}, {"indices_shape", Ints{}}}));
  c.add_op("Gather/negative_indices_runs", {6, 3}, "Gather",
           attrs({{"axis", std::int64_t{0}}, {"indices", Ints{5, -1, 0, 1, 2, 4, 2}}, {"indices_shape", Ints{7}}}));
  c.add_op("Gather/matrix_indices_last_axis", {2, 3, 5}, "Gather",
           attrs({{"axis", std::int64_t{-1}}, {"indices", Ints{4, 0, 1, 3}}, {"indices_shape", Ints{2, 2}}}));
}

void view_cases(DataCases& c) {
  c.add("Unsqueeze/then_add", {{3, 4}, {3, 2, 4}}, [](Builder& b, Vs& xs) {
    const V u = b.op("Unsqueeze", {xs[0]}, attrs({{"axes", Ints{1}}}))[0];
    return Vs{b.add(u, xs[1])};
  });
  c.add("Squeeze/then_mul", {{1, 3, 1, 4}, {3, 4}}, [](Builder& b, Vs& xs) {
    const V s = b.op("Squeeze", {xs[0]}, attrs({{"axes", Ints{0, -2}}}))[0];
    return Vs{b.mul(s, xs[1])};
  });
}

void expand_tile_cases(DataCases& c) {
  c.add_op("Expand/new_leading_dims", {3, 1}, "Expand", attrs({{"shape", Ints{2, 1, 4}}}));
  c.add_op("Expand/same_rank", {1, 4, 1}, "Expand", attrs({{"shape", Ints{3, 4, 5}}}));
  c.add_op("Tile/2d", {2, 3}, "Tile", attrs({{"repeats", Ints{2, 3}}}));
  c.add_op("Tile/unit_dims", {1, 2, 3}, "Tile", attrs({{"repeats", Ints{2, 1, 2}}}));
}

void pad_cases(DataCases& c) {
  c.add_op("Pad/constant_value", {1, 2, 4, 5}, "Pad",
           attrs({{"pads", Ints{0, 0, 1, 2, 0, 0, 2, 1}}, {"value", 0.5}}));
  c.add_op("Pad/reflect", {1, 2, 5, 6}, "Pad", attrs({{"pads", Ints{0, 0, 2, 3, 0, 0, 4, 1}}, {"mode", std::string("reflect")}}));
  c.add_op("Pad/edge", {2, 3, 4}, "Pad", attrs({{"pads", Ints{0, 2, 1, 1, 0, 3}}, {"mode", std::string("edge")}}));
  c.add_op("Pad/negative_crops", {1, 1, 6, 6}, "Pad", attrs({{"pads", Ints{0, 0, -1, 2, 0, 0, 1, -2}}}));
}

graph::Attributes resize_attrs(const std::string& mode, const std::string& coordinate, const std::string& nearest,
                               std::optional<std::vector<double>> scales, std::optional<Ints> sizes) {
  graph::Attributes a = attrs({{"mode", mode}, {"coordinate_transformation_mode", coordinate}});
  if (!nearest.empty()) a.set("nearest_mode", nearest);
  if (scales) a.set("scales", *scales);
  if (sizes) a.set("sizes", *sizes);
  return a;
}

void resize_cases(DataCases& c) {
  using Scales = std::vector<double>;
  // nn.Upsample(scale_factor=2, mode="nearest") as PyTorch exports it.
  c.add_op("Resize/nearest_upsample2_asymmetric_floor", {1, 2, 3, 4}, "Resize",
           resize_attrs("nearest", "asymmetric", "floor", Scales{1, 1, 2, 2}, std::nullopt));
  c.add_op("Resize/nearest_half_pixel_sizes", {1, 2, 4, 4}, "Resize",
           resize_attrs("nearest", "half_pixel", "round_prefer_floor", std::nullopt, Ints{1, 2, 7, 5}));
  // 7 -> 9 is a size where double coordinates round exact ties down.
  c.add_op("Resize/nearest_floor_double_ties", {1, 2, 7, 7}, "Resize",
           resize_attrs("nearest", "half_pixel", "floor", std::nullopt, Ints{1, 2, 9, 9}));
  c.add_op("Resize/nearest_align_corners_prefer_ceil", {1, 1, 5, 6}, "Resize",
           resize_attrs("nearest", "align_corners", "round_prefer_ceil", std::nullopt, Ints{1, 1, 9, 3}));
  c.add_op("Resize/nearest_ceil_downsample", {2, 1, 8, 6}, "Resize",
           resize_attrs("nearest", "half_pixel", "ceil", Scales{1, 1, 0.5, 0.5}, std::nullopt));
  // F.interpolate(size=..., mode="bilinear", align_corners=False).
  c.add_op("Resize/linear_pytorch_half_pixel", {1, 3, 4, 6}, "Resize",
           resize_attrs("linear", "pytorch_half_pixel", "", std::nullopt, Ints{1, 3, 9, 13}));
  c.add_op("Resize/linear_align_corners", {1, 2, 3, 5}, "Resize",
           resize_attrs("linear", "align_corners", "", Scales{1, 1, 2, 2}, std::nullopt));
  c.add_op("Resize/linear_half_pixel_downsample", {1, 2, 8, 8}, "Resize",
           resize_attrs("linear", "half_pixel", "", std::nullopt, Ints{1, 2, 3, 5}));
  c.add_op("Resize/linear_asymmetric_1d", {2, 4, 6}, "Resize",
           resize_attrs("linear", "asymmetric", "", Scales{1, 1, 2.5}, std::nullopt));
}

void trilu_cases(DataCases& c) {
  c.add_op("Trilu/upper_default", {3, 5}, "Trilu", {});
  c.add_op("Trilu/lower_negative_k_batched", {2, 3, 4, 4}, "Trilu",
           attrs({{"upper", std::int64_t{0}}, {"k", std::int64_t{-1}}}));
  c.add_op("Trilu/upper_k_past_the_matrix", {2, 4, 3}, "Trilu", attrs({{"k", std::int64_t{7}}}));
  c.add_op("Trilu/lower_huge_k_keeps_all", {5, 2}, "Trilu", attrs({{"upper", std::int64_t{0}}, {"k", kMaxInt}}));
}

// TensorScatter: the cache a graph input nothing else reads (written in
// place), and one another op also reads (the functional kernel, which must
// leave that reader the old cache).
void tensor_scatter_cases(DataCases& c) {
  struct Form {
    std::string name;
    Shape past, update;
    std::vector<std::int64_t> writes;  // empty: no write_indices input
    graph::Attributes attributes;
    bool past_read_again;
  };
  const std::vector<Form> forms = {
      {"TensorScatter/in_place_kv_cache", {2, 3, 8, 4}, {2, 3, 1, 4}, {5, 0}, {}, false},
      {"TensorScatter/in_place_prompt_rows_circular", {2, 2, 6, 3}, {2, 2, 4, 3}, {4, 1},
       attrs({{"mode", std::string("circular")}}), false},
      {"TensorScatter/in_place_axis1_no_indices", {1, 5, 6}, {1, 2, 6}, {}, attrs({{"axis", std::int64_t{1}}}), false},
      {"TensorScatter/functional_past_read_again", {2, 3, 8, 4}, {2, 3, 2, 4}, {6, 3}, {}, true},
      {"TensorScatter/functional_circular", {1, 2, 5, 2}, {1, 2, 3, 2}, {3}, attrs({{"mode", std::string("circular")}}), true},
  };
  for (const Form& form : forms) {
    Builder b(form.name);
    const V past = b.input("past", DType::f32, form.past);
    const V update = b.input("update", DType::f32, form.update);
    std::vector<std::optional<V>> inputs = {past, update};
    std::vector<Tensor> values = {seeded_tensor(c.seed++, form.past), seeded_tensor(c.seed++, form.update)};
    if (!form.writes.empty()) {
      inputs.push_back(b.input("write_indices", DType::i64, {static_cast<std::int64_t>(form.writes.size())}));
      values.push_back(Tensor::from_i64({static_cast<std::int64_t>(form.writes.size())}, form.writes));
    }
    Vs outputs = {b.op("TensorScatter", inputs, form.attributes)[0]};
    if (form.past_read_again) outputs.push_back(b.add(past, past));
    c.cases.push_back({form.name, b.build(outputs), std::move(values), 0.0f});
  }
}

}  // namespace

void add_data_cases(std::vector<OpCase>& cases) {
  DataCases c{cases};
  slice_cases(c);
  split_cases(c);
  gather_cases(c);
  view_cases(c);
  expand_tile_cases(c);
  pad_cases(c);
  resize_cases(c);
  trilu_cases(c);
  tensor_scatter_cases(c);
}

}  // namespace kiln::testing
