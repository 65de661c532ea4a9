#define BOOST_TEST_MODULE pack_matmul_weights
#include <boost/test/unit_test.hpp>

// The pack_matmul_weights compile pass and MatMul's packed layout (NK16n):
// which MatMuls it packs, the packed tensor itself, the reference reading
// either layout, and the packed GEMM lowering on Vulkan (compiled mode)
// against the reference, with fused epilogues.

#include <kiln/builder.h>
#include <kiln/kiln.h>

#include "test_backend.h"
#include "graph/ir.h"
#include "graph/op_registry.h"
#include "graph/passes/passes.h"
#include "tensor_checks.h"
#include "graph/weight_layouts.h"
#include "src/runtime/internal_access.h"

#include <algorithm>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using kiln::Builder;
using kiln::DType;
using kiln::Shape;
using kiln::Tensor;
namespace passes = kiln::graph::passes;

using tensor_checks::random_tensor;
using tensor_checks::relative_difference;

const kiln::graph::Node* find_node(const kiln::graph::Graph& g, const std::string& name) {
  for (const kiln::graph::Node& node : g.nodes())
    if (node.name == name) return &node;
  return nullptr;
}

bool mentions(const passes::PassReport& report, const std::string& text) {
  return std::any_of(report.details.begin(), report.details.end(),
                     [&](const std::string& line) { return line.find(text) != std::string::npos; });
}

// A Linear layer as exported: MatMul(x, W [K, N]) + bias, then `tail`.
struct LinearCase {
  std::string name;
  Shape x;  // [..., K]
  std::int64_t n;
  std::string tail;  // "", "gelu", "residual"
};

const LinearCase kCases[] = {
    {"tokens", {1, 197, 64}, 48, "gelu"},       // ViT-like: 197 rows, a ragged last row block
    {"batched", {2, 3, 7, 40}, 32, "residual"},  // leading dims fold into rows; K not a multiple of 4
    {"one_row", {1, 1, 33}, 16, ""},             // one row, one 16-column slab
    {"wide", {5, 24}, 160, ""},                  // 2-D A, ten slabs
};

kiln::Model linear_model(const LinearCase& c) {
  Builder b;
  auto x = b.input("x", DType::f32, c.x);
  const std::int64_t k = c.x.back();
  b.push_scope("linear");
  auto y = b.add(b.matmul(x, b.constant("weight", random_tensor({k, c.n}, 1))),
                 b.constant("bias", random_tensor({c.n}, 2)));
  b.pop_scope();
  if (c.tail == "gelu") y = b.gelu(y);
  if (c.tail == "residual") {
    Shape residual_shape = c.x;
    residual_shape.back() = c.n;
    y = b.add(y, b.input("residual", DType::f32, residual_shape));
  }
  return b.build({y});
}

std::vector<Tensor> random_inputs(const kiln::Model& model) {
  std::vector<Tensor> inputs;
  unsigned seed = 7;
  for (const auto& input : model.inputs()) inputs.push_back(random_tensor(input.shape, seed++));
  return inputs;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(pack_matmul_weights)

BOOST_AUTO_TEST_CASE(packs_constant_weights_in_16_column_slabs) {
  Builder b;
  auto x = b.input("x", DType::f32, {2, 5, 24});
  auto runtime_b = b.input("b", DType::f32, {24, 32});
  b.push_scope("packed");
  auto packed = b.matmul(x, b.constant("weight", random_tensor({24, 32}, 1)));
  b.pop_scope();
  b.push_scope("ragged");  // N = 20: not whole slabs
  auto ragged = b.matmul(x, b.constant("weight", random_tensor({24, 20}, 2)));
  b.pop_scope();
  b.push_scope("runtime");  // B is an input
  auto runtime = b.matmul(x, runtime_b);
  b.pop_scope();
  b.push_scope("vector");  // 1-D A
  auto vector = b.matmul(b.reshape(x, {-1}), b.constant("weight", random_tensor({240, 16}, 3)));
  b.pop_scope();
  const kiln::Model m = b.build({packed, ragged, runtime, vector});

  const passes::PassResult result = passes::pack_matmul_weights(kiln::internal::graph(m));
  BOOST_TEST(result.report.changes == 1);
  BOOST_TEST(mentions(result.report, "packed B of MatMul 'packed' as NK16n [2, 24, 16]"));
  const kiln::graph::Node* node = find_node(result.graph, "packed");
  BOOST_REQUIRE(node != nullptr);
  BOOST_TEST(node->attrs.get_string("weight_layout", "") == kiln::graph::kMatMulPackedLayout);
  for (const char* name : {"ragged", "runtime", "vector"})
    BOOST_TEST(!find_node(result.graph, name)->attrs.has("weight_layout"), name);

  // Column j of row q sits at lane j % 16 of slab j / 16, row q.
  const Tensor& plain = *kiln::internal::graph(m).value(find_node(kiln::internal::graph(m), "packed")->inputs[1]).constant;
  const Tensor& slabs = *result.graph.value(node->inputs[1]).constant;
  const auto from = plain.values<float>();
  const auto to = slabs.values<float>();
  for (std::int64_t q = 0; q < 24; ++q)
    for (std::int64_t j = 0; j < 32; ++j) BOOST_TEST(to[((j / 16) * 24 + q) * 16 + j % 16] == from[q * 32 + j]);

  // The reference reads either layout: the same outputs, bit for bit.
  std::vector<Tensor> inputs = {random_tensor({2, 5, 24}, 4), random_tensor({24, 32}, 5)};
  const std::vector<Tensor> before = kiln::graph::run_reference(kiln::internal::graph(m), inputs);
  const std::vector<Tensor> after = kiln::graph::run_reference(result.graph, inputs);
  for (std::size_t i = 0; i < before.size(); ++i) BOOST_TEST(relative_difference(after[i], before[i]) == 0.0);
  // Packing twice changes nothing.
  BOOST_TEST(passes::pack_matmul_weights(result.graph).report.changes == 0);
}

BOOST_AUTO_TEST_CASE(matmul_checks_the_packed_layout) {
  Builder b;
  auto x = b.input("x", DType::f32, {3, 8});
  kiln::graph::Attributes packed;
  packed.set("weight_layout", std::string(kiln::graph::kMatMulPackedLayout));
  auto expect = [](auto build, const std::string& text) {
    BOOST_CHECK_EXCEPTION(build(), kiln::Error, [&](const kiln::Error& e) {
      return std::string(e.what()).find(text) != std::string::npos;
    });
  };
  auto ok = b.op("MatMul", {x, b.constant("ok", random_tensor({2, 8, 16}, 1))}, packed)[0];
  BOOST_TEST(b.shape(ok) == Shape({3, 32}));
  expect([&] { b.op("MatMul", {x, b.constant("narrow", random_tensor({2, 8, 8}, 2))}, packed); },
         "must be [N / 16, K, 16]");
  expect([&] { b.op("MatMul", {x, b.constant("deep", random_tensor({2, 9, 16}, 3))}, packed); },
         "inner dimensions differ");
  kiln::graph::Attributes unknown;
  unknown.set("weight_layout", std::string("NK8n"));
  expect([&] { b.op("MatMul", {x, b.constant("plain", random_tensor({8, 16}, 4))}, unknown); }, "weight_layout");
}

BOOST_AUTO_TEST_CASE(compiled_linear_layers_match_the_reference) {
  for (const LinearCase& c : kCases) {
    BOOST_TEST_CONTEXT(c.name) {
      const kiln::Model model = linear_model(c);
      const std::vector<Tensor> inputs = random_inputs(model);
      const Tensor expected = kiln::graph::run_reference(kiln::internal::graph(model), inputs)[0];
      kiln::CompiledModel compiled = kiln::compile(model, {.backend = kiln::testing::test_backend()});
      const double diff = relative_difference(compiled(inputs)[0], expected);
      BOOST_TEST_MESSAGE(c.name << ": relative difference on Vulkan " << diff);
      BOOST_TEST(diff < 1e-5);
      // The bias and the tail fuse into the packed GEMM's epilogue.
      BOOST_TEST(compiled.stats().dispatches_per_run == 1);
      BOOST_TEST(compiled.explain().find("matmul_packed_") != std::string::npos);
    }
  }
}

// A linear layer as PyTorch stores it and transformers' builders lay it out:
// Gemm(x, W [N, K], bias, transB = 1), or GPT-2's Conv1D, Gemm(x, W [K, N],
// bias). Packed as a MatMul over W (transposed back)
// (its bias an Add that fuses back into the epilogue); Gemms with scaling,
// a transposed A, ragged N or a weight given at run time are left alone.
BOOST_AUTO_TEST_CASE(gemms_with_a_transposed_weight_pack_as_matmuls) {
  Builder b;
  auto x = b.input("x", DType::f32, {3, 24});
  auto runtime_w = b.input("w", DType::f32, {32, 24});
  b.push_scope("linear");
  auto linear = b.gemm(x, b.constant("weight", random_tensor({32, 24}, 1)), b.constant("bias", random_tensor({32}, 2)),
                       {.trans_b = true});
  b.pop_scope();
  b.push_scope("no_bias");
  auto no_bias = b.gemm(x, b.constant("weight", random_tensor({16, 24}, 3)), std::nullopt, {.trans_b = true});
  b.pop_scope();
  b.push_scope("conv1d");  // GPT-2's Conv1D: W [K, N]
  auto conv1d = b.gemm(x, b.constant("weight", random_tensor({24, 16}, 8)), b.constant("bias", random_tensor({16}, 9)));
  b.pop_scope();
  b.push_scope("scaled");
  auto scaled = b.gemm(x, b.constant("weight", random_tensor({16, 24}, 4)), std::nullopt, {.trans_b = true, .alpha = 0.5f});
  b.pop_scope();
  b.push_scope("ragged");
  auto ragged = b.gemm(x, b.constant("weight", random_tensor({20, 24}, 5)), std::nullopt, {.trans_b = true});
  b.pop_scope();
  b.push_scope("runtime");
  auto runtime = b.gemm(x, runtime_w, std::nullopt, {.trans_b = true});
  b.pop_scope();
  const kiln::Model m = b.build({linear, no_bias, conv1d, scaled, ragged, runtime});

  const passes::PassResult result = passes::pack_matmul_weights(kiln::internal::graph(m));
  BOOST_TEST(result.report.changes == 3);
  BOOST_TEST(mentions(result.report, "Gemm 'conv1d' as a MatMul with B packed as NK16n [1, 24, 16], its bias an Add"));
  BOOST_TEST(mentions(result.report, "Gemm 'linear' (B transposed) as a MatMul with B packed as NK16n [2, 24, 16], its bias an Add"));
  BOOST_TEST(mentions(result.report, "Gemm 'no_bias' (B transposed) as a MatMul with B packed as NK16n [1, 24, 16]"));
  // Column j of the product (row j of W) sits at lane j % 16 of slab j / 16.
  const kiln::graph::Node* node = find_node(result.graph, "linear_matmul");
  BOOST_REQUIRE(node != nullptr);
  BOOST_TEST(node->op == "MatMul");
  const Tensor& plain = *kiln::internal::graph(m).value(find_node(kiln::internal::graph(m), "linear")->inputs[1]).constant;
  const auto from = plain.values<float>();
  const auto to = result.graph.value(node->inputs[1]).constant->values<float>();
  for (std::int64_t q = 0; q < 24; ++q)
    for (std::int64_t j = 0; j < 32; ++j) BOOST_TEST(to[((j / 16) * 24 + q) * 16 + j % 16] == from[j * 24 + q]);
  for (const char* name : {"scaled", "ragged", "runtime"}) BOOST_TEST(find_node(result.graph, name)->op == "Gemm", name);

  std::vector<Tensor> inputs = {random_tensor({3, 24}, 6), random_tensor({32, 24}, 7)};
  const std::vector<Tensor> before = kiln::graph::run_reference(kiln::internal::graph(m), inputs);
  const std::vector<Tensor> after = kiln::graph::run_reference(result.graph, inputs);
  for (std::size_t i = 0; i < before.size(); ++i) BOOST_TEST(relative_difference(after[i], before[i]) < 1e-6);
  // Compiled on Vulkan: the packed kernel, the bias fused into it.
  kiln::CompiledModel compiled = kiln::compile(m, {.backend = kiln::testing::test_backend()});
  const std::vector<Tensor> got = compiled(inputs);
  for (std::size_t i = 0; i < before.size(); ++i) BOOST_TEST(relative_difference(got[i], before[i]) < 1e-5);
  BOOST_TEST(compiled.explain().find("matmul_packed_") != std::string::npos);
}

// A language model's head tied to its embedding table: the table is packed
// once and the Gather reads its rows from the packed copy (one copy on the
// device, negative indices counting from the end); a small table is held
// twice, and a weight something else reads too is left as it is.
BOOST_AUTO_TEST_CASE(a_tied_table_is_packed_once_and_its_gather_reads_the_packed_rows) {
  Builder b;
  auto ids = b.input("ids", DType::i64, {2, 3});
  auto small_ids = b.input("small_ids", DType::i64, {4});
  const Tensor table = random_tensor({1024, 1024}, 11);  // 4 MiB: read through the packed copy
  auto weight = b.constant("table", table);
  b.push_scope("embed");
  auto embedded = b.op("Gather", {weight, ids}, {})[0];
  b.pop_scope();
  b.push_scope("head");
  auto logits = b.gemm(b.reshape(embedded, {6, 1024}), weight, std::nullopt, {.trans_b = true});
  b.pop_scope();
  auto small = b.constant("small", random_tensor({64, 32}, 12));
  b.push_scope("small_embed");
  auto small_rows = b.op("Gather", {small, small_ids}, {})[0];
  b.pop_scope();
  b.push_scope("small_head");
  auto small_logits = b.gemm(small_rows, small, std::nullopt, {.trans_b = true});
  b.pop_scope();
  auto other = b.constant("other", random_tensor({16, 32}, 13));
  b.push_scope("other_head");
  auto other_logits = b.gemm(small_rows, other, std::nullopt, {.trans_b = true});
  b.pop_scope();
  auto other_sum = b.add(other, other);
  // Two products of one weight share one packed copy.
  auto twice = b.constant("twice", random_tensor({32, 32}, 14));
  b.push_scope("first");
  auto first = b.gemm(small_rows, twice, std::nullopt, {.trans_b = true});
  b.pop_scope();
  b.push_scope("second");
  auto second = b.gemm(first, twice, std::nullopt, {.trans_b = true});
  b.pop_scope();
  const kiln::Model m = b.build({embedded, logits, small_logits, other_logits, other_sum, second});

  const passes::PassResult result = passes::pack_matmul_weights(kiln::internal::graph(m));
  BOOST_TEST(mentions(result.report, "Gather 'embed' reads the rows of 'table' from the head's packed copy"));
  BOOST_TEST(mentions(result.report, "Gemm 'head.gemm' (B transposed) as a MatMul with B packed as NK16n [64, 1024, 16]"));
  BOOST_TEST(mentions(result.report, "Gemm 'small_head' (B transposed) as a MatMul"));
  BOOST_TEST(mentions(result.report, "Gemm 'other_head': B 'other' left as it is, as other nodes read it too"));
  // The table itself is gone; the small one stays for its Gather beside its packed copy.
  std::size_t table_bytes = 0;
  for (const kiln::graph::Value& v : result.graph.values())
    if (v.constant && v.constant->nbytes() >= table.nbytes()) table_bytes += v.constant->nbytes();
  BOOST_TEST(table_bytes == table.nbytes());
  BOOST_TEST(find_node(result.graph, "small_embed")->op == "Gather");
  BOOST_TEST(find_node(result.graph, "first")->inputs[1] == find_node(result.graph, "second")->inputs[1]);
  BOOST_TEST(find_node(result.graph, "second")->op == "MatMul");

  const std::vector<Tensor> inputs = {Tensor::from_i64({2, 3}, {0, 17, 1023, -1, 512, -1024}),
                                      Tensor::from_i64({4}, {0, 63, -2, 5})};
  const std::vector<Tensor> before = kiln::graph::run_reference(kiln::internal::graph(m), inputs);
  const std::vector<Tensor> after = kiln::graph::run_reference(result.graph, inputs);
  BOOST_TEST(relative_difference(after[0], before[0]) == 0.0);  // rows, exactly
  for (std::size_t i = 1; i < before.size(); ++i) BOOST_TEST(relative_difference(after[i], before[i]) < 1e-6);
  // Compiled (packed on a CPU device): the same, with the table held once.
  kiln::CompiledModel compiled = kiln::compile(m, {.backend = kiln::testing::test_backend()});
  const std::vector<Tensor> got = compiled(inputs);
  BOOST_TEST(relative_difference(got[0], before[0]) == 0.0);
  for (std::size_t i = 1; i < before.size(); ++i) BOOST_TEST(relative_difference(got[i], before[i]) < 1e-5);
  BOOST_TEST(compiled.stats().peak_device_bytes < table.nbytes() * 3 / 2);
}

BOOST_AUTO_TEST_CASE(switch_turns_the_pass_off) {
  const kiln::Model model = linear_model(kCases[0]);
  const passes::PipelineResult off = passes::run_compile_passes(
      kiln::internal::graph(model), {.cpu_device = true, .settings = kiln::Settings().with("pack_matmul_weights", "off")});
  BOOST_TEST(off.reports.back().changes == 0);
  BOOST_TEST(mentions(off.reports.back(), "off: setting pack_matmul_weights=off"));
  // "on" packs for a GPU too.
  const passes::PipelineResult on =
      passes::run_compile_passes(kiln::internal::graph(model), {.settings = kiln::Settings().with("pack_matmul_weights", "on")});
  BOOST_TEST(on.reports.back().changes == 1);
}

BOOST_AUTO_TEST_CASE(pipeline_packs_last_for_cpu_devices_only) {
  const kiln::Model model = linear_model(kCases[0]);
  const passes::PipelineResult cpu = passes::run_compile_passes(kiln::internal::graph(model), {.cpu_device = true});
  BOOST_REQUIRE(!cpu.reports.empty());
  BOOST_TEST(cpu.reports.back().pass == "pack_matmul_weights");
  BOOST_TEST(cpu.reports.back().changes == 1);
  // A GPU keeps row-major B (its GEMMs stage B's tiles in shared memory) and is told why.
  const passes::PipelineResult gpu = passes::run_compile_passes(kiln::internal::graph(model));
  BOOST_TEST(gpu.reports.back().pass == "pack_matmul_weights");
  BOOST_TEST(gpu.reports.back().changes == 0);
  BOOST_TEST(mentions(gpu.reports.back(), "CPU devices"));
  for (const auto& node : gpu.graph.nodes()) BOOST_TEST(!node.attrs.has("weight_layout"));
}

BOOST_AUTO_TEST_SUITE_END()
