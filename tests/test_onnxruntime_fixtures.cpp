#define BOOST_TEST_MODULE onnxruntime_fixtures
#include <boost/test/unit_test.hpp>

// kiln against ONNX Runtime's outputs (tests/fixtures/onnxruntime/, made by
// its make_fixtures.py): recurrent layers in every direction and layout with
// sequence lengths, initial states, peepholes, clipping and activation
// parameters, and the audio front end (STFT, DFT, window functions, a mel
// filter bank). Each case runs on the reference implementation, eagerly,
// compiled and replayed (reduce-overhead) on the test backend.

#include <kiln/kiln.h>
#include <kiln/onnx.h>

#include "graph/op_registry.h"
#include "src/runtime/internal_access.h"
#include "test_backend.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

namespace fs = std::filesystem;

namespace {

fs::path fixture_dir() {
  const char* root = std::getenv("KILN_SOURCE_ROOT");
  const fs::path base = root != nullptr && *root != '\0' ? fs::path(root) / "tests" : fs::path(__FILE__).parent_path();
  return base / "fixtures" / "onnxruntime";
}

struct Case {
  kiln::Model model;
  std::vector<kiln::Tensor> inputs, expected;
};

Case load_case(const std::string& name) {
  const fs::path dir = fixture_dir() / name;
  Case c{kiln::load_onnx((dir / "model.onnx").string()), {}, {}};
  for (int i = 0; fs::exists(dir / "test_data_set_0" / ("input_" + std::to_string(i) + ".pb")); ++i)
    c.inputs.push_back(kiln::load_onnx_tensor((dir / "test_data_set_0" / ("input_" + std::to_string(i) + ".pb")).string()));
  for (int i = 0; fs::exists(dir / "test_data_set_0" / ("output_" + std::to_string(i) + ".pb")); ++i)
    c.expected.push_back(kiln::load_onnx_tensor((dir / "test_data_set_0" / ("output_" + std::to_string(i) + ".pb")).string()));
  BOOST_TEST_REQUIRE(!c.expected.empty());
  return c;
}

// Every output within `tolerance` of ONNX Runtime's, relative to max(1, |largest|).
void check(const std::vector<kiln::Tensor>& got, const std::vector<kiln::Tensor>& want, const std::string& how,
           double tolerance) {
  BOOST_TEST_REQUIRE(got.size() == want.size(), how);
  for (std::size_t i = 0; i < want.size(); ++i) {
    BOOST_TEST_REQUIRE(got[i].shape() == want[i].shape(), how << ": output " << i << " " << kiln::shape_str(got[i].shape())
                                                              << " vs " << kiln::shape_str(want[i].shape()));
    const auto g = got[i].values<float>();
    const auto w = want[i].values<float>();
    double scale = 1.0, worst = 0.0;
    for (float v : w) scale = std::max(scale, std::fabs(double(v)));
    for (std::size_t k = 0; k < w.size(); ++k) worst = std::max(worst, std::fabs(double(g[k]) - w[k]));
    BOOST_TEST(worst / scale <= tolerance, how << ": output " << i << " differs by " << worst << " (scale " << scale << ")");
  }
}

void check_case(const std::string& name, double tolerance = 2e-5) {
  const Case c = load_case(name);
  const std::string backend = kiln::testing::test_backend();
  check(kiln::graph::run_reference(kiln::internal::graph(c.model), c.inputs), c.expected, name + " reference", tolerance);
  kiln::EagerModel eager = kiln::eager(c.model, {.backend = backend});
  check(eager(c.inputs), c.expected, name + " eager", tolerance);
  for (const kiln::Mode mode : {kiln::Mode::default_, kiln::Mode::reduce_overhead}) {
    kiln::CompiledModel compiled = kiln::compile(c.model, {.backend = backend, .mode = mode, .fullgraph = true});
    const std::string how = name + " compiled (" + std::string(kiln::mode_name(mode)) + ")";
    check(compiled(c.inputs), c.expected, how, tolerance);
    check(compiled(c.inputs), c.expected, how + ", second call", tolerance);
  }
}

}  // namespace

BOOST_AUTO_TEST_SUITE(recurrent)
BOOST_AUTO_TEST_CASE(lstm_bidirectional_lengths_peepholes) { check_case("lstm_bidirectional_lengths_peepholes"); }
BOOST_AUTO_TEST_CASE(lstm_reverse_batch_first_clip_coupled) { check_case("lstm_reverse_batch_first_clip_coupled"); }
BOOST_AUTO_TEST_CASE(lstm_activations) { check_case("lstm_activations"); }
BOOST_AUTO_TEST_CASE(gru_bidirectional_lengths) { check_case("gru_bidirectional_lengths"); }
BOOST_AUTO_TEST_CASE(gru_linear_before_reset_reverse) { check_case("gru_linear_before_reset_reverse"); }
BOOST_AUTO_TEST_CASE(rnn_bidirectional_activations) { check_case("rnn_bidirectional_activations"); }
BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(audio)
// Logs of small powers amplify float rounding: compared at 1e-4.
BOOST_AUTO_TEST_CASE(log_mel_front_end) { check_case("log_mel_front_end", 1e-4); }
BOOST_AUTO_TEST_CASE(dft_inverse_padded) { check_case("dft_inverse_padded"); }
BOOST_AUTO_TEST_CASE(dft_onesided_axis2) { check_case("dft_onesided_axis2"); }
BOOST_AUTO_TEST_CASE(stft_complex_no_window) { check_case("stft_complex_no_window"); }
BOOST_AUTO_TEST_CASE(windows_scale_a_signal) { check_case("windows_scale_a_signal"); }
BOOST_AUTO_TEST_SUITE_END()
