#define BOOST_TEST_MODULE runtime
#include <boost/test/unit_test.hpp>

#include <kiln/kiln.h>

#include "backends/registry.h"
#include "graph/ir.h"
#include "graph/op_registry.h"
#include "src/base/atomic_write.h"
#include "src/base/printable.h"
#include "src/compile/memory_plan.h"
#include "src/runtime/device_profile.h"
#include "src/runtime/executor.h"
#include "src/runtime/internal_access.h"
#include "test_backend.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>

#include <unistd.h>

namespace fs = std::filesystem;
using kiln::ErrorKind;

namespace {

kiln::Model small_resnet() {
  return kiln::models::resnet18({.batch = 1, .image_size = 32, .num_classes = 10, .seed = 7});
}

kiln::Tensor random_input(const kiln::Shape& shape, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  kiln::Tensor t(kiln::DType::f32, shape);
  for (float& v : t.values<float>()) v = dist(rng);
  return t;
}

template <class Fn> kiln::Error expect_error(Fn&& fn) {
  try {
    fn();
  } catch (const kiln::Error& e) {
    return e;
  }
  BOOST_FAIL("expected a kiln::Error");
  throw std::logic_error("unreachable");
}

fs::path fresh_dir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("kiln-test-" + name + "-" + std::to_string(std::random_device{}()));
  fs::remove_all(dir);
  return dir;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

BOOST_AUTO_TEST_CASE(bytes_from_files_print_escaped) {
  using kiln::base::printable;
  BOOST_TEST(printable("plain text, 100% ASCII ~") == "plain text, 100% ASCII ~");
  // Terminal controls: ESC, BEL, newline, DEL.
  BOOST_TEST(printable("\x1b[2J\a\n\x7f") == "\\x1b[2J\\x07\\x0a\\x7f");
  // Valid UTF-8 stays; C1 controls (U+009B, the one-byte CSI) and bytes that
  // are not UTF-8 (a lone continuation, an overlong '/', a surrogate, a cut
  // sequence) do not.
  BOOST_TEST(printable("\xce\xb5\xce\xb9\xce\xba\xcf\x8c\xce\xbd\xce\xb1.png") == "\xce\xb5\xce\xb9\xce\xba\xcf\x8c\xce\xbd\xce\xb1.png");
  BOOST_TEST(printable("\xf0\x9f\x94\xa5") == "\xf0\x9f\x94\xa5");
  BOOST_TEST(printable("\xc2\x9b") == "\\xc2\\x9b");
  BOOST_TEST(printable("\x80") == "\\x80");
  BOOST_TEST(printable("\xc0\xaf") == "\\xc0\\xaf");
  BOOST_TEST(printable("\xed\xa0\x80") == "\\xed\\xa0\\x80");
  BOOST_TEST(printable("ab\xe2\x82") == "ab\\xe2\\x82");
  BOOST_TEST(printable(std::string_view("a\0b", 3)) == "a\\x00b");
}

BOOST_AUTO_TEST_SUITE(files_written_whole)

// src/base/atomic_write.h, which every file kiln writes goes through.
BOOST_AUTO_TEST_CASE(a_file_is_replaced_whole_and_nothing_but_a_file_is_replaced) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("kiln-atomic-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  const fs::path file = dir / "out.txt";
  kiln::base::write_file_atomically(file, "first");
  kiln::base::write_file_atomically(file, [](std::ostream& out) { out << "second, longer"; });
  std::ifstream in(file);
  BOOST_TEST(std::string(std::istreambuf_iterator<char>(in), {}) == "second, longer");
  BOOST_TEST(kiln::base::try_write_file_atomically(file, "third").empty());

  // A device, a directory or a missing folder is refused, named, and left as it was.
  auto refused = [](const auto& write, const std::string& text) {
    try {
      write();
      BOOST_ERROR("no error; expected one mentioning '" << text << "'");
    } catch (const kiln::Error& e) {
      BOOST_TEST((e.kind() == kiln::ErrorKind::Io));
      BOOST_TEST(std::string(e.what()).find(text) != std::string::npos, e.what());
    }
  };
  refused([] { kiln::base::write_file_atomically("/dev/null", "x"); },
          "cannot write '/dev/null': it is a character device");
  BOOST_TEST(fs::is_character_file("/dev/null"));
  refused([&] { kiln::base::write_file_atomically(dir, [](std::ostream& out) { out << "x"; }); }, "a directory");
  BOOST_TEST(fs::is_directory(dir));
  BOOST_TEST(kiln::base::try_write_file_atomically("/dev/null", "x").find("character device") != std::string::npos);
  refused([&] { kiln::base::write_file_atomically(dir / "no-such-folder" / "x", "x"); }, "no-such-folder");
  std::vector<std::string> left;
  for (const auto& entry : fs::directory_iterator(dir)) left.push_back(entry.path().filename().string());
  BOOST_TEST(left == std::vector<std::string>{"out.txt"}, "no temporary file left behind");
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(memory_plan)

BOOST_AUTO_TEST_CASE(disjoint_lifetimes_share_and_overlapping_do_not) {
  using kiln::compiler::Lifetime;
  std::vector<Lifetime> t = {{1000, 0, 1}, {1000, 1, 2}, {1000, 2, 3}, {500, 3, 4}};
  auto plan = kiln::compiler::plan_memory(t, 256);
  kiln::compiler::check_memory_plan(t, plan, 256);
  // A chain needs only two live buffers at a time.
  BOOST_TEST(plan.arena_bytes <= 2048u);
  BOOST_TEST(plan.unshared_bytes == 1024u * 3 + 512u);
}

BOOST_AUTO_TEST_CASE(random_plans_never_overlap_live_tensors) {
  using kiln::compiler::Lifetime;
  std::mt19937 rng(3);
  for (int round = 0; round < 200; ++round) {
    std::vector<Lifetime> t;
    const int n = 1 + static_cast<int>(rng() % 40);
    for (int i = 0; i < n; ++i) {
      int first = static_cast<int>(rng() % 30);
      t.push_back({1 + rng() % 5000, first, first + static_cast<int>(rng() % 6)});
    }
    auto plan = kiln::compiler::plan_memory(t, 64);
    BOOST_REQUIRE_NO_THROW(kiln::compiler::check_memory_plan(t, plan, 64));
    BOOST_TEST(plan.arena_bytes <= plan.unshared_bytes);
  }
}

BOOST_AUTO_TEST_CASE(arenas_respect_the_largest_buffer) {
  using kiln::compiler::Lifetime;
  std::mt19937 rng(11);
  std::vector<Lifetime> t;
  for (int i = 0; i < 60; ++i) {
    int first = static_cast<int>(rng() % 20);
    t.push_back({1 + rng() % 1000, first, first + static_cast<int>(rng() % 8)});
  }
  auto plan = kiln::compiler::plan_memory(t, 64, 2048);
  kiln::compiler::check_memory_plan(t, plan, 64);
  BOOST_TEST(plan.arena_sizes.size() > 1u);
  for (auto size : plan.arena_sizes) BOOST_TEST(size <= 2048u);
  auto e = expect_error([&] { kiln::compiler::plan_memory({{5000, 0, 1}}, 64, 2048); });
  BOOST_TEST(e.kind() == ErrorKind::OutOfMemory);
}

BOOST_AUTO_TEST_CASE(large_batch_splits_activations_across_buffers) {
  // At batch 36 and 224x224 ResNet-18's activations exceed lavapipe's 128 MiB
  // storage-buffer limit: the plan must spread them over several buffers.
  auto model = kiln::models::resnet18({.batch = 36, .image_size = 224});
  auto compiled = kiln::compile(model, {.backend = kiln::testing::test_backend()});
  compiled.prepare();
  const auto& plan = kiln::internal::engine(compiled).memory_plan();
  kiln::compiler::check_memory_plan(kiln::internal::engine(compiled).lifetimes(), plan, 16);
  BOOST_TEST_MESSAGE("arenas: " << plan.arena_sizes.size() << ", total " << plan.arena_bytes);
  const std::uint64_t max_buffer =
      kiln::backend::get_backend(kiln::testing::test_backend()).enumerate_devices().at(0).target.max_buffer_bytes;
  for (auto size : plan.arena_sizes) BOOST_TEST(size <= max_buffer);
  if (max_buffer <= (128u << 20)) {  // lavapipe and many mobile GPUs
    BOOST_TEST(plan.arena_bytes > max_buffer);
    BOOST_TEST(plan.arena_sizes.size() > 1u);
  }
}

BOOST_AUTO_TEST_CASE(checker_catches_overlap) {
  using kiln::compiler::Lifetime;
  std::vector<Lifetime> t = {{100, 0, 2}, {100, 1, 3}};
  kiln::compiler::MemoryPlan bad;
  bad.offsets = {0, 0};
  bad.arena = {0, 0};
  bad.arena_sizes = {256};
  bad.arena_bytes = 256;
  auto e = expect_error([&] { kiln::compiler::check_memory_plan(t, bad, 64); });
  BOOST_TEST(contains(e.what(), "share memory"));
}

// The planner's definition, looking at every placed tensor for each new one
// (quadratic): best fit among the gaps between tensors live at the same time,
// largest tensors first. plan_memory looks only at tensors live nearby.
std::vector<std::uint64_t> exhaustive_greedy_offsets(const std::vector<kiln::compiler::Lifetime>& t,
                                                     std::uint64_t alignment) {
  auto padded = [&](std::size_t i) { return (std::max<std::uint64_t>(t[i].bytes, 1) + alignment - 1) / alignment * alignment; };
  std::vector<std::size_t> order(t.size());
  for (std::size_t i = 0; i < t.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    return t[a].bytes != t[b].bytes ? t[a].bytes > t[b].bytes : t[a].first < t[b].first;
  });
  std::vector<std::uint64_t> offsets(t.size(), 0);
  std::vector<std::size_t> placed;
  for (std::size_t i : order) {
    std::vector<std::size_t> live;
    for (std::size_t p : placed)
      if (t[p].first <= t[i].last && t[i].first <= t[p].last) live.push_back(p);
    std::stable_sort(live.begin(), live.end(), [&](std::size_t a, std::size_t b) { return offsets[a] < offsets[b]; });
    std::uint64_t cursor = 0, best_gap = UINT64_MAX, best = 0;
    bool found = false;
    for (std::size_t p : live) {
      if (offsets[p] >= cursor + padded(i) && offsets[p] - cursor < best_gap) {
        best_gap = offsets[p] - cursor;
        best = cursor;
        found = true;
      }
      cursor = std::max(cursor, offsets[p] + padded(p));
    }
    offsets[i] = found ? best : cursor;
    placed.push_back(i);
  }
  return offsets;
}

BOOST_AUTO_TEST_CASE(plans_as_the_exhaustive_greedy_scan_does) {
  using kiln::compiler::Lifetime;
  std::mt19937 rng(5);
  for (int round = 0; round < 100; ++round) {
    // Short lifetimes and a few that span many steps (a skip connection, an output).
    std::vector<Lifetime> t;
    const int n = 1 + static_cast<int>(rng() % 200);
    for (int i = 0; i < n; ++i) {
      const int first = static_cast<int>(rng() % 300);
      const int length = rng() % 10 == 0 ? static_cast<int>(rng() % 200) : static_cast<int>(rng() % 4);
      t.push_back({1 + rng() % (rng() % 2 ? 64 : 5000), first, first + length});
    }
    const auto plan = kiln::compiler::plan_memory(t, 64);
    BOOST_REQUIRE_NO_THROW(kiln::compiler::check_memory_plan(t, plan, 64));
    BOOST_TEST(plan.offsets == exhaustive_greedy_offsets(t, 64), "round " << round);
  }
}

BOOST_AUTO_TEST_CASE(checker_catches_overlap_of_distant_steps) {
  using kiln::compiler::Lifetime;
  // Lifetimes that meet only late: the second starts many steps after the first.
  std::vector<Lifetime> t = {{100, 0, 500}, {100, 40, 41}, {100, 480, 490}};
  kiln::compiler::MemoryPlan bad;
  bad.offsets = {0, 128, 0};
  bad.arena = {0, 0, 0};
  bad.arena_sizes = {256};
  bad.arena_bytes = 256;
  auto e = expect_error([&] { kiln::compiler::check_memory_plan(t, bad, 64); });
  BOOST_TEST(contains(e.what(), "live tensors 0 and 2 share memory"));
}

BOOST_AUTO_TEST_CASE(compiled_resnet_plan_reuses_memory_safely) {
  auto model = small_resnet();
  auto compiled = kiln::compile(model, {.backend = kiln::testing::test_backend()});
  compiled.prepare();
  const kiln::Executor& engine = kiln::internal::engine(compiled);
  kiln::compiler::check_memory_plan(engine.lifetimes(), engine.memory_plan(), 16);
  BOOST_TEST(engine.memory_plan().arena_bytes < engine.memory_plan().unshared_bytes / 2);
  BOOST_TEST(compiled.stats().peak_device_bytes > 0u);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(modes)

BOOST_AUTO_TEST_CASE(eager_default_and_reduce_overhead_agree_with_reference) {
  auto model = small_resnet();
  auto input = random_input({1, 3, 32, 32}, 1);
  auto want = kiln::graph::run_reference(kiln::internal::graph(model), std::vector<kiln::Tensor>{input});
  auto e = kiln::eager(model, {.backend = kiln::testing::test_backend()});
  auto d = kiln::compile(model, {.backend = kiln::testing::test_backend(), .mode = kiln::Mode::default_});
  auto r = kiln::compile(model, {.backend = kiln::testing::test_backend(), .mode = kiln::Mode::reduce_overhead});
  for (int call = 0; call < 3; ++call) {
    auto x = random_input({1, 3, 32, 32}, 10 + call);
    auto ref = kiln::graph::run_reference(kiln::internal::graph(model), std::vector<kiln::Tensor>{x});
    const float scale = 1.0f + std::fabs(ref[0].values<float>()[0]);
    BOOST_TEST(kiln::max_abs_diff(e({x})[0], ref[0]) <= 1e-3f * scale);
    BOOST_TEST(kiln::max_abs_diff(d({x})[0], ref[0]) <= 1e-3f * scale);
    BOOST_TEST(kiln::max_abs_diff(r({x})[0], ref[0]) <= 1e-3f * scale);
  }
  // Compiling removed the batch norms and fused activations: fewer dispatches.
  BOOST_TEST(d.stats().dispatches_per_run < e.stats().dispatches_per_run);
  BOOST_TEST(r.stats().dispatches_per_run == d.stats().dispatches_per_run);
}

BOOST_AUTO_TEST_CASE(max_autotune_with_records_only_matches_default) {
  // No records and no budget: the heuristic's kernels, and explain says why.
  const kiln::Model model = small_resnet();
  kiln::CompiledModel tuned = kiln::compile(model, {.backend = kiln::testing::test_backend(), .mode = kiln::Mode::max_autotune,
                                                    .cache_dir = "off", .settings = {{"tune_budget", "0"}}});
  kiln::CompiledModel plain = kiln::compile(model, {.backend = kiln::testing::test_backend()});
  const std::vector<kiln::Tensor> inputs = {kiln::Tensor(kiln::DType::f32, model.inputs()[0].shape)};
  BOOST_TEST(kiln::max_abs_diff(tuned(inputs)[0], plain(inputs)[0]) == 0.0f);
  BOOST_TEST(contains(tuned.explain(), "autotune:"));
  BOOST_TEST(contains(tuned.explain(), "heuristic (no record"));
}

BOOST_AUTO_TEST_CASE(mode_names_round_trip) {
  for (auto m : {kiln::Mode::default_, kiln::Mode::reduce_overhead, kiln::Mode::max_autotune})
    BOOST_TEST((kiln::parse_mode(kiln::mode_name(m)) == m));
  BOOST_TEST(expect_error([] { kiln::parse_mode("turbo"); }).kind() == ErrorKind::InvalidArgument);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(errors)

BOOST_AUTO_TEST_CASE(wrong_input_shape_names_input_and_both_shapes) {
  auto compiled = kiln::compile(small_resnet(), {.backend = kiln::testing::test_backend()});
  auto e = expect_error([&] { compiled({random_input({1, 3, 16, 16}, 1)}); });
  BOOST_TEST(e.kind() == ErrorKind::ShapeMismatch);
  BOOST_TEST(contains(e.what(), "'input'"));
  BOOST_TEST(contains(e.what(), "[1, 3, 32, 32]"));
  BOOST_TEST(contains(e.what(), "[1, 3, 16, 16]"));
  auto e2 = expect_error([&] { compiled({}); });
  BOOST_TEST(contains(e2.what(), "takes 1 input"));
}

BOOST_AUTO_TEST_CASE(unknown_backend_and_device) {
  auto e = expect_error([] { kiln::compile(small_resnet(), {.backend = "metal"}); });
  BOOST_TEST(e.kind() == ErrorKind::NotFound);
  BOOST_TEST(contains(e.what(), "metal"));
  BOOST_TEST(contains(e.what(), "vulkan"));
  auto d = expect_error([] { kiln::compile(small_resnet(), {.backend = kiln::testing::test_backend(), .device = "7"}); });
  BOOST_TEST(d.kind() == ErrorKind::NotFound);
  // An index past int's range is no device, not an internal error.
  auto big = expect_error([] { kiln::compile(small_resnet(), {.backend = kiln::testing::test_backend(), .device = "99999999999999999999"}); });
  BOOST_TEST(big.kind() == ErrorKind::NotFound);
  BOOST_TEST(contains(big.what(), "99999999999999999999"));
  auto n = expect_error([] { kiln::compile(small_resnet(), {.backend = kiln::testing::test_backend(), .device = "no-such-gpu"}); });
  BOOST_TEST(contains(n.what(), "no-such-gpu"));
  BOOST_TEST(n.is_user_error());
}

BOOST_AUTO_TEST_CASE(device_by_name_substring) {
  std::vector<kiln::DeviceDescription> devices;
  for (const kiln::BackendDescription& b : kiln::list_backends())
    if (b.name == kiln::testing::test_backend()) devices = b.devices;
  BOOST_REQUIRE(!devices.empty());
  std::string part = devices[0].name.substr(0, 4);
  auto m = kiln::compile(small_resnet(), {.backend = kiln::testing::test_backend(), .device = part});
  BOOST_CHECK_NO_THROW(m.prepare());
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(runtime_indices)

// A kernel cannot raise: an index outside [-extent, extent) poisons its row
// with NaN instead of reading past the table (the reference raises).
BOOST_AUTO_TEST_CASE(an_out_of_range_index_gives_nan_rows_on_the_device) {
  kiln::Builder b("embedding");
  auto table = b.input("table", kiln::DType::f32, {4, 3});
  auto ids = b.input("ids", kiln::DType::i64, {3});
  kiln::Attributes axis;
  axis.set("axis", std::int64_t{0});
  auto model = b.build({b.op("Gather", {table, ids}, axis)[0]});
  auto m = kiln::compile(model, {.backend = kiln::testing::test_backend(), .fullgraph = true});
  const auto x = random_input({4, 3}, 11);
  const kiln::Tensor result = m({x, kiln::Tensor::from_i64({3}, {-1, 9, 2})})[0];
  const auto out = result.values<float>();
  for (int c = 0; c < 3; ++c) {
    BOOST_TEST(out[c] == x.values<float>()[9 + c]);  // -1: the last row
    BOOST_TEST(std::isnan(out[3 + c]));
    BOOST_TEST(out[6 + c] == x.values<float>()[6 + c]);
  }
  BOOST_TEST(m.stats().host_steps_per_run == 0);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(graph_breaks)

// An op on i64 tensors has no kernel: a graph break.
kiln::Model model_with_break() {
  kiln::Builder b("with_break");
  auto x = b.input("x", kiln::DType::f32, {2, 3});
  auto i = b.input("i", kiln::DType::i64, {2, 3});
  auto y = b.relu(x);
  auto j = b.op("Neg", {i}, {})[0];  // integer Neg has no kernel: a host step
  auto z = b.mul(y, y);
  return b.build({z, j});
}

BOOST_AUTO_TEST_CASE(fullgraph_lists_every_break) {
  auto m = kiln::compile(model_with_break(), {.backend = kiln::testing::test_backend(), .fullgraph = true});
  auto e = expect_error([&] { m.prepare(); });
  BOOST_TEST(e.kind() == ErrorKind::Unsupported);
  BOOST_TEST(contains(e.what(), "graph break"));
  BOOST_TEST(contains(e.what(), "Neg"));
}

BOOST_AUTO_TEST_CASE(breaks_run_on_the_host_without_fullgraph) {
  auto model = model_with_break();
  auto x = random_input({2, 3}, 5);
  auto i = kiln::Tensor::from_i64({2, 3}, {1, 2, 3, -4, 5, 600});
  auto m = kiln::compile(model, {.backend = kiln::testing::test_backend()});
  auto out = m({x, i});
  auto want = kiln::graph::run_reference(kiln::internal::graph(model), std::vector<kiln::Tensor>{x, i});
  BOOST_TEST(kiln::max_abs_diff(out[0], want[0]) <= 1e-6f);
  auto got_i = out[1].values<std::int64_t>();
  auto want_i = want[1].values<std::int64_t>();
  BOOST_TEST(std::vector<std::int64_t>(got_i.begin(), got_i.end()) ==
             std::vector<std::int64_t>(want_i.begin(), want_i.end()), boost::test_tools::per_element());
  BOOST_TEST(contains(m.explain(), "[host]"));
}

BOOST_AUTO_TEST_CASE(profile_times_every_dispatch_and_leaves_calls_intact) {
  auto model = small_resnet();
  auto x = random_input({1, 3, 32, 32}, 3);
  auto d = kiln::compile(model, {.backend = kiln::testing::test_backend()});
  const kiln::Tensor before = d({x})[0];
  const auto timings = d.profile({x}, 3);
  const auto dispatches = kiln::internal::engine(d).dispatches();
  BOOST_REQUIRE(timings.size() == dispatches.size());
  for (std::size_t i = 0; i < timings.size(); ++i) {
    BOOST_TEST(timings[i].kernel == dispatches[i].kernel_name);
    BOOST_TEST(timings[i].nodes.size() == dispatches[i].nodes.size());
    BOOST_TEST(timings[i].ms > 0.0);
    BOOST_TEST(timings[i].output.starts_with("f32["));
  }
  // The last dispatch is the classifier: it writes the logits.
  BOOST_TEST(timings.back().output == "f32[1, 10]");
  BOOST_TEST(kiln::max_abs_diff(d({x})[0], before) == 0.0f);

  // Eager: one timing per op node, no fusion.
  auto e = kiln::eager(model, {.backend = kiln::testing::test_backend()});
  e({x});
  const auto eager_timings = e.profile({x}, 1);
  BOOST_TEST(static_cast<int>(eager_timings.size()) == e.stats().dispatches_per_run);
  BOOST_TEST(eager_timings.size() > timings.size());
  for (const auto& t : eager_timings) BOOST_TEST(t.nodes.size() == 1u);

  auto bad = expect_error([&] { d.profile({x}, 0); });
  BOOST_TEST(bad.kind() == ErrorKind::InvalidArgument);
  auto wrong = expect_error([&] { d.profile({random_input({1, 3, 16, 16}, 4)}, 1); });
  BOOST_TEST(wrong.kind() == ErrorKind::ShapeMismatch);
}

BOOST_AUTO_TEST_CASE(profile_runs_graph_breaks_on_the_host) {
  auto m = kiln::compile(model_with_break(), {.backend = kiln::testing::test_backend()});
  auto x = random_input({2, 3}, 5);
  auto i = kiln::Tensor::from_i64({2, 3}, {1, 2, 3, -4, 5, 600});
  const auto timings = m.profile({x, i}, 2);
  BOOST_TEST(static_cast<int>(timings.size()) == m.stats().dispatches_per_run);
  BOOST_TEST(m.stats().host_steps_per_run > 0);
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(kernel_disk_cache)

BOOST_AUTO_TEST_CASE(second_process_starts_warm_and_corrupt_entries_recompile) {
  const fs::path dir = fresh_dir("cache");
  auto model = small_resnet();
  auto x = random_input({1, 3, 32, 32}, 2);
  std::vector<kiln::Tensor> first;
  int kernels = 0;
  {
    auto m = kiln::compile(model, {.backend = kiln::testing::test_backend(), .cache_dir = dir.string()});
    first = m({x});
    kernels = m.stats().kernels;
    BOOST_TEST(m.stats().kernel_cache_misses == kernels);
    BOOST_TEST(m.stats().kernel_cache_hits == 0);
  }
  {
    // A new device context (the old one was released) reads every kernel from disk.
    auto m = kiln::compile(model, {.backend = kiln::testing::test_backend(), .cache_dir = dir.string()});
    auto again = m({x});
    BOOST_TEST(m.stats().kernel_cache_hits == kernels);
    BOOST_TEST(m.stats().kernel_cache_misses == 0);
    BOOST_TEST(kiln::max_abs_diff(again[0], first[0]) == 0.0f);
  }
  // Corrupt every kernel entry: truncate some, flip bytes in others.
  int corrupted = 0;
  for (const auto& entry : fs::recursive_directory_iterator(dir / "kernels")) {
    if (!entry.is_regular_file()) continue;
    if (corrupted % 2 == 0) {
      fs::resize_file(entry.path(), fs::file_size(entry.path()) / 2);
    } else {
      std::fstream f(entry.path(), std::ios::in | std::ios::out | std::ios::binary);
      f.seekg(40);
      const char byte = static_cast<char>(f.get());
      f.seekp(40);
      f.put(static_cast<char>(~byte));
    }
    ++corrupted;
  }
  BOOST_TEST(corrupted == kernels);
  {
    auto m = kiln::compile(model, {.backend = kiln::testing::test_backend(), .cache_dir = dir.string()});
    auto again = m({x});
    BOOST_TEST(m.stats().kernel_cache_misses == kernels);
    BOOST_TEST(kiln::max_abs_diff(again[0], first[0]) == 0.0f);
  }
  // No temporary files are left behind.
  for (const auto& entry : fs::recursive_directory_iterator(dir))
    BOOST_TEST(!contains(entry.path().filename().string(), ".tmp"));
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(entries_swapped_between_kernels_are_recompiled_not_run) {
  // Each entry is valid on its own; in another kernel's place it once ran as
  // that kernel and the model returned garbage with no error.
  const fs::path dir = fresh_dir("cache-swap");
  auto model = small_resnet();
  auto x = random_input({1, 3, 32, 32}, 3);
  std::vector<kiln::Tensor> first;
  int kernels = 0;
  {
    auto m = kiln::compile(model, {.backend = kiln::testing::test_backend(), .cache_dir = dir.string()});
    first = m({x});
    kernels = m.stats().kernels;
  }
  std::vector<fs::path> entries;
  for (const auto& entry : fs::recursive_directory_iterator(dir / "kernels"))
    if (entry.is_regular_file()) entries.push_back(entry.path());
  std::sort(entries.begin(), entries.end());
  BOOST_TEST_REQUIRE(static_cast<int>(entries.size()) == kernels);
  BOOST_TEST_REQUIRE(kernels >= 2);
  // Rotate the entries by one place.
  const fs::path parked = dir / "parked";
  fs::rename(entries.front(), parked);
  for (std::size_t i = 0; i + 1 < entries.size(); ++i) fs::rename(entries[i + 1], entries[i]);
  fs::rename(parked, entries.back());
  {
    auto m = kiln::compile(model, {.backend = kiln::testing::test_backend(), .cache_dir = dir.string()});
    auto again = m({x});
    BOOST_TEST(m.stats().kernel_cache_hits == 0);
    BOOST_TEST(m.stats().kernel_cache_misses == kernels);
    BOOST_TEST(kiln::max_abs_diff(again[0], first[0]) == 0.0f);
  }
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_SUITE_END()

// Device-limits profiles (KILN_DEVICE_PROFILE): limits only come down, a
// limit the device does not state takes the profile's, subgroup operations
// are off where the profile's devices differ in subgroup size, and the
// profile is part of the fingerprint, so no cache serves what was planned
// without it.
BOOST_AUTO_TEST_SUITE(device_profile)

BOOST_AUTO_TEST_CASE(a_profile_clamps_the_limits_and_marks_the_fingerprint) {
  const kiln::runtime::DeviceProfile& mobile = kiln::runtime::device_profile("android-baseline");
  kiln::backend::TargetDesc roomy;
  roomy.backend = "vulkan";
  roomy.device_name = "a desktop GPU";
  roomy.max_workgroup_invocations = 1024;
  roomy.max_workgroup_size = {1024, 1024, 64};
  roomy.max_shared_memory_bytes = 48 * 1024;
  roomy.max_buffer_bytes = 4ull << 30;
  roomy.max_kernel_param_bytes = 0;  // states no limit
  roomy.subgroup_size = 32;
  roomy.subgroup_basic = roomy.subgroup_broadcast = true;
  roomy.max_texel_buffer_elements = 1ull << 30;
  const kiln::backend::TargetDesc t = kiln::runtime::clamped_target(roomy, mobile);
  BOOST_TEST(t.max_workgroup_invocations == 128u);
  BOOST_TEST(t.max_workgroup_size[0] == 128u);
  BOOST_TEST(t.max_workgroup_size[2] == 64u);
  BOOST_TEST(t.max_shared_memory_bytes == 32u * 1024);
  BOOST_TEST(t.max_buffer_bytes == 256ull << 20);
  BOOST_TEST(t.max_kernel_param_bytes == 128u);
  BOOST_TEST(t.max_texel_buffer_elements == (256ull << 20) / 4);
  BOOST_TEST(!t.subgroup_basic);
  BOOST_TEST(!t.subgroup_broadcast);
  BOOST_TEST(t.limits_profile == "android-baseline");
  BOOST_TEST(t.fingerprint() != roomy.fingerprint());
  BOOST_TEST(contains(t.fingerprint(), "android-baseline"));

  kiln::backend::TargetDesc small = roomy;
  small.max_workgroup_invocations = 64;
  small.max_shared_memory_bytes = 16 * 1024;
  const kiln::backend::TargetDesc kept = kiln::runtime::clamped_target(small, mobile);
  BOOST_TEST(kept.max_workgroup_invocations == 64u);
  BOOST_TEST(kept.max_shared_memory_bytes == 16u * 1024);

  const auto unknown = expect_error([] { kiln::runtime::device_profile("iphone-1"); });
  BOOST_TEST(unknown.kind() == ErrorKind::InvalidArgument);
  BOOST_TEST(contains(unknown.what(), "'iphone-1'"), unknown.what());
  BOOST_TEST(contains(unknown.what(), "android-baseline"), unknown.what());
}

BOOST_AUTO_TEST_CASE(a_profiled_device_plans_within_the_profile_and_runs_as_the_device) {
  const kiln::backend::Backend& vulkan = kiln::backend::get_backend("vulkan");
  if (vulkan.unavailable_reason() || vulkan.enumerate_devices().empty()) {
    BOOST_TEST_MESSAGE("skipped: no Vulkan device");
    return;
  }
  const kiln::runtime::DeviceProfile& mobile = kiln::runtime::device_profile("android-baseline");
  auto device = kiln::runtime::with_profile(vulkan.create_device(0), mobile);
  BOOST_TEST(device->target().max_workgroup_invocations <= 128u);
  BOOST_TEST(device->target().limits_profile == "android-baseline");
  std::vector<std::byte> data(256);
  for (std::size_t i = 0; i < data.size(); ++i) data[i] = static_cast<std::byte>(i);
  auto buffer = device->allocate(data.size());
  device->upload(*buffer, 0, data);
  std::vector<std::byte> back(data.size());
  device->download(*buffer, 0, back);
  BOOST_TEST((back == data));
}

BOOST_AUTO_TEST_SUITE_END()
