#define BOOST_TEST_MODULE bench
#include <boost/test/unit_test.hpp>

#include "cli_runner.h"

// `kiln bench`: its statistics and output check (compiled in from tools/bench),
// and the built binary run as a user would (KILN_BINARY, set by meson).

#include "../tools/bench/agreement.h"
#include "../tools/bench/rotation.h"
#include "../tools/bench/stats.h"

#include <kiln/error.h>
#include <kiln/models.h>
#include <kiln/tensor.h>

#include <nlohmann/json.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

namespace bench = kiln::tools::bench;
namespace fs = std::filesystem;

namespace {

using cli_test::has;
using cli_test::Result;
using cli_test::source_root;
using cli_test::run_kiln;

std::string read_text(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  BOOST_REQUIRE_MESSAGE(in.good(), "cannot read " << path);
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// A fresh folder per test, removed afterwards.
struct ScratchDir {
  fs::path path = fs::temp_directory_path() / ("kiln-test-bench-" + std::to_string(::getpid()));
  ScratchDir() {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~ScratchDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

// The CSV as one map per row, by column name (kiln bench quotes no field of these runs).
std::vector<std::map<std::string, std::string>> read_csv(const fs::path& path) {
  std::istringstream in(read_text(path));
  auto split = [](const std::string& line) {
    std::vector<std::string> fields;
    std::string field;
    std::istringstream s(line);
    while (std::getline(s, field, ',')) fields.push_back(field);
    if (!line.empty() && line.back() == ',') fields.emplace_back();
    return fields;
  };
  std::string line;
  std::getline(in, line);
  const std::vector<std::string> header = split(line);
  std::vector<std::map<std::string, std::string>> rows;
  while (std::getline(in, line)) {
    const std::vector<std::string> fields = split(line);
    BOOST_REQUIRE_EQUAL(fields.size(), header.size());
    std::map<std::string, std::string> row;
    for (std::size_t i = 0; i < header.size(); ++i) row[header[i]] = fields[i];
    rows.push_back(std::move(row));
  }
  return rows;
}

std::size_t count_of(const std::string& text, const std::string& what) {
  std::size_t n = 0;
  for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) ++n;
  return n;
}

}  // namespace

// ---- statistics --------------------------------------------------------------

BOOST_AUTO_TEST_CASE(summary_of_an_odd_count_takes_the_middle_value) {
  const std::vector<double> samples{5, 1, 4, 2, 3};
  const bench::Summary s = bench::summarize(samples);
  BOOST_TEST(s.count == 5u);
  BOOST_TEST(s.median == 3.0);
  BOOST_TEST(s.mean == 3.0);
  BOOST_TEST(s.min == 1.0);
  BOOST_TEST(s.max == 5.0);
}

BOOST_AUTO_TEST_CASE(summary_of_an_even_count_averages_the_two_middle_values) {
  const std::vector<double> samples{10, 1, 7, 2};
  const bench::Summary s = bench::summarize(samples);
  BOOST_TEST(s.median == 4.5);
  BOOST_TEST(s.mean == 5.0);
  BOOST_TEST(s.min == 1.0);
  BOOST_TEST(s.max == 10.0);
  const std::vector<double> one{2.5};
  BOOST_TEST(bench::summarize(one).median == 2.5);
}

BOOST_AUTO_TEST_CASE(summary_of_nothing_is_an_error) {
  BOOST_CHECK_THROW(bench::summarize(std::vector<double>{}), kiln::Error);
}

BOOST_AUTO_TEST_CASE(geometric_mean_of_ratios) {
  BOOST_TEST(bench::geometric_mean(std::vector<double>{2, 8}) == 4.0, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(bench::geometric_mean(std::vector<double>{0.5, 2}) == 1.0, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(bench::geometric_mean(std::vector<double>{1.5}) == 1.5, boost::test_tools::tolerance(1e-12));
  BOOST_TEST(bench::geometric_mean(std::vector<double>{1, 10, 100}) == 10.0, boost::test_tools::tolerance(1e-12));
  BOOST_CHECK_THROW(bench::geometric_mean(std::vector<double>{}), kiln::Error);
  BOOST_CHECK_THROW(bench::geometric_mean(std::vector<double>{1, 0}), kiln::Error);
  BOOST_CHECK_THROW(bench::geometric_mean(std::vector<double>{-2, 2}), kiln::Error);
}

// ---- the output check ----------------------------------------------------------

BOOST_AUTO_TEST_CASE(outputs_agree_within_a_tolerance_relative_to_their_magnitude) {
  const auto eager = kiln::Tensor::from_f32({4}, {100, -50, 0, 1});
  const auto close = kiln::Tensor::from_f32({4}, {100.05f, -50, 0, 1});
  const bench::Agreement ok = bench::compare_outputs({eager}, {close}, 1e-3);
  BOOST_TEST(ok.matches);
  BOOST_TEST(ok.scale == 100.0);
  BOOST_TEST(ok.max_abs_diff == 0.05, boost::test_tools::tolerance(1e-3));

  const auto far = kiln::Tensor::from_f32({4}, {100, -50, 0.5f, 1});
  const bench::Agreement bad = bench::compare_outputs({eager}, {far}, 1e-3);
  BOOST_TEST(!bad.matches);
  BOOST_TEST(bad.problem.find("exceeds") != std::string::npos);
}

BOOST_AUTO_TEST_CASE(outputs_disagree_on_shape_count_nan_and_integer_values) {
  const auto a = kiln::Tensor::from_f32({2}, {1, 2});
  BOOST_TEST(!bench::compare_outputs({a}, {kiln::Tensor::from_f32({1, 2}, {1, 2})}, 1e-3).matches);
  BOOST_TEST(!bench::compare_outputs({a}, {a, a}, 1e-3).matches);
  const bench::Agreement nan = bench::compare_outputs(
      {a}, {kiln::Tensor::from_f32({2}, {1, std::numeric_limits<float>::quiet_NaN()})}, 1e-3);
  BOOST_TEST(!nan.matches);
  BOOST_TEST(std::isinf(nan.max_abs_diff));
  const auto labels = kiln::Tensor::from_i64({3}, {1, 2, 3});
  BOOST_TEST(bench::compare_outputs({labels}, {kiln::Tensor::from_i64({3}, {1, 2, 3})}, 1e-3).matches);
  BOOST_TEST(!bench::compare_outputs({labels}, {kiln::Tensor::from_i64({3}, {1, 2, 4})}, 1e-3).matches);
  // All-zero outputs still allow float rounding (the absolute floor).
  const auto zeros = kiln::Tensor::from_f32({2}, {0, 0});
  BOOST_TEST(bench::compare_outputs({zeros}, {kiln::Tensor::from_f32({2}, {1e-7f, 0})}, 1e-3).matches);
}

// ---- detection lists --------------------------------------------------------------

namespace {

// A detector's final list as three outputs: boxes [N, 4], scores [N], labels [N].
struct Detections {
  std::vector<std::array<float, 4>> boxes;
  std::vector<float> scores;
  std::vector<std::int64_t> labels;

  void add(std::array<float, 4> box, float score, std::int64_t label) {
    boxes.push_back(box);
    scores.push_back(score);
    labels.push_back(label);
  }
  void erase(std::size_t i) {
    boxes.erase(boxes.begin() + static_cast<std::ptrdiff_t>(i));
    scores.erase(scores.begin() + static_cast<std::ptrdiff_t>(i));
    labels.erase(labels.begin() + static_cast<std::ptrdiff_t>(i));
  }
  // As a model would return them, with an extra element-wise output first.
  std::vector<kiln::Tensor> outputs(const kiln::Tensor& extra) const {
    std::vector<float> flat;
    for (const auto& b : boxes) flat.insert(flat.end(), b.begin(), b.end());
    const auto n = static_cast<std::int64_t>(scores.size());
    return {extra, kiln::Tensor::from_f32({n, 4}, flat), kiln::Tensor::from_f32({n}, scores),
            kiln::Tensor::from_i64({n}, labels)};
  }
};

const bench::DetectionList kList{.boxes = 1, .scores = 2, .labels = 3};
const kiln::Tensor kExtra = kiln::Tensor::from_f32({2}, {1, 2});

// Five well-separated detections and a tail of five whose scores tie at
// 0.0110 to within 1e-7: the list is cut at its 10th score, as a detector's
// top-k is.
Detections sample_detections() {
  Detections d;
  d.add({10, 10, 50, 60}, 0.9f, 1);
  d.add({100, 20, 180, 90}, 0.7f, 3);
  d.add({12, 11, 49, 61}, 0.5f, 3);
  d.add({200, 200, 300, 310}, 0.3f, 1);
  d.add({5, 150, 40, 200}, 0.1f, 7);
  for (int i = 0; i < 5; ++i)
    d.add({20.0f * i, 250, 20.0f * i + 15, 270}, 0.0110f + 1e-8f * static_cast<float>(i), 2);
  return d;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_detection_list_is_found_from_the_task_and_the_outputs_description) {
  using kiln::DType;
  const std::vector<kiln::TensorSpec> list{{"boxes", DType::f32, {-1, 4}}, {"scores", DType::f32, {-1}},
                                           {"labels", DType::i64, {-1}}};
  const auto found = bench::find_detection_list("detection", list);
  BOOST_REQUIRE(found.has_value());
  BOOST_TEST(found->boxes == 0u);
  BOOST_TEST(found->scores == 1u);
  BOOST_TEST(found->labels == 2u);
  BOOST_TEST(!bench::find_detection_list("classification", list).has_value());
  // Fixed-size outputs (DETR's per-query boxes) are compared element by element.
  const std::vector<kiln::TensorSpec> fixed{{"boxes", DType::f32, {100, 4}}, {"scores", DType::f32, {100}},
                                            {"labels", DType::i64, {100}}};
  BOOST_TEST(!bench::find_detection_list("detection", fixed).has_value());

  // The built-in detectors: SSDLite returns a list, DETR per-query tensors.
  const kiln::Model ssdlite = kiln::models::build("ssdlite320_mobilenet_v3_large", {.image_size = 64});
  const auto ssd = bench::find_detection_list(ssdlite.task(), ssdlite.outputs());
  BOOST_REQUIRE(ssd.has_value());
  BOOST_TEST(ssdlite.outputs()[ssd->scores].name == "scores");
  const kiln::Model detr = kiln::models::build("detr_resnet50", {.image_size = 64});
  BOOST_TEST(detr.task() == "detection");
  BOOST_TEST(!bench::find_detection_list(detr.task(), detr.outputs()).has_value());
}

BOOST_AUTO_TEST_CASE(detections_in_another_order_with_rounding_differences_match) {
  const Detections eager = sample_detections();
  Detections compiled;
  for (std::size_t i : {2u, 0u, 1u, 4u, 3u, 9u, 8u, 7u, 6u, 5u})
    compiled.add(eager.boxes[i], eager.scores[i] + 1e-7f, eager.labels[i]);
  compiled.boxes[0][2] += 1e-4f;
  const bench::Agreement a = bench::compare_outputs(eager.outputs(kExtra), compiled.outputs(kExtra), 1e-3, kList);
  BOOST_TEST(a.matches, a.problem);
  BOOST_TEST(a.tied_detections == 0);
  BOOST_TEST(a.max_abs_diff > 0);
  BOOST_TEST(a.max_abs_diff < 1e-3);
}

BOOST_AUTO_TEST_CASE(near_tied_detections_at_the_cut_off_may_differ) {
  const Detections eager = sample_detections();
  // Rounding lifted a sixth tied candidate above two of the tail: the top-k
  // cut keeps it and drops one of the tail.
  Detections compiled = eager;
  compiled.erase(7);
  compiled.add({0, 0, 7, 7}, 0.0110f + 5e-8f, 2);
  const bench::Agreement a = bench::compare_outputs(eager.outputs(kExtra), compiled.outputs(kExtra), 1e-3, kList);
  BOOST_TEST(a.matches, a.problem);
  BOOST_TEST(a.tied_detections == 2);
  // A score threshold cut: one list keeps a tied detection the other drops.
  Detections shorter = eager;
  shorter.erase(9);
  const bench::Agreement t = bench::compare_outputs(eager.outputs(kExtra), shorter.outputs(kExtra), 1e-3, kList);
  BOOST_TEST(t.matches, t.problem);
  BOOST_TEST(t.tied_detections == 1);
  // A tie-break swap: two overlapping candidates with tied scores, NMS keeps
  // one in eager and the other (8 px to the right, IoU 0.64) when compiled.
  Detections swapped = eager;
  swapped.boxes[2] = {20, 11, 57, 61};
  swapped.scores[2] += 1e-7f;
  const bench::Agreement w = bench::compare_outputs(eager.outputs(kExtra), swapped.outputs(kExtra), 1e-3, kList);
  BOOST_TEST(w.matches, w.problem);
  BOOST_TEST(w.tied_detections == 2);
}

BOOST_AUTO_TEST_CASE(a_wrong_box_score_or_label_fails) {
  const Detections eager = sample_detections();
  auto check_fails = [&](const Detections& compiled, const char* what) {
    BOOST_TEST_CONTEXT(what) {
      const bench::Agreement a = bench::compare_outputs(eager.outputs(kExtra), compiled.outputs(kExtra), 1e-3, kList);
      BOOST_TEST(!a.matches);
      BOOST_TEST(a.problem.find("detections differ") != std::string::npos, a.problem);
    }
  };
  Detections moved = eager;
  moved.boxes[1][0] += 2.0f;  // 2 px off, IoU still 0.97: beyond 1e-3 x 310 px
  check_fails(moved, "a box moved");
  Detections rescored = eager;
  rescored.scores[3] = 0.31f;
  check_fails(rescored, "a score changed");
  Detections relabelled = eager;
  relabelled.labels[0] = 2;
  check_fails(relabelled, "a label changed");
  Detections missing = eager;
  missing.erase(1);  // far above the cut-off: not a tie
  check_fails(missing, "a confident detection missing");
  // A tied tail entry replaced by a new detection scored well above the cut-off.
  Detections intruder = eager;
  intruder.erase(9);
  intruder.add({60, 60, 90, 90}, 0.2f, 5);
  check_fails(intruder, "a new confident detection");
  // Detections are checked, and so is every other output, element by element.
  const bench::Agreement extra = bench::compare_outputs(
      eager.outputs(kExtra), eager.outputs(kiln::Tensor::from_f32({2}, {1, 2.5f})), 1e-3, kList);
  BOOST_TEST(!extra.matches);
  BOOST_TEST(extra.problem.find("exceeds") != std::string::npos);
  BOOST_TEST(bench::compare_outputs(eager.outputs(kExtra), eager.outputs(kExtra), 1e-3, kList).matches);
}

// ---- the method ------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(every_mode_takes_every_position_equally_often) {
  for (std::size_t modes : {1u, 2u, 3u}) {
    std::vector<std::vector<int>> seen(modes, std::vector<int>(modes, 0));  // [mode][position]
    for (std::size_t round = 0; round < 3 * modes; ++round) {
      const std::vector<std::size_t> order = bench::rotated_order(modes, round);
      BOOST_REQUIRE_EQUAL(order.size(), modes);
      BOOST_TEST(std::set<std::size_t>(order.begin(), order.end()).size() == modes);  // each once per round
      for (std::size_t position = 0; position < modes; ++position) ++seen[order[position]][position];
    }
    for (const auto& positions : seen)
      for (int count : positions) BOOST_TEST(count == 3);
  }
}

BOOST_AUTO_TEST_CASE(the_task_of_a_built_in_model_is_known_without_building_it) {
  for (const std::string& name : kiln::models::names())
    BOOST_TEST(kiln::models::task_of(name) == kiln::models::build(name, {.image_size = 64}).task(), name);
  BOOST_TEST(kiln::models::task_of("ssdlite320_mobilenet_v3") == "detection");
  BOOST_CHECK_THROW(kiln::models::task_of("no_such_model"), kiln::Error);
}

// `kiln tune` and `kiln bench` both take a model's usual size when none is
// given, so tuning records are for the shapes the benchmark runs (SSDLite at
// 320 once got no record: the tuning ran it at 224).
BOOST_AUTO_TEST_CASE(every_command_takes_one_usual_image_size_per_model) {
  for (const std::string& name : kiln::models::names())
    BOOST_TEST(kiln::models::usual_image_size(name) == (name == "ssdlite320_mobilenet_v3_large" ? 320 : 224), name);
  BOOST_TEST(kiln::models::usual_image_size("ssdlite320_mobilenet_v3") == 320);
  try {
    kiln::models::usual_image_size("no_such_model");
    BOOST_FAIL("expected NotFound");
  } catch (const kiln::Error& e) {
    BOOST_TEST((e.kind() == kiln::ErrorKind::NotFound));
  }
}

// ---- the command -----------------------------------------------------------------

BOOST_AUTO_TEST_CASE(quick_run_writes_every_format_with_consistent_figures) {
  ScratchDir out;
  const Result r = run_kiln("bench --quick --output-dir '" + out.path.string() + "'");
  BOOST_REQUIRE_EQUAL(r.exit_code, 0);
  // Not a terminal: one progress line per finished cell.
  BOOST_TEST(has(r, "kiln bench: [12/12] mobilenet_v2, batch 2, reduce-overhead"));
  BOOST_TEST(has(r, "| resnet18 | classification | 1 | 64 |"));
  BOOST_TEST(has(r, "| mobilenet_v2 | classification | 2 | 64 |"));
  BOOST_TEST(has(r, "Geometric mean of the speed-up over eager"));
  BOOST_TEST(has(r, "device: llvmpipe"));

  // CSV: 2 models x 2 batches x 3 modes, all measured and matching eager.
  const auto rows = read_csv(out.path / "bench.csv");
  BOOST_REQUIRE_EQUAL(rows.size(), 12u);
  std::map<std::string, double> eager_mean;  // by "model/batch"
  for (const auto& row : rows)
    if (row.at("mode") == "eager") eager_mean[row.at("model") + "/" + row.at("batch")] = std::stod(row.at("mean_ms"));
  BOOST_TEST(eager_mean.size() == 4u);
  for (const auto& row : rows) {
    BOOST_TEST_CONTEXT(row.at("model") << " batch " << row.at("batch") << " " << row.at("mode")) {
      BOOST_TEST(row.at("status") == "ok");
      BOOST_TEST(row.at("image_size") == "64");
      BOOST_TEST(row.at("iters") == "3");
      const double mean = std::stod(row.at("mean_ms"));
      BOOST_TEST(std::stod(row.at("first_call_ms")) > 0);
      BOOST_TEST(mean > 0);
      BOOST_TEST(std::stod(row.at("min_ms")) <= std::stod(row.at("median_ms")));
      BOOST_TEST(std::stod(row.at("median_ms")) <= std::stod(row.at("max_ms")));
      BOOST_TEST(std::stod(row.at("min_ms")) <= mean);
      BOOST_TEST(std::stod(row.at("peak_device_bytes")) > 0);
      BOOST_TEST(std::stoi(row.at("dispatches_per_run")) > 0);
      if (row.at("mode") == "eager") {
        BOOST_TEST(row.at("speedup").empty());
        BOOST_TEST(row.at("cold_compile_ms").empty());
        continue;
      }
      const double expected = eager_mean.at(row.at("model") + "/" + row.at("batch")) / mean;
      BOOST_TEST(std::stod(row.at("speedup")) == expected, boost::test_tools::tolerance(1e-4));
      BOOST_TEST(std::stod(row.at("cold_compile_ms")) > 0);
      BOOST_TEST(std::stod(row.at("warm_compile_ms")) > 0);
      // Cold compiles everything; warm reads all of it back from the disk cache.
      const int compiled_cold = std::stoi(row.at("kernels_compiled_cold"));
      BOOST_TEST(compiled_cold > 0);
      BOOST_TEST(std::stoi(row.at("kernels_from_disk_warm")) == compiled_cold);
      BOOST_TEST(std::stoi(row.at("kernels_compiled_warm")) == 0);
      BOOST_TEST(std::stod(row.at("max_abs_diff")) <= 1e-3 * std::stod(row.at("output_scale")) + 1e-6);
    }
  }

  // JSON: the same cells, a metadata block, geometric means per mode and batch.
  const nlohmann::json doc = nlohmann::json::parse(read_text(out.path / "bench.json"));
  BOOST_TEST(doc.at("metadata").at("backend") == "vulkan");
  BOOST_TEST(doc.at("metadata").at("iters") == 3);
  // The sample photograph the build-tree kiln finds in the source tree.
  BOOST_TEST(doc.at("metadata").at("image") == source_root() + "/data/images/chelsea.png");
  BOOST_TEST(doc.at("metadata").at("command").get<std::string>().find("kiln bench --models resnet18,mobilenet_v2") == 0u);
  BOOST_REQUIRE_EQUAL(doc.at("cells").size(), 12u);
  for (const auto& cell : doc.at("cells")) {
    BOOST_TEST(cell.at("host_ms").at("count") == 3);
    BOOST_TEST(cell.at("host_ms").at("mean").get<double>() > 0);
    BOOST_TEST(cell.at("status") == "ok");
  }
  // 2 compiled modes x (batch 1, batch 2, all batches).
  BOOST_REQUIRE_EQUAL(doc.at("geomean_speedups").size(), 6u);
  for (const auto& g : doc.at("geomean_speedups")) {
    BOOST_TEST(g.at("geomean").get<double>() > 0);
    BOOST_TEST(g.at("cells") == (g.at("batch").is_null() ? 4 : 2));
  }

  // SVG: a document with one bar (with its tooltip) per compiled cell.
  const std::string svg = read_text(out.path / "bench.svg");
  BOOST_TEST(svg.rfind("<?xml", 0) == 0u);
  BOOST_TEST(has({0, svg}, "<svg xmlns=\"http://www.w3.org/2000/svg\""));
  BOOST_TEST(svg.ends_with("</svg>\n"));
  BOOST_TEST(count_of(svg, "<title>") == 8u);
  BOOST_TEST(count_of(svg, "<text") == count_of(svg, "</text>"));
  BOOST_TEST(has({0, svg}, "eager = 1x"));

  // The markdown file is the table printed on stdout.
  const std::string md = read_text(out.path / "bench.md");
  BOOST_TEST(has(r, md.substr(0, md.find("| resnet18"))));
  BOOST_TEST(count_of(md, "| classification |") == 4u);
  // Nothing left behind: outputs were written atomically.
  std::size_t files = 0;
  for ([[maybe_unused]] const auto& entry : fs::directory_iterator(out.path)) ++files;
  BOOST_TEST(files == 4u);
}

BOOST_AUTO_TEST_CASE(a_model_that_takes_one_image_at_a_time_is_skipped_at_larger_batches) {
  const Result r = run_kiln("bench --models ssdlite320_mobilenet_v3_large --batch 2 --image-size 64 --iters 1");
  BOOST_TEST(r.exit_code == 0);
  BOOST_TEST(has(r, "ssdlite320_mobilenet_v3_large, batch 2, every mode: skipped: "));
  BOOST_TEST(has(r, "| ssdlite320_mobilenet_v3_large | detection | 2 | 64 | skipped |"));
}

BOOST_AUTO_TEST_CASE(a_compiled_output_that_differs_from_eager_fails_the_run_loudly) {
  // A tolerance far below float rounding: folding batch norm changes the
  // last bits, so the compiled logits differ from eager's beyond it.
  ScratchDir out;
  const Result r = run_kiln("bench --models resnet18 --image-size 32 --batch 1 --iters 1 --warmup 0 --modes eager,default "
                        "--tolerance 1e-12 --output-dir '" + out.path.string() + "'");
  BOOST_TEST(r.exit_code == 1);
  BOOST_TEST(has(r, "**WRONG OUTPUT**"));
  BOOST_TEST(has(r, "FAILED: 1 cell(s) gave outputs that differ from eager"));
  const auto rows = read_csv(out.path / "bench.csv");
  BOOST_REQUIRE_EQUAL(rows.size(), 2u);
  BOOST_TEST(rows[1].at("status") == "mismatch");
  BOOST_TEST(std::stod(rows[1].at("max_abs_diff")) > 1e-6);
}

// Without eager, speed-ups are over the first mode given: the table, the
// geometric means and the chart compare the compiled modes with it.
BOOST_AUTO_TEST_CASE(without_eager_the_first_mode_is_the_baseline) {
  ScratchDir out;
  const Result r = run_kiln("bench --models resnet18 --image-size 32 --batch 1 --iters 2 --warmup 0 "
                            "--modes default,reduce-overhead --output-dir '" + out.path.string() + "'");
  BOOST_TEST(r.exit_code == 0, r.output);
  BOOST_TEST(has(r, "| default ms | reduce-overhead ms | speed-up |"), r.output);
  BOOST_TEST(has(r, "Geometric mean of the speed-up over default"), r.output);
  BOOST_TEST(has(r, "| reduce-overhead | "), r.output);
  const auto rows = read_csv(out.path / "bench.csv");
  BOOST_REQUIRE_EQUAL(rows.size(), 2u);
  BOOST_TEST(rows[0].at("speedup").empty());
  BOOST_TEST(std::stod(rows[1].at("speedup")) > 0.0);
  std::ifstream chart(out.path / "bench.svg");
  const std::string svg((std::istreambuf_iterator<char>(chart)), std::istreambuf_iterator<char>());
  BOOST_TEST(svg.find("speed-up over default") != std::string::npos);
  BOOST_TEST(svg.find("default = 1x") != std::string::npos);
  BOOST_TEST(svg.find("no eager time") == std::string::npos);
  BOOST_TEST(svg.find("<title>resnet18, batch 1, reduce-overhead</title>") != std::string::npos);  // a bar
}

BOOST_AUTO_TEST_CASE(bad_arguments_exit_2_with_a_message) {
  const std::pair<const char*, const char*> cases[] = {
      {"bench --models resnet18,no_such_model", "unknown model 'no_such_model'"},
      {"bench --models resnet18 --modes eager,fastest", "unknown mode 'fastest'"},
      {"bench --models resnet18 --batch 1,0", "batch sizes must be > 0, got 0"},
      {"bench --models resnet18 --batch=-4", "batch sizes must be > 0, got -4"},
      {"bench --models resnet18 --iters 0", "--iters must be > 0"},
      {"bench --models resnet18 --warmup=-1", "--warmup must be >= 0"},
      {"bench --models resnet18 --image no/such/image.png", "cannot read image 'no/such/image.png'"},
      {"bench --models resnet18 --backend no_such_backend", "unknown backend 'no_such_backend'"},
      {"bench --models resnet18 --device 99", "no vulkan device with index 99"},
      {"bench --task painting", "no model of task 'painting' (tasks: classification, segmentation, detection)"},
      // Checked before the benchmark runs, not when its results are written.
      {"bench --models resnet18 --output-dir /proc/self", "cannot write in the output folder '/proc/self'"},
  };
  for (const auto& [args, message] : cases) {
    BOOST_TEST_CONTEXT(args) {
      const Result r = run_kiln(args);
      BOOST_TEST(r.exit_code == 2);
      BOOST_TEST(has(r, "kiln: error: "));
      BOOST_TEST(has(r, message));
    }
  }
}

BOOST_AUTO_TEST_CASE(help_lists_the_options) {
  const Result r = run_kiln("bench --help");
  BOOST_TEST(r.exit_code == 0);
  for (const char* option : {"--models", "--task", "--batch", "--modes", "--iters", "--warmup", "--image",
                             "--image-size", "--backend", "--device", "--output-dir", "--quick"})
    BOOST_TEST(has(r, option), option);
}
