// max-autotune end to end on the Vulkan device: the first compile tunes the
// sites the database lacks within the budget and records them; the next
// compile takes them from the database and tunes nothing; explain says per
// site where its knobs came from, and why a record did not apply. Graph-level
// choices (Winograd or direct, packed or plain weights) are sites too.
#define BOOST_TEST_MODULE max_autotune
#include <boost/test/unit_test.hpp>

#include "backends/registry.h"
#include "src/runtime/executor.h"
#include "src/tune/autotune.h"
#include "src/tune/database.h"
#include "src/tune/graph_site.h"
#include "src/runtime/internal_access.h"

#include <kiln/kiln.h>

#include <algorithm>
#include <thread>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <random>
#include <set>
#include <string>
#include <unistd.h>

namespace fs = std::filesystem;

namespace {

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

bool have_vulkan() { return !kiln::backend::get_backend("vulkan").unavailable_reason(); }

// A folder removed at the end of the test.
struct TempDir {
  fs::path path;
  TempDir() : path(fs::temp_directory_path() / ("kiln_max_autotune_" + std::to_string(::getpid()))) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
};

kiln::Tensor random_tensor(kiln::Shape shape, std::uint64_t seed) {
  kiln::Tensor t(kiln::DType::f32, std::move(shape));
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  for (float& v : t.values<float>()) v = u(rng);
  return t;
}

// One GEMM site: x [64, 96] @ w [96, 80] + bias, then a Relu that fuses into
// it; and, before it, one graph site: whether w is packed.
kiln::Model small_model() {
  kiln::Builder b("tiny_linear");
  auto x = b.input("x", kiln::DType::f32, {64, 96});
  auto y = b.matmul(x, b.constant("w", random_tensor({96, 80}, 1)));
  return b.build({b.relu(b.add(y, b.constant("bias", random_tensor({80}, 2))))});
}

kiln::CompileOptions tuned_options(const fs::path& dir, const std::string& budget) {
  kiln::CompileOptions options;
  options.backend = "vulkan";
  options.mode = kiln::Mode::max_autotune;
  options.cache_dir = (dir / "cache").string();
  options.settings = {{"tune_budget", budget}};
  return options;
}

// Two 3x3 convolutions the Winograd rule takes (different shapes: two graph
// sites), with bias and Relu.
kiln::Model two_conv_model() {
  kiln::Builder b("two_convs");
  auto x = b.input("x", kiln::DType::f32, {1, 64, 16, 16});
  auto y = b.relu(b.conv2d(x, b.constant("w_a", random_tensor({64, 64, 3, 3}, 1)),
                           b.constant("b_a", random_tensor({64}, 2)), {.padding = {1, 1, 1, 1}}));
  auto z = b.conv2d(y, b.constant("w_b", random_tensor({72, 64, 3, 3}, 3)), std::nullopt, {.padding = {1, 1, 1, 1}});
  return b.build({z});
}

// |got - want| over the largest |want|: F(4x4)'s fp32 error is about 1e-4 of the scale.
double relative_error(const kiln::Tensor& got, const kiln::Tensor& want) {
  double scale = 0;
  for (float v : want.values<float>()) scale = std::max(scale, double(std::fabs(v)));
  return kiln::max_abs_diff(got, want) / std::max(scale, 1e-30);
}

int count_op(const kiln::graph::Graph& g, const std::string& op) {
  int n = 0;
  for (const auto& node : g.nodes()) n += node.op == op;
  return n;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_record_that_says_direct_keeps_that_conv_direct_and_only_that_one) {
  if (!have_vulkan()) {
    BOOST_TEST_MESSAGE("skipped: no Vulkan device");
    return;
  }
  TempDir dir;
  const kiln::Model model = two_conv_model();
  const std::vector<kiln::Tensor> inputs = {random_tensor({1, 64, 16, 16}, 4)};
  const kiln::Tensor want = kiln::eager(model)(inputs)[0];

  // No record, no budget: the rule's Winograd for both, and explain says why.
  kiln::CompiledModel ruled = kiln::compile(model, tuned_options(dir.path, "0"));
  BOOST_TEST(relative_error(ruled(inputs)[0], want) <= 2e-4);
  const kiln::compiler::Plan& plan = *kiln::internal::engine(ruled).plan();
  BOOST_TEST(count_op(*plan.graph, "WinogradInput") == 2);
  BOOST_REQUIRE(plan.autotune.has_value());
  std::vector<kiln::tune::SiteDecision> graph_decisions;
  for (const kiln::tune::SiteDecision& d : plan.autotune->decisions)
    if (kiln::tune::is_graph_site(d.site)) graph_decisions.push_back(d);
  BOOST_REQUIRE(graph_decisions.size() == 2u);
  for (const kiln::tune::SiteDecision& d : graph_decisions) {
    BOOST_TEST((d.source == kiln::tune::ChoiceSource::heuristic));
    BOOST_TEST(d.knobs != "direct");
    BOOST_TEST(d.knobs == d.site.id.knobs);
  }
  const std::string first_conv = graph_decisions[0].node_name;
  BOOST_TEST(contains(ruled.explain(), "winograd '" + first_conv + "' ["));

  // A record for the first conv's site says "direct".
  kiln::tune::Record record;
  record.key = kiln::tune::record_key(graph_decisions[0].site, plan.target);
  record.heuristic_knobs = graph_decisions[0].site.id.knobs;
  record.winner_knobs = "direct";
  record.heuristic_ms = 2;
  record.winner_ms = 1;
  record.provenance = {"2026-12-01T00:00:00Z", "test", "0.1.0", 10};
  {
    kiln::tune::Database db = kiln::tune::Database::open((dir.path / "cache" / "tuning.db").string());
    db.put(record);
  }
  kiln::CompiledModel tuned = kiln::compile(model, tuned_options(dir.path, "0"));
  BOOST_TEST(relative_error(tuned(inputs)[0], want) <= 2e-4);
  const kiln::compiler::Plan& tuned_plan = *kiln::internal::engine(tuned).plan();
  BOOST_TEST(count_op(*tuned_plan.graph, "WinogradInput") == 1);
  bool first_is_conv = false;
  for (const auto& node : tuned_plan.graph->nodes())
    if (node.name == first_conv) first_is_conv = node.op == "Conv";
  BOOST_TEST(first_is_conv);
  const std::string explained = tuned.explain();
  BOOST_TEST_MESSAGE(explained);
  BOOST_TEST(contains(explained, "winograd '" + first_conv + "' [" + graph_decisions[0].site.id.problem +
                                     "]: database (2.00x): direct"));
  BOOST_TEST(contains(explained, "winograd '" + graph_decisions[1].node_name + "' [" +
                                     graph_decisions[1].site.id.problem + "]: heuristic (no record"));
  BOOST_TEST(contains(explained, "by the chooser (the rule: " + graph_decisions[0].site.id.knobs + ")"));
}

BOOST_AUTO_TEST_CASE(first_compile_tunes_and_records_the_next_reads_the_record) {
  if (!have_vulkan()) {
    BOOST_TEST_MESSAGE("skipped: no Vulkan device");
    return;
  }
  TempDir dir;
  const kiln::Model model = small_model();
  const std::vector<kiln::Tensor> inputs = {random_tensor({64, 96}, 3)};
  kiln::EagerModel eager = kiln::eager(model);
  const kiln::Tensor want = eager(inputs)[0];

  kiln::CompiledModel first = kiln::compile(model, tuned_options(dir.path, "60s"));
  BOOST_TEST(kiln::max_abs_diff(first(inputs)[0], want) <= 1e-4f);
  const std::string explained = first.explain();
  BOOST_TEST_MESSAGE(explained);
  BOOST_TEST(contains(explained, "autotune: 2 tuning sites"));
  BOOST_TEST(contains(explained, "pack_matmul_weights '"), explained);
  BOOST_TEST(contains(explained, "tuned now"));
  // The time spent tuning is reported on its own, within the plan's time.
  BOOST_TEST(first.stats().tuning_ms > 0.0);
  BOOST_TEST(first.stats().tuning_ms <= first.stats().plan_ms);
  const std::string db_path = (dir.path / "cache" / "tuning.db").string();
  BOOST_REQUIRE(fs::exists(db_path));
  {
    const kiln::tune::Database db = kiln::tune::Database::open_read_only(db_path);
    BOOST_TEST_REQUIRE(db.size() == 2u);
    for (const kiln::tune::Record& record : db.all()) {
      BOOST_TEST((record.key.template_name == "gemm" || record.key.template_name == "pack_matmul_weights"));
      BOOST_TEST(record.candidates.size() >= 2u);
      BOOST_TEST(record.candidates.front().knobs == record.heuristic_knobs);  // the heuristic is measured first
      for (const kiln::tune::CandidateResult& c : record.candidates)
        BOOST_TEST((c.status == kiln::tune::CandidateStatus::ok || c.status == kiln::tune::CandidateStatus::not_measured),
                   c.knobs << ": " << c.detail);
    }
    BOOST_TEST(db.all().at(0).key.template_name != db.all().at(1).key.template_name);
  }

  // The next compile (budget 0: it may not tune) takes the record.
  const auto start = std::chrono::steady_clock::now();
  kiln::CompiledModel second = kiln::compile(model, tuned_options(dir.path, "0"));
  BOOST_TEST(kiln::max_abs_diff(second(inputs)[0], want) <= 1e-4f);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  const kiln::compiler::Plan& plan = *kiln::internal::engine(second).plan();
  BOOST_REQUIRE(plan.autotune.has_value());
  BOOST_TEST(second.stats().tuning_ms == 0.0);  // every site had its record
  BOOST_REQUIRE(plan.autotune->decisions.size() == 2u);
  BOOST_TEST(plan.autotune->decisions[0].site.id.template_name == "pack_matmul_weights");  // graph choices first
  for (const kiln::tune::SiteDecision& d : plan.autotune->decisions)
    BOOST_TEST((d.source == kiln::tune::ChoiceSource::database), d.site.id.template_name);
  BOOST_TEST(plan.autotune->tuning_s < 1.0);
  BOOST_TEST(contains(second.explain(), ": database ("));
  BOOST_TEST_MESSAGE("second compile: " << seconds << " s");
  BOOST_TEST(!second.stats().plan_from_cache);  // budget 0 has a plan cache key of its own

  // With the budget back, the first compile's plan (every site recorded) comes
  // from the plan cache: no graph pass, the decisions kept for explain.
  kiln::CompiledModel third = kiln::compile(model, tuned_options(dir.path, "60s"));
  BOOST_TEST(kiln::max_abs_diff(third(inputs)[0], want) <= 1e-4f);
  BOOST_TEST(third.stats().plan_from_cache);
  BOOST_TEST(third.stats().graph_passes_run == 0);
  const std::string third_explained = third.explain();
  BOOST_TEST(contains(third_explained, "autotune: 2 tuning sites"), third_explained);
  BOOST_TEST(contains(third_explained, ": database ("), third_explained);
  BOOST_TEST(!contains(third_explained, "tuned now ("), third_explained);

  // A changed record changes the database's digest: the plan is built again.
  {
    kiln::tune::Database db = kiln::tune::Database::open(db_path);
    kiln::tune::Record record = db.all().at(0);
    record.provenance.date = "2027-01-01T00:00:00Z";
    db.put(record);
  }
  kiln::CompiledModel fourth = kiln::compile(model, tuned_options(dir.path, "60s"));
  BOOST_TEST(kiln::max_abs_diff(fourth(inputs)[0], want) <= 1e-4f);
  BOOST_TEST(!fourth.stats().plan_from_cache);
  BOOST_TEST(fourth.stats().graph_passes_run > 0);
}

// tune=records never tunes; tune=background runs on the records at once,
// tunes on the background thread and switches at the next call (or in
// wait_for_tuning()); the next process finds every record and tunes nothing.
BOOST_AUTO_TEST_CASE(the_tune_setting_chooses_records_only_or_background_tuning) {
  if (!have_vulkan()) {
    BOOST_TEST_MESSAGE("skipped: no Vulkan device");
    return;
  }
  TempDir dir;
  const kiln::Model model = small_model();
  const std::vector<kiln::Tensor> inputs = {random_tensor({64, 96}, 3)};
  const kiln::Tensor want = kiln::eager(model)(inputs)[0];
  const std::string db_path = (dir.path / "cache" / "tuning.db").string();
  const auto with_tune = [&](const std::string& policy) {
    kiln::CompileOptions options = tuned_options(dir.path, "60s");
    options.settings.emplace_back("tune", policy);
    return options;
  };
  const auto sources = [](const kiln::CompiledModel& m) {
    std::set<std::string> names;
    for (const kiln::tune::SiteDecision& d : kiln::internal::engine(m).plan()->autotune->decisions)
      names.insert(kiln::tune::choice_source_name(d.source));
    return names;
  };

  kiln::CompiledModel records = kiln::compile(model, with_tune("records"));
  BOOST_TEST(kiln::max_abs_diff(records(inputs)[0], want) <= 1e-4f);
  BOOST_TEST(records.stats().tuning_ms == 0.0);
  BOOST_TEST(!records.stats().tuning_in_background);
  BOOST_TEST((sources(records) == std::set<std::string>{"heuristic"}));
  BOOST_TEST(!fs::exists(db_path));  // nothing tuned, nothing written

  kiln::CompiledModel background = kiln::compile(model, with_tune("background"));
  BOOST_TEST(kiln::max_abs_diff(background(inputs)[0], want) <= 1e-4f);
  BOOST_TEST(background.stats().tuning_ms == 0.0);  // the first call did not wait for tuning
  BOOST_TEST((sources(background) == std::set<std::string>{"heuristic"}));
  background.wait_for_tuning();
  const kiln::RunStats switched = background.stats();
  BOOST_TEST(!switched.tuning_in_background);
  BOOST_TEST(switched.background_tuning_ms > 0.0);
  BOOST_TEST((sources(background) == std::set<std::string>{"tuned now"}));
  BOOST_TEST(contains(background.explain(), "tuned now ("));
  BOOST_TEST(kiln::max_abs_diff(background(inputs)[0], want) <= 1e-4f);
  BOOST_TEST_REQUIRE(fs::exists(db_path));
  BOOST_TEST(kiln::tune::Database::open_read_only(db_path).size() == 2u);

  // The next process: every record applies; no job starts.
  kiln::CompiledModel next = kiln::compile(model, with_tune("background"));
  BOOST_TEST(kiln::max_abs_diff(next(inputs)[0], want) <= 1e-4f);
  BOOST_TEST(!next.stats().tuning_in_background);
  BOOST_TEST((sources(next) == std::set<std::string>{"database"}));
  next.wait_for_tuning();  // nothing to wait for
  BOOST_TEST(next.stats().background_tuning_ms == 0.0);
}

// A model destroyed while its background tuning runs stops the job, and the
// process's tuning thread goes on with the next one.
BOOST_AUTO_TEST_CASE(destroying_a_model_stops_its_background_tuning) {
  if (!have_vulkan()) {
    BOOST_TEST_MESSAGE("skipped: no Vulkan device");
    return;
  }
  TempDir dir;
  const std::vector<kiln::Tensor> inputs = {random_tensor({64, 96}, 3)};
  kiln::CompileOptions options = tuned_options(dir.path, "10m");
  options.settings.emplace_back("tune", "background");
  {
    kiln::CompiledModel doomed = kiln::compile(small_model(), options);
    doomed(inputs);
    BOOST_TEST(doomed.stats().tuning_in_background);
  }
  kiln::CompiledModel after = kiln::compile(small_model(), options);
  after(inputs);
  after.wait_for_tuning();
  BOOST_TEST(!after.stats().tuning_in_background);
  BOOST_TEST(after.stats().background_tuning_ms > 0.0);
}

// Calls from two threads go on while the job tunes; one of them switches to
// the tuned plan, and every output, before and after, is right.
BOOST_AUTO_TEST_CASE(calls_from_threads_switch_to_the_background_plan_safely) {
  if (!have_vulkan()) {
    BOOST_TEST_MESSAGE("skipped: no Vulkan device");
    return;
  }
  TempDir dir;
  const kiln::Model model = small_model();
  const std::vector<kiln::Tensor> inputs = {random_tensor({64, 96}, 3)};
  const kiln::Tensor want = kiln::eager(model)(inputs)[0];
  kiln::CompileOptions options = tuned_options(dir.path, "60s");
  options.settings.emplace_back("tune", "background");
  kiln::CompiledModel compiled = kiln::compile(model, options);
  compiled.prepare();
  std::atomic<int> wrong = 0, calls = 0;
  std::atomic<bool> done = false;
  auto caller = [&] {
    while (!done) {
      if (kiln::max_abs_diff(compiled(inputs)[0], want) > 1e-4f) ++wrong;
      ++calls;
    }
    // A call after the job finished runs (or switches to) the tuned plan.
    if (kiln::max_abs_diff(compiled(inputs)[0], want) > 1e-4f) ++wrong;
  };
  std::thread a(caller), b(caller);
  compiled.wait_for_tuning();
  done = true;
  a.join();
  b.join();
  BOOST_TEST(wrong.load() == 0);
  BOOST_TEST(calls.load() > 0);
  BOOST_TEST(compiled.stats().background_tuning_ms > 0.0);
  for (const kiln::tune::SiteDecision& d : kiln::internal::engine(compiled).plan()->autotune->decisions)
    BOOST_TEST((d.source == kiln::tune::ChoiceSource::tuned_now), d.site.id.template_name);
}

BOOST_AUTO_TEST_CASE(without_a_record_or_budget_the_heuristic_stays_and_explain_says_why) {
  if (!have_vulkan()) {
    BOOST_TEST_MESSAGE("skipped: no Vulkan device");
    return;
  }
  TempDir dir;
  const kiln::Model model = small_model();
  kiln::CompiledModel compiled = kiln::compile(model, tuned_options(dir.path, "0"));
  compiled.prepare();
  const kiln::compiler::Plan& plan = *kiln::internal::engine(compiled).plan();
  BOOST_REQUIRE(plan.autotune.has_value());
  BOOST_REQUIRE(plan.autotune->decisions.size() == 2u);
  const kiln::tune::SiteDecision& d = plan.autotune->decisions[1];
  BOOST_TEST(d.site.id.template_name == "gemm");
  BOOST_TEST((plan.autotune->decisions[0].source == kiln::tune::ChoiceSource::heuristic));
  BOOST_TEST((d.source == kiln::tune::ChoiceSource::heuristic));
  BOOST_TEST((d.lookup == kiln::tune::Applicability::no_record));
  BOOST_TEST(d.knobs == d.site.id.knobs);
  BOOST_TEST(contains(compiled.explain(), "heuristic (no record"));

  // A record for another driver of this device does not apply, and explain says so.
  kiln::tune::Record other;
  other.key = kiln::tune::record_key(d.site, plan.target);
  other.key.device.driver = "some other driver 0.1";
  other.heuristic_knobs = other.winner_knobs = d.site.id.knobs;
  other.heuristic_ms = other.winner_ms = 1;
  other.provenance = {"2026-01-01T00:00:00Z", "elsewhere", "0.1.0", 10};
  {
    kiln::tune::Database db = kiln::tune::Database::open((dir.path / "cache" / "tuning.db").string());
    db.put(other);
  }
  kiln::CompiledModel again = kiln::compile(model, tuned_options(dir.path, "0"));
  again.prepare();
  const kiln::tune::SiteDecision& d2 = kiln::internal::engine(again).plan()->autotune->decisions.at(1);
  BOOST_TEST((d2.lookup == kiln::tune::Applicability::other_driver));
  BOOST_TEST(contains(again.explain(), "other driver"));
}

BOOST_AUTO_TEST_CASE(default_mode_never_looks_at_the_database) {
  if (!have_vulkan()) {
    BOOST_TEST_MESSAGE("skipped: no Vulkan device");
    return;
  }
  TempDir dir;
  kiln::CompileOptions options = tuned_options(dir.path, "0");
  options.mode = kiln::Mode::default_;
  kiln::CompiledModel compiled = kiln::compile(small_model(), options);
  compiled.prepare();
  BOOST_TEST(!kiln::internal::engine(compiled).plan()->autotune.has_value());
  BOOST_TEST(!fs::exists(dir.path / "cache" / "tuning.db"));
}

BOOST_AUTO_TEST_CASE(a_reduction_anchor_is_tuned_and_its_record_sets_the_fused_kernels_workgroup) {
  if (!have_vulkan()) {
    BOOST_TEST_MESSAGE("skipped: no Vulkan device");
    return;
  }
  TempDir dir;
  // x + mask, then Softmax: the Add runs as the Softmax kernel's prologue, so the one site is the Softmax's.
  kiln::Builder b("masked_softmax");
  auto x = b.input("x", kiln::DType::f32, {48, 40});
  const kiln::Model model = b.build({b.softmax(b.add(x, b.constant("mask", random_tensor({40}, 4))))});
  const std::vector<kiln::Tensor> inputs = {random_tensor({48, 40}, 5)};
  kiln::EagerModel eager = kiln::eager(model);
  const kiln::Tensor want = eager(inputs)[0];

  kiln::CompiledModel first = kiln::compile(model, tuned_options(dir.path, "60s"));
  BOOST_TEST(kiln::max_abs_diff(first(inputs)[0], want) <= 1e-5f);
  const kiln::compiler::Plan& tuned_plan = *kiln::internal::engine(first).plan();
  BOOST_REQUIRE(tuned_plan.autotune.has_value());
  BOOST_REQUIRE(tuned_plan.autotune->decisions.size() == 1u);
  const kiln::tune::SiteDecision& d = tuned_plan.autotune->decisions[0];
  BOOST_TEST(d.site.id.template_name == "reduction");
  BOOST_TEST(d.site.id.problem == "reduction Softmax in=f32[48,40] out=f32[48,40] axis=-1");
  BOOST_TEST((d.source == kiln::tune::ChoiceSource::tuned_now), d.reason);
  BOOST_TEST(contains(first.explain(), "reduction 'softmax"));
  const std::string db_path = (dir.path / "cache" / "tuning.db").string();
  {
    const kiln::tune::Database db = kiln::tune::Database::open_read_only(db_path);
    BOOST_REQUIRE(db.size() == 1u);
    const kiln::tune::Record record = db.all().at(0);
    BOOST_TEST(record.heuristic_knobs == "wg64");
    BOOST_TEST(record.candidates.size() >= 5u);  // 32 to 1024 (and the subgroup size) within the device's limit
    for (const kiln::tune::CandidateResult& c : record.candidates) {
      BOOST_TEST((c.status == kiln::tune::CandidateStatus::ok), c.knobs << ": " << c.detail);
      BOOST_TEST(c.median_ms > 0, c.knobs);
      BOOST_TEST_MESSAGE(c.knobs << ": " << c.median_ms << " ms, " << c.times_ms.size() << " runs");
    }
  }

  // A record choosing 32 invocations: the fused kernel (Add and Softmax) takes it, and its grid follows.
  kiln::tune::Record record;
  record.key = kiln::tune::record_key(d.site, tuned_plan.target);
  record.heuristic_knobs = "wg64";
  record.winner_knobs = "wg32";
  record.heuristic_ms = 2;
  record.winner_ms = 1;
  record.provenance = {"2026-01-01T00:00:00Z", "test", "0.1.0", 10};
  {
    kiln::tune::Database db = kiln::tune::Database::open(db_path);
    db.put(record);
  }
  kiln::CompiledModel second = kiln::compile(model, tuned_options(dir.path, "0"));
  BOOST_TEST(kiln::max_abs_diff(second(inputs)[0], want) <= 1e-5f);
  const kiln::compiler::Plan& plan = *kiln::internal::engine(second).plan();
  BOOST_TEST((plan.autotune->decisions.at(0).source == kiln::tune::ChoiceSource::database));
  int dispatches = 0;
  for (const kiln::compiler::Step& step : plan.steps) {
    if (!step.dispatch) continue;
    ++dispatches;
    const kiln::kir::Kernel& kernel = plan.kernels.at(step.dispatch->kernel);
    BOOST_TEST(step.dispatch->nodes.size() == 2u);
    BOOST_TEST(kernel.workgroup_size == 32u);
    BOOST_TEST(kernel.tuning_site->knobs == "wg32");
    const auto& grid = step.dispatch->grid;
    BOOST_TEST(grid[0] * grid[1] * grid[2] == 2u);  // 48 rows in workgroups of 32
  }
  BOOST_TEST(dispatches == 1);
}
