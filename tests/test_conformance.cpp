// Every op case (op_cases.cpp) x every backend that can run here x eager
// and every mode (kiln::all_modes(): default, reduce-overhead, max-autotune
// on the tuning database's records), against the reference implementation;
// and each case with f32 tensors again in f16 and in bf16 (every f32 tensor
// of its model and inputs converted), against the reference's 16-bit rule,
// within the per-op bound of docs/precision.md.
// Backends that cannot run here are listed with their reason; their code
// generation is covered by test_codegen_compile.
#include <boost/test/unit_test.hpp>

#include "op_cases.h"

#include <kiln/kiln.h>

#include "graph/op_registry.h"
#include "graph/passes/passes.h"
#include "src/runtime/internal_access.h"

#include <algorithm>
#include <optional>
#include <cmath>
#include <iostream>
#include <cstdlib>
#include <sstream>
#include <set>

namespace {

using kiln::testing::OpCase;

bool is_16bit(kiln::DType dtype) { return dtype == kiln::DType::f16 || dtype == kiln::DType::bf16; }

float reference_scale(const kiln::Tensor& t) {
  float m = 1.0f;
  for (float v : t.values<float>()) m = std::max(m, std::fabs(v));
  return m;
}

// The per-op bound for a 16-bit output, relative to the output's scale: two
// units of the type's epsilon (its rounding, and a neighbouring value where
// f32 arithmetic of another order or another math library lands on the
// other side of a rounding boundary), or the case's own f32 bound if larger.
float sixteen_bit_tolerance(const OpCase& c, kiln::DType dtype) {
  const float epsilon = dtype == kiln::DType::f16 ? 0x1p-10f : 0x1p-7f;
  return std::max(c.tolerance, 2 * epsilon);
}

// The case with every f32 tensor (inputs, weights, activations, outputs) in
// `dtype`; nullopt for a case without one.
std::optional<OpCase> sixteen_bit_twin(const OpCase& c, kiln::DType dtype) {
  const kiln::graph::Graph& graph = kiln::internal::graph(c.model);
  const auto& values = graph.values();
  if (std::none_of(values.begin(), values.end(), [](const auto& v) { return v.type.dtype == kiln::DType::f32; }))
    return std::nullopt;
  kiln::graph::passes::PassResult converted =
      kiln::graph::passes::convert_float_type(graph, {.to = dtype, .keep_io_types = false});
  OpCase twin{c.name, kiln::internal::ModelAccess::make(std::make_shared<const kiln::graph::Graph>(std::move(converted.graph)),
                                                        c.model.name()),
              {}, c.tolerance};
  for (const kiln::Tensor& input : c.inputs)
    twin.inputs.push_back(input.dtype() == kiln::DType::f32 ? input.to(dtype) : input);
  twin.tolerance = sixteen_bit_tolerance(c, dtype);
  return twin;
}

// `fused`: compiled kernels keep f32 between the ops they fuse, so where the
// per-op reference overflowed the 16-bit range in an intermediate (an
// infinity or NaN in its output), a fused kernel may give a finite value.
void check_outputs(const OpCase& c, const std::vector<kiln::Tensor>& got, const std::vector<kiln::Tensor>& want,
                   bool fused) {
  BOOST_REQUIRE_EQUAL(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    BOOST_TEST_CONTEXT("output " << i) {
      BOOST_REQUIRE(got[i].shape() == want[i].shape());
      BOOST_REQUIRE(got[i].dtype() == want[i].dtype());
      if (is_16bit(want[i].dtype())) {
        // Infinities (overflow, 16-bit's largest finite value is 65504) and
        // NaNs must agree exactly; finite values within the bound.
        const kiln::Tensor g = got[i].to(kiln::DType::f32), w = want[i].to(kiln::DType::f32);
        const auto gv = g.values<float>(), wv = w.values<float>();
        float scale = 1.0f;
        for (float v : wv)
          if (std::isfinite(v)) scale = std::max(scale, std::fabs(v));
        const float bound = c.tolerance * scale;
        for (std::size_t k = 0; k < wv.size(); ++k) {
          const bool same = gv[k] == wv[k] || (std::isnan(gv[k]) && std::isnan(wv[k]));
          if (same || (std::isfinite(wv[k]) && std::fabs(gv[k] - wv[k]) <= bound) || (fused && !std::isfinite(wv[k])))
            continue;
          BOOST_ERROR("element " << k << " is " << gv[k] << ", the reference " << wv[k] << " (bound " << bound << ", "
                                 << kiln::dtype_name(want[i].dtype()) << ")");
          break;
        }
        continue;
      }
      if (want[i].dtype() != kiln::DType::f32) {
        const auto a = got[i].bytes(), b = want[i].bytes();
        BOOST_TEST(std::equal(a.begin(), a.end(), b.begin(), b.end()), "integer or bool output differs from the reference");
        continue;
      }
      const float diff = kiln::max_abs_diff(got[i], want[i]);
      const float bound = c.tolerance * reference_scale(want[i]);
      BOOST_TEST(diff <= bound, "max |backend - reference| = " << diff << " > " << bound);
    }
  }
}

// How a case runs: eagerly, or compiled in one of kiln's modes.
using Way = std::optional<kiln::Mode>;

// "eager", "default", "reduce_overhead", "max_autotune": test suite names.
std::string way_name(const Way& way) {
  if (!way) return "eager";
  std::string name(kiln::mode_name(*way));
  std::replace(name.begin(), name.end(), '-', '_');
  return name;
}

// The space-separated words of environment variable `name` (none if unset).
std::set<std::string> words_of(const char* name) {
  std::set<std::string> names;
  if (const char* text = std::getenv(name)) {
    std::istringstream words(text);
    for (std::string word; words >> word;) names.insert(word);
  }
  return names;
}

// KILN_CONFORMANCE_SKIP_WAYS="max-autotune ...": modes left out of this run,
// said in its output (CI's sanitizer build leaves out max-autotune, whose
// kernels with no tuning records are default mode's).
const std::set<std::string>& skipped_ways() {
  static const std::set<std::string> skipped = [] {
    std::set<std::string> names = words_of("KILN_CONFORMANCE_SKIP_WAYS");
    for (const std::string& name : names)
      std::cout << "conformance: mode " << name << " not run (KILN_CONFORMANCE_SKIP_WAYS)\n";
    return names;
  }();
  return skipped;
}

// KILN_CONFORMANCE_SKIP_BACKENDS="cpu ...": backends left out of this run,
// said in its output (CI's sanitizer build leaves out the cpu backend, whose
// cases are mostly its C compiler at work).
const std::set<std::string>& skipped_backends() {
  static const std::set<std::string> skipped = words_of("KILN_CONFORMANCE_SKIP_BACKENDS");
  return skipped;
}

void run_case(const OpCase& c, const std::string& backend, const Way& way) {
  const std::vector<kiln::Tensor> want = kiln::graph::run_reference(kiln::internal::graph(c.model), c.inputs);
  std::vector<kiln::Tensor> got;
  if (!way) {
    auto m = kiln::eager(c.model, {.backend = backend});
    got = m(c.inputs);
    // A model with nothing to write (every output empty) dispatches nothing.
    const bool writes = std::any_of(want.begin(), want.end(), [](const kiln::Tensor& t) { return t.numel() > 0; });
    if (writes) BOOST_TEST(m.stats().dispatches_per_run >= 1);
    else BOOST_TEST(m.stats().dispatches_per_run == 0);
  } else {
    kiln::CompileOptions o{.backend = backend};
    o.mode = *way;
    o.fullgraph = true;  // every op here must compile: no graph breaks
    // max-autotune on the tuning database's records (none here: the
    // heuristics' knobs through the autotuner's path), tuning nothing.
    if (o.mode == kiln::Mode::max_autotune) o.settings = {{"tune", "records"}};
    auto m = kiln::compile(c.model, o);
    got = m(c.inputs);
    check_outputs(c, got, want, true);
    got = m(c.inputs);  // the second call reuses (or replays) everything
  }
  check_outputs(c, got, want, way.has_value());
}

// Backends that ran here (init_suite): with none, the suite reports a skip
// (exit 77, which Meson counts as skipped), not a pass.
int backends_run = 0;

bool init_suite() {
  auto& master = boost::unit_test::framework::master_test_suite();
  master.p_name.value = "conformance";
  static const std::vector<OpCase> cases = kiln::testing::make_op_cases();
  static const std::vector<std::pair<const char*, std::vector<OpCase>>> twins = [] {
    std::vector<std::pair<const char*, std::vector<OpCase>>> sets = {{"f16", {}}, {"bf16", {}}};
    for (auto& [name, set] : sets)
      for (const OpCase& c : cases)
        if (auto twin = sixteen_bit_twin(c, std::string(name) == "f16" ? kiln::DType::f16 : kiln::DType::bf16))
          set.push_back(std::move(*twin));
    return sets;
  }();
  // The oracle itself: every case runs on the reference implementation and
  // produces finite outputs of the declared types.
  auto* reference = BOOST_TEST_SUITE("reference");
  for (const OpCase& c : cases) {
    std::string name = c.name;
    std::replace(name.begin(), name.end(), '/', '.');
    const OpCase* cp = &c;
    reference->add(boost::unit_test::make_test_case(
        [cp] {
          const auto out = kiln::graph::run_reference(kiln::internal::graph(cp->model), cp->inputs);
          const auto specs = cp->model.outputs();
          BOOST_REQUIRE_EQUAL(out.size(), specs.size());
          for (std::size_t i = 0; i < out.size(); ++i) {
            BOOST_TEST(out[i].shape() == specs[i].shape);
            BOOST_TEST((out[i].dtype() == specs[i].dtype));
            if (out[i].dtype() != kiln::DType::f32) continue;
            for (float v : out[i].values<float>()) BOOST_REQUIRE(std::isfinite(v));
          }
        },
        name, __FILE__, __LINE__));
  }
  master.add(reference);

  for (const kiln::BackendDescription& b : kiln::list_backends()) {
    if (!b.available || b.devices.empty()) {
      std::cout << "conformance: backend '" << b.name << "' not run here: "
                << (b.available ? "no devices" : b.unavailable_reason) << "\n";
      continue;
    }
    if (skipped_backends().contains(b.name)) {
      std::cout << "conformance: backend '" << b.name << "' not run (KILN_CONFORMANCE_SKIP_BACKENDS)\n";
      continue;
    }
    ++backends_run;
    auto* suite = BOOST_TEST_SUITE(b.name);
    std::vector<Way> ways = {std::nullopt};  // eager, then every mode
    for (kiln::Mode mode : kiln::all_modes())
      if (!skipped_ways().contains(std::string(kiln::mode_name(mode)))) ways.push_back(mode);
    for (const Way& way : ways) {
      auto* mode_suite = BOOST_TEST_SUITE(way_name(way));
      for (const OpCase& c : cases) {
        std::string name = c.name;
        std::replace(name.begin(), name.end(), '/', '.');
        const std::string backend = b.name;
        const Way w = way;
        const OpCase* cp = &c;
        mode_suite->add(boost::unit_test::make_test_case([cp, backend, w] { run_case(*cp, backend, w); }, name,
                                                         __FILE__, __LINE__));
      }
      suite->add(mode_suite);
      for (const auto& [dtype, set] : twins) {
        auto* typed_suite = BOOST_TEST_SUITE(way_name(way) + "_" + dtype);
        for (const OpCase& c : set) {
          std::string name = c.name;
          std::replace(name.begin(), name.end(), '/', '.');
          const std::string backend = b.name;
          const Way w = way;
          const OpCase* cp = &c;
          typed_suite->add(boost::unit_test::make_test_case([cp, backend, w] { run_case(*cp, backend, w); }, name,
                                                            __FILE__, __LINE__));
        }
        suite->add(typed_suite);
      }
    }
    master.add(suite);
  }
  if (backends_run == 0) std::cout << "conformance: no backend can run kernels here\n";
  return true;
}

}  // namespace

int main(int argc, char* argv[]) {
  const int status = boost::unit_test::unit_test_main(&init_suite, argc, argv);
  return status == 0 && backends_run == 0 ? 77 : status;
}
