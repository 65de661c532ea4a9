// Every op case (op_cases.cpp) x every backend that can run here x
// {eager, default, reduce-overhead}, against the reference implementation.
// Backends that cannot run here are listed with their reason; their code
// generation is covered by test_codegen_compile.
#include <boost/test/unit_test.hpp>

#include "op_cases.h"

#include <kiln/kiln.h>

#include "graph/op_registry.h"
#include "src/runtime/internal_access.h"

#include <algorithm>
#include <cmath>
#include <iostream>

namespace {

using kiln::testing::OpCase;

float reference_scale(const kiln::Tensor& t) {
  float m = 1.0f;
  for (float v : t.values<float>()) m = std::max(m, std::fabs(v));
  return m;
}

void check_outputs(const OpCase& c, const std::vector<kiln::Tensor>& got, const std::vector<kiln::Tensor>& want) {
  BOOST_REQUIRE_EQUAL(got.size(), want.size());
  for (std::size_t i = 0; i < got.size(); ++i) {
    BOOST_TEST_CONTEXT("output " << i) {
      BOOST_REQUIRE(got[i].shape() == want[i].shape());
      BOOST_REQUIRE(got[i].dtype() == want[i].dtype());
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

enum class Way { eager, default_mode, reduce_overhead };

void run_case(const OpCase& c, const std::string& backend, Way way) {
  const std::vector<kiln::Tensor> want = kiln::graph::run_reference(kiln::internal::graph(c.model), c.inputs);
  std::vector<kiln::Tensor> got;
  if (way == Way::eager) {
    auto m = kiln::eager(c.model, {.backend = backend});
    got = m(c.inputs);
    // A model with nothing to write (every output empty) dispatches nothing.
    const bool writes = std::any_of(want.begin(), want.end(), [](const kiln::Tensor& t) { return t.numel() > 0; });
    if (writes) BOOST_TEST(m.stats().dispatches_per_run >= 1);
    else BOOST_TEST(m.stats().dispatches_per_run == 0);
  } else {
    kiln::CompileOptions o{.backend = backend};
    o.mode = way == Way::reduce_overhead ? kiln::Mode::reduce_overhead : kiln::Mode::default_;
    o.fullgraph = true;  // every op here must compile: no graph breaks
    auto m = kiln::compile(c.model, o);
    got = m(c.inputs);
    check_outputs(c, got, want);
    got = m(c.inputs);  // the second call reuses (or replays) everything
  }
  check_outputs(c, got, want);
}

bool init_suite() {
  auto& master = boost::unit_test::framework::master_test_suite();
  master.p_name.value = "conformance";
  static const std::vector<OpCase> cases = kiln::testing::make_op_cases();
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

  int backends_run = 0;
  for (const kiln::BackendDescription& b : kiln::list_backends()) {
    if (!b.available || b.devices.empty()) {
      std::cout << "conformance: backend '" << b.name << "' not run here: "
                << (b.available ? "no devices" : b.unavailable_reason) << "\n";
      continue;
    }
    ++backends_run;
    auto* suite = BOOST_TEST_SUITE(b.name);
    const std::pair<Way, const char*> ways[] = {
        {Way::eager, "eager"}, {Way::default_mode, "default"}, {Way::reduce_overhead, "reduce_overhead"}};
    for (const auto& [way, way_name] : ways) {
      auto* mode_suite = BOOST_TEST_SUITE(way_name);
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
    }
    master.add(suite);
  }
  if (backends_run == 0) std::cout << "conformance: no backend can run kernels here\n";
  return true;
}

}  // namespace

int main(int argc, char* argv[]) { return boost::unit_test::unit_test_main(&init_suite, argc, argv); }
