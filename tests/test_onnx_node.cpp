#define BOOST_TEST_MODULE onnx_node
#define BOOST_TEST_NO_MAIN  // main() below: exit 77 without test data, own flags
#include <boost/test/unit_test.hpp>

// ONNX's own backend node tests (Debian's libonnx-testdata): every test whose
// model kiln imports ("claimed") runs on the reference implementation and, when
// some of its nodes lower to kernels, compiled on Vulkan (graph breaks run on
// the host), against the expected outputs.
//
// tests/onnx_node_pass_list.txt records every passing "<test> reference" and
// "<test> vulkan" combination: a listed one that fails is a regression (the
// suite fails); a passing one that is not listed is printed with a hint.
// Regenerate the list with tests/update_onnx_pass_list.sh (this binary with
// --update-pass-list).
//
// kiln's IR takes as attributes what ONNX passes as shape-like input tensors
// (Reshape's shape, Slice's starts, ...). Exporters leave those as
// initializers; the node tests make them graph inputs. The runner bakes such
// inputs into initializers from the test data, so the importer sees what a
// real export gives it, and feeds every other input at run time.

#include <kiln/float16.h>
#include <kiln/kiln.h>
#include <kiln/onnx.h>

#include "graph/ir.h"
#include "graph/op_registry.h"
#include "src/base/check.h"
#include "src/lower/lower.h"
#include "src/runtime/device_pool.h"
#include "src/runtime/internal_access.h"

#ifdef KILN_HAVE_ONNX
#include <onnx/onnx_pb.h>  // defines ONNX_API, then includes onnx-ml.pb.h
#endif

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

namespace fs = std::filesystem;

namespace {

// ---- configuration ----------------------------------------------------------

constexpr const char* kDefaultTestDataDir = "/usr/share/libonnx-testdata/data/node";
fs::path test_data_dir() {
  const char* dir = std::getenv("KILN_ONNX_NODE_DATA");
  return dir != nullptr && *dir != '\0' ? fs::path(dir) : fs::path(kDefaultTestDataDir);
}

fs::path pass_list_path() {
  const char* root = std::getenv("KILN_SOURCE_ROOT");
  const fs::path base = root != nullptr && *root != '\0' ? fs::path(root) / "tests" : fs::path(__FILE__).parent_path();
  return base / "onnx_node_pass_list.txt";
}

// ---- comparing tensors ------------------------------------------------------

struct Tolerance {
  double rtol = 1e-3;
  double atol = 1e-5;
};


bool close_enough(double got, double want, const Tolerance& tol) {
  if (std::isnan(want)) return std::isnan(got);
  if (std::isinf(want)) return got == want;
  return std::fabs(got - want) <= tol.atol + tol.rtol * std::fabs(want);
}

std::vector<double> as_doubles(const kiln::Tensor& t) {
  std::vector<double> out;
  out.reserve(static_cast<std::size_t>(t.numel()));
  switch (t.dtype()) {
    case kiln::DType::f32:
      for (float v : t.values<float>()) out.push_back(v);
      break;
    case kiln::DType::f16:
      for (std::uint16_t v : t.values<std::uint16_t>()) out.push_back(kiln::f16_value(v));
      break;
    case kiln::DType::bf16:
      for (std::uint16_t v : t.values<std::uint16_t>()) out.push_back(kiln::bf16_value(v));
      break;
    case kiln::DType::i32:
      for (std::int32_t v : t.values<std::int32_t>()) out.push_back(v);
      break;
    case kiln::DType::i64:
      for (std::int64_t v : t.values<std::int64_t>()) out.push_back(static_cast<double>(v));
      break;
    case kiln::DType::u8:
      for (std::uint8_t v : t.values<std::uint8_t>()) out.push_back(v);
      break;
    case kiln::DType::boolean:
      for (std::uint8_t v : t.values<std::uint8_t>()) out.push_back(v != 0 ? 1.0 : 0.0);
      break;
  }
  return out;
}


// nullopt if `got` matches `want` (same dtype and shape; floats within
// tolerance, NaN where NaN is expected; everything else exactly), else what
// differs, with the first differing element.
std::optional<std::string> mismatch(const kiln::Tensor& got, const kiln::Tensor& want, const Tolerance& tol = {}) {
  std::ostringstream why;
  if (got.dtype() != want.dtype()) {
    why << "dtype " << kiln::dtype_name(got.dtype()) << ", expected " << kiln::dtype_name(want.dtype());
    return why.str();
  }
  if (got.shape() != want.shape()) {
    why << "shape " << kiln::shape_str(got.shape()) << ", expected " << kiln::shape_str(want.shape());
    return why.str();
  }
  const std::vector<double> g = as_doubles(got);
  const std::vector<double> w = as_doubles(want);
  const bool floating = kiln::is_float(want.dtype());
  // i64 is compared as integers: values beyond 2^53 would round together.
  const bool is_i64 = want.dtype() == kiln::DType::i64;
  std::int64_t differing = 0;
  std::size_t first = 0;
  for (std::size_t i = 0; i < w.size(); ++i) {
    const bool same = floating ? close_enough(g[i], w[i], tol)
                    : is_i64  ? got.values<std::int64_t>()[i] == want.values<std::int64_t>()[i]
                              : g[i] == w[i];
    if (!same && differing++ == 0) first = i;
  }
  if (differing == 0) return std::nullopt;
  why.precision(9);
  why << differing << " of " << w.size() << " elements differ; first at flat index " << first << ": got " << g[first]
      << ", expected " << w[first];
  if (floating) why << " (rtol " << tol.rtol << ", atol " << tol.atol << ")";
  return why.str();
}

// ---- the pass list ----------------------------------------------------------

const char* const kBackends[] = {"reference", "vulkan"};

using PassList = std::set<std::pair<std::string, std::string>>;  // (test, "reference" | "vulkan")

struct PassListFile {
  bool found = false;
  PassList entries;
  std::vector<std::string> errors;  // malformed lines, with their line numbers
};

PassListFile read_pass_list(const fs::path& path) {
  PassListFile file;
  std::ifstream in(path);
  if (!in) return file;
  file.found = true;
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream fields(line);
    std::string test, backend, extra;
    fields >> test >> backend;
    const bool known_backend = std::find(std::begin(kBackends), std::end(kBackends), backend) != std::end(kBackends);
    if (test.empty() || !known_backend || (fields >> extra)) {
      file.errors.push_back(path.string() + ":" + std::to_string(number) + ": expected '<test> reference|vulkan', got '" +
                            line + "'");
      continue;
    }
    if (!file.entries.emplace(test, backend).second)
      file.errors.push_back(path.string() + ":" + std::to_string(number) + ": duplicate entry '" + line + "'");
  }
  return file;
}

void write_pass_list(const fs::path& path, const PassList& entries) {
  std::ofstream out(path);
  KILN_CHECK(out.good(), kiln::ErrorKind::Io, "cannot write the pass list " + path.string());
  out << "# ONNX backend node tests (libonnx-testdata) that pass, one '<test> <backend>' per line.\n"
      << "# test_onnx_node fails if a listed one stops passing. Regenerate with\n"
      << "# tests/update_onnx_pass_list.sh after a change makes more tests pass.\n";
  for (const auto& [test, backend] : entries) out << test << ' ' << backend << '\n';
}

// ---- running one node test --------------------------------------------------

struct Outcome {
  bool ran = false;
  bool passed = false;
  std::string detail{};  // why it failed or did not run
};

struct NodeTestResult {
  bool claimed = false;
  std::string not_claimed_reason;        // the importer's error (first line)
  std::vector<std::string> missing_ops;  // ops the importer does not list as supported
  std::string skipped;                   // claimed but not run, and why
  int baked_inputs = 0;
  bool graph_breaks = false;  // some nodes run on the host when compiled for Vulkan
  int vulkan_dispatches = 0;  // kernels the compiled model ran per call (0: views only)
  std::string vulkan_not_run{};  // why Vulkan was not run: the first node that does not lower
  Outcome reference;
  Outcome vulkan;
  double seconds = 0;
};

struct Suite {
  fs::path data_dir;
  PassListFile pass_list;
  std::optional<std::string> vulkan_unavailable;  // why Vulkan is not run here
  std::shared_ptr<kiln::runtime::DeviceContext> vulkan_device;  // one device for every test
  bool update = false;
  std::vector<std::string> tests;  // every test folder, sorted
  std::map<std::string, NodeTestResult> results;
};

Suite& suite() {
  static Suite s;
  return s;
}

std::string first_line(const std::string& text, std::size_t max_chars = 240) {
  std::string line = text.substr(0, text.find('\n'));
  if (line.size() > max_chars) line = line.substr(0, max_chars) + "...";
  return line;
}

bool listed(const std::string& test, const std::string& backend) {
  return suite().pass_list.entries.count({test, backend}) != 0;
}

#ifdef KILN_HAVE_ONNX

// Data sets with more elements than this (inputs and outputs together) are
// skipped: the reference implementation is loop-by-loop and CI has 2 cores.
// KILN_ONNX_NODE_MAX_ELEMENTS overrides the limit.
std::int64_t max_elements_per_data_set() {
  const char* limit = std::getenv("KILN_ONNX_NODE_MAX_ELEMENTS");
  return limit != nullptr && *limit != '\0' ? std::strtoll(limit, nullptr, 10) : 4'000'000;
}

std::optional<std::string> mismatch_outputs(const std::vector<kiln::Tensor>& got,
                                            const std::vector<kiln::Tensor>& want) {
  if (got.size() != want.size())
    return std::to_string(got.size()) + " outputs, expected " + std::to_string(want.size());
  for (std::size_t i = 0; i < want.size(); ++i)
    if (auto why = mismatch(got[i], want[i])) return "output " + std::to_string(i) + ": " + *why;
  return std::nullopt;
}

std::string read_file_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  KILN_CHECK(in.good(), kiln::ErrorKind::Io, "cannot read " + path.string());
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::vector<fs::path> data_sets(const fs::path& test_dir) {
  std::vector<fs::path> sets;
  for (const auto& entry : fs::directory_iterator(test_dir))
    if (entry.is_directory() && entry.path().filename().string().starts_with("test_data_set_")) sets.push_back(entry.path());
  std::sort(sets.begin(), sets.end());
  return sets;
}

// input_0.pb, input_1.pb, ... (or output_*) in index order.
std::vector<fs::path> numbered_files(const fs::path& set_dir, const std::string& prefix) {
  std::vector<fs::path> files;
  for (int i = 0;; ++i) {
    fs::path file = set_dir / (prefix + std::to_string(i) + ".pb");
    if (!fs::exists(file)) break;
    files.push_back(file);
  }
  return files;
}

// Device kernels only exist for nodes that lower; a test with none would run
// entirely on the host and say nothing about Vulkan.
struct Lowerability {
  int lowerable = 0;
  int breaks = 0;
  std::string first_reason{};  // why the first node that does not lower does not
};

Lowerability lowerability(const kiln::graph::Graph& graph) {
  Lowerability result;
  for (const kiln::graph::Node& node : graph.nodes()) {
    std::vector<kiln::graph::TensorType> inputs, outputs;
    for (kiln::graph::ValueId id : node.inputs) inputs.push_back(id < 0 ? kiln::graph::TensorType{} : graph.value(id).type);
    for (kiln::graph::ValueId id : node.outputs) outputs.push_back(graph.value(id).type);
    std::optional<std::string> reason;
    try {
      reason = kiln::lower::unsupported_reason(node, inputs, outputs);
    } catch (const kiln::Error& e) {
      reason = e.what();
    }
    ++(reason ? result.breaks : result.lowerable);
    if (reason && result.first_reason.empty()) result.first_reason = node.op + " '" + node.name + "': " + *reason;
    // Control flow's subgraphs run as compiled models of their own.
    for (const auto& subgraph : node.subgraphs) {
      const Lowerability inner = lowerability(*subgraph);
      result.lowerable += inner.lowerable;
      result.breaks += inner.breaks;
    }
  }
  return result;
}

template <class Fn> Outcome run_and_compare(Fn&& run, const std::vector<kiln::Tensor>& expected) {
  Outcome outcome{.ran = true};
  try {
    const std::optional<std::string> why = mismatch_outputs(run(), expected);
    outcome.passed = !why.has_value();
    if (why) outcome.detail = *why;
  } catch (const kiln::Error& e) {
    outcome.detail = std::string(kiln::error_kind_name(e.kind())) + ": " + first_line(e.what());
  } catch (const std::exception& e) {
    outcome.detail = "non-kiln exception (a bug): " + first_line(e.what());
  }
  return outcome;
}

// Both outcomes of one data set fold into the test's: a test passes on a
// backend only if every data set does.
void merge(Outcome& total, const Outcome& one, const std::string& set_name) {
  if (!one.ran) return;
  if (!total.ran) total = Outcome{.ran = true, .passed = true};
  if (!one.passed && total.passed) {
    total.passed = false;
    total.detail = set_name + ": " + one.detail;
  }
}

// Inputs kiln's IR takes as attributes, by op: (op type, input index).
const std::map<std::string, std::set<int>>& constant_input_positions() {
  static const std::map<std::string, std::set<int>> table = {
      {"Reshape", {1}},        {"Clip", {1, 2}},       {"Slice", {1, 2, 3, 4}},   {"Split", {1}},
      {"Squeeze", {1}},        {"Unsqueeze", {1}},     {"Expand", {1}},           {"Tile", {1}},
      {"Pad", {1, 2, 3}},      {"Resize", {1, 2, 3}},  {"Upsample", {1}},         {"CumSum", {1}},
      {"TopK", {1}},           {"ConstantOfShape", {0}}, {"Dropout", {1, 2}},     {"ReduceMean", {1}},
      {"ReduceSum", {1}},      {"ReduceMax", {1}},     {"ReduceMin", {1}},        {"ReduceProd", {1}},
      {"ReduceL1", {1}},       {"ReduceL2", {1}},      {"ReduceLogSum", {1}},     {"ReduceLogSumExp", {1}},
      {"ReduceSumSquare", {1}}, {"Trilu", {1}},
      // Sizes and frequencies of the signal ops (exports compute them from constants).
      {"HannWindow", {0}},     {"HammingWindow", {0}}, {"BlackmanWindow", {0}},   {"DFT", {1}},
      {"STFT", {1, 3}},        {"MelWeightMatrix", {0, 1, 2, 3, 4}},
  };
  return table;
}

// The graph inputs the runner bakes into initializers (see the file comment).
std::set<std::string> inputs_to_bake(const onnx::GraphProto& graph) {
  std::set<std::string> graph_inputs;
  for (const auto& input : graph.input()) graph_inputs.insert(input.name());
  std::set<std::string> bake;
  for (const auto& node : graph.node()) {
    auto it = constant_input_positions().find(node.op_type());
    if (it == constant_input_positions().end() || !node.domain().empty()) continue;
    for (int position : it->second)
      if (position < node.input_size() && graph_inputs.count(node.input(position)) != 0) bake.insert(node.input(position));
  }
  return bake;
}

std::int64_t tensor_file_elements(const fs::path& file) {
  onnx::TensorProto proto;
  if (!proto.ParseFromString(read_file_bytes(file))) return 0;  // not a TensorProto (a sequence, ...): counted as small
  std::int64_t n = 1;
  for (std::int64_t d : proto.dims()) n *= std::max<std::int64_t>(d, 0);
  return n;
}

std::vector<std::string> unsupported_op_types(const onnx::GraphProto& graph) {
  static const std::vector<std::string> supported = kiln::onnx_supported_ops();
  std::set<std::string> missing;
  for (const auto& node : graph.node())
    if (std::find(supported.begin(), supported.end(), node.op_type()) == supported.end()) missing.insert(node.op_type());
  return {missing.begin(), missing.end()};
}

// A test data file as a tensor of the model's declared type. libonnx-testdata
// stores bfloat16 tensors as UINT16 (their bits): those are read as bf16.
kiln::Tensor load_test_tensor(const fs::path& file, kiln::DType declared) {
  if (declared != kiln::DType::bf16) return kiln::load_onnx_tensor(file.string());
  onnx::TensorProto proto;
  KILN_CHECK(proto.ParseFromString(read_file_bytes(file)), kiln::ErrorKind::Corrupt, file.string() + " is not a TensorProto");
  if (proto.data_type() != onnx::TensorProto_DataType_UINT16) return kiln::load_onnx_tensor(file.string());
  proto.set_data_type(onnx::TensorProto_DataType_BFLOAT16);
  const fs::path typed = fs::temp_directory_path() / ("kiln_onnx_node_bf16_" + std::to_string(::getpid()) + ".pb");
  {
    std::ofstream out(typed, std::ios::binary);
    out << proto.SerializeAsString();
  }
  kiln::Tensor tensor = kiln::load_onnx_tensor(typed.string());
  fs::remove(typed);
  return tensor;
}

void run_data_set(const std::string& name, const fs::path& test_dir, const onnx::ModelProto& original,
                  const fs::path& set_dir, NodeTestResult& result) {
  const std::vector<fs::path> input_files = numbered_files(set_dir, "input_");
  const std::vector<fs::path> output_files = numbered_files(set_dir, "output_");

  // The runtime inputs are the graph inputs without an initializer, in order;
  // input_<i>.pb holds the i-th of them.
  onnx::ModelProto model = original;
  onnx::GraphProto& graph = *model.mutable_graph();
  std::set<std::string> initialized;
  for (const auto& init : graph.initializer()) initialized.insert(init.name());
  const std::set<std::string> bake = inputs_to_bake(graph);
  std::map<std::string, fs::path> runtime_inputs;  // name -> data file
  google::protobuf::RepeatedPtrField<onnx::ValueInfoProto> kept;
  std::size_t data_index = 0;
  for (const auto& input : graph.input()) {
    if (initialized.count(input.name()) != 0) {
      *kept.Add() = input;
      continue;
    }
    KILN_CHECK(data_index < input_files.size(), kiln::ErrorKind::NotFound,
               name + ": no test data for graph input '" + input.name() + "'");
    const fs::path& file = input_files[data_index++];
    if (bake.count(input.name()) != 0) {
      onnx::TensorProto* init = graph.add_initializer();
      KILN_CHECK(init->ParseFromString(read_file_bytes(file)), kiln::ErrorKind::Corrupt,
                 file.string() + " is not a TensorProto");
      init->set_name(input.name());
      ++result.baked_inputs;
    } else {
      runtime_inputs[input.name()] = file;
      *kept.Add() = input;
    }
  }
  graph.mutable_input()->Swap(&kept);

  std::optional<kiln::Model> imported;
  try {
    imported = kiln::load_onnx_bytes(model.SerializeAsString(), name, test_dir.string());
  } catch (const kiln::Error& e) {
    result.not_claimed_reason = std::string(kiln::error_kind_name(e.kind())) + ": " + first_line(e.what());
    result.missing_ops = unsupported_op_types(original.graph());
    return;
  } catch (const std::exception& e) {
    result.not_claimed_reason = "non-kiln exception (a bug): " + first_line(e.what());
    return;
  }
  result.claimed = true;
  const kiln::Model& kmodel = *imported;

  std::int64_t elements = 0;
  for (const auto* files : {&input_files, &output_files})
    for (const fs::path& file : *files) elements += tensor_file_elements(file);
  if (elements > max_elements_per_data_set()) {
    result.skipped = "tensors of " + set_dir.filename().string() + " hold " + std::to_string(elements) +
                     " elements (limit " + std::to_string(max_elements_per_data_set()) + ")";
    return;
  }

  // The importer may drop inputs nothing reads; feed the rest by name.
  std::vector<kiln::Tensor> inputs;
  std::vector<kiln::Tensor> expected;
  try {
    for (const kiln::TensorSpec& spec : kmodel.inputs()) {
      auto it = runtime_inputs.find(spec.name);
      KILN_CHECK(it != runtime_inputs.end(), kiln::ErrorKind::NotFound,
                 "model input '" + spec.name + "' has no test data");
      inputs.push_back(load_test_tensor(it->second, spec.dtype));
    }
    const std::vector<kiln::TensorSpec> outputs = kmodel.outputs();
    for (std::size_t i = 0; i < output_files.size(); ++i)
      expected.push_back(load_test_tensor(output_files[i], i < outputs.size() ? outputs[i].dtype : kiln::DType::f32));
  } catch (const kiln::Error& e) {
    const Outcome failed{.ran = true, .passed = false, .detail = "test data: " + first_line(e.what())};
    merge(result.reference, failed, set_dir.filename().string());
    return;
  }

  const std::string set_name = set_dir.filename().string();
  merge(result.reference,
        run_and_compare([&] { return kiln::graph::run_reference(kiln::internal::graph(kmodel), inputs); }, expected), set_name);

  const Lowerability lower = lowerability(kiln::internal::graph(kmodel));
  result.graph_breaks = result.graph_breaks || (lower.lowerable > 0 && lower.breaks > 0);
  if (lower.lowerable == 0) result.vulkan_not_run = lower.first_reason.empty() ? "no nodes" : lower.first_reason;
  if (suite().vulkan_unavailable || lower.lowerable == 0) return;
  const auto run_vulkan = [&] {
    kiln::CompiledModel compiled = kiln::compile(kmodel, {.backend = "vulkan"});
    std::vector<kiln::Tensor> outputs = compiled(inputs);
    result.vulkan_dispatches = std::max(result.vulkan_dispatches, compiled.stats().dispatches_per_run);
    return outputs;
  };
  merge(result.vulkan, run_and_compare(run_vulkan, expected), set_name);
}

NodeTestResult run_node_test(const std::string& name) {
  const auto start = std::chrono::steady_clock::now();
  NodeTestResult result;
  const fs::path test_dir = suite().data_dir / name;
  onnx::ModelProto model;
  if (!model.ParseFromString(read_file_bytes(test_dir / "model.onnx"))) {
    result.not_claimed_reason = "model.onnx is not a valid ModelProto";
  } else {
    for (const fs::path& set_dir : data_sets(test_dir)) {
      try {
        run_data_set(name, test_dir, model, set_dir, result);
      } catch (const kiln::Error& e) {  // the test data itself does not fit the model
        const std::string why = "runner: " + first_line(e.what());
        if (!result.claimed)
          result.not_claimed_reason = why;
        else
          merge(result.reference, Outcome{.ran = true, .detail = why}, set_dir.filename().string());
      }
      if (!result.claimed || !result.skipped.empty()) break;
    }
  }
  if (!result.skipped.empty()) result.reference = result.vulkan = Outcome{};
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

void check_node_test(const std::string& name) {
  NodeTestResult result = run_node_test(name);
  for (const std::string backend : kBackends) {
    const Outcome& outcome = backend == "reference" ? result.reference : result.vulkan;
    if (backend == "vulkan" && suite().vulkan_unavailable) continue;
    std::string why = !result.claimed ? "not claimed: " + result.not_claimed_reason
                      : !result.skipped.empty() ? "skipped: " + result.skipped
                      : !outcome.ran ? "not run (no node lowers to a kernel)"
                                     : outcome.detail;
    BOOST_TEST(!(listed(name, backend) && !outcome.passed),
               name << " " << backend << " is in the pass list but fails (a regression): " << why);
  }
  suite().results[name] = std::move(result);
}

#endif  // KILN_HAVE_ONNX

// ---- summary and registration -----------------------------------------------

// Whether a test's tensors are 16-bit floats, as ONNX names such tests
// (test_cast_FLOAT_to_FLOAT16, test_max_float16, ..._BFLOAT16...).
bool sixteen_bit_test(const std::string& name) {
  return name.find("float16") != std::string::npos || name.find("FLOAT16") != std::string::npos;
}

void print_summary() {
  const Suite& s = suite();
  int claimed = 0, reference = 0, vulkan = 0, vulkan_ran = 0, skipped = 0, baked = 0, breaks = 0, no_kernels = 0;
  int half_found = 0, half_claimed = 0, half_reference = 0, half_vulkan = 0;  // 16-bit tests
  for (const auto& [name, r] : s.results) half_found += sixteen_bit_test(name) ? 1 : 0;
  std::map<std::string, int> missing_op_tests;  // op -> tests it keeps out
  std::vector<std::string> other_not_claimed, failing, newly_passing, vulkan_not_run;
  std::vector<std::pair<double, std::string>> times;
  for (const auto& [name, r] : s.results) {
    times.emplace_back(r.seconds, name);
    if (!r.claimed) {
      for (const std::string& op : r.missing_ops) ++missing_op_tests[op];
      if (r.missing_ops.empty()) other_not_claimed.push_back(name + ": " + r.not_claimed_reason);
      continue;
    }
    ++claimed;
    if (sixteen_bit_test(name)) {
      ++half_claimed;
      half_reference += r.reference.passed ? 1 : 0;
      half_vulkan += r.vulkan.passed ? 1 : 0;
    }
    baked += r.baked_inputs > 0;
    if (!r.skipped.empty()) {
      ++skipped;
      continue;
    }
    reference += r.reference.passed;
    vulkan += r.vulkan.passed;
    vulkan_ran += r.vulkan.ran;
    breaks += r.vulkan.ran && r.graph_breaks;
    no_kernels += r.vulkan.passed && r.vulkan_dispatches == 0;
    if (!r.vulkan_not_run.empty()) vulkan_not_run.push_back(name + ": " + first_line(r.vulkan_not_run));
    if (r.reference.ran && !r.reference.passed) failing.push_back(name + " reference: " + r.reference.detail);
    if (r.vulkan.ran && !r.vulkan.passed) failing.push_back(name + " vulkan: " + r.vulkan.detail);
    if (r.reference.passed && !listed(name, "reference")) newly_passing.push_back(name + " reference");
    if (r.vulkan.passed && !listed(name, "vulkan")) newly_passing.push_back(name + " vulkan");
  }

  std::cout << "\n---- not claimed: ops the ONNX importer does not support (tests) ----\n";
  for (const auto& [op, count] : missing_op_tests) std::cout << "  " << op << " (" << count << ")\n";
  std::cout << "---- not claimed for other reasons ----\n";
  for (const std::string& line : other_not_claimed) std::cout << "  " << line << "\n";
  std::cout << "---- claimed but failing (" << failing.size() << ") ----\n";
  for (const std::string& line : failing) std::cout << "  " << line << "\n";
  std::cout << "---- claimed but not run on vulkan: no node lowers to a kernel (" << vulkan_not_run.size() << ") ----\n";
  for (const std::string& line : vulkan_not_run) std::cout << "  " << line << "\n";
  if (!newly_passing.empty()) {
    std::cout << "---- passing but not in the pass list (" << newly_passing.size()
              << "): run tests/update_onnx_pass_list.sh to record them ----\n";
    for (const std::string& line : newly_passing) std::cout << "  " << line << "\n";
  }
  std::sort(times.rbegin(), times.rend());
  std::cout << "---- slowest ----\n";
  for (std::size_t i = 0; i < std::min<std::size_t>(5, times.size()); ++i)
    std::cout << "  " << times[i].second << ": " << times[i].first << " s\n";
  if (s.vulkan_unavailable) std::cout << "vulkan not run here: " << *s.vulkan_unavailable << "\n";
  std::cout << "claimed tests with shape-like inputs baked into initializers: " << baked << "; skipped as too large: "
            << skipped << "; run on vulkan: " << vulkan_ran << " (" << breaks << " with graph breaks on the host; "
            << no_kernels << " passing without a kernel dispatch, views only)\n";
  if (s.results.size() != s.tests.size())
    std::cout << "only " << s.results.size() << " of the tests ran (a --run_test filter); the counts below are theirs\n";
  std::cout << "onnx node tests: " << s.tests.size() << " found, " << claimed << " claimed, " << reference
            << " pass on reference, " << vulkan << " pass on vulkan" << std::endl;
  std::cout << "of them with 16-bit float tensors: " << half_found << " found, " << half_claimed << " claimed, "
            << half_reference << " pass on reference, " << half_vulkan << " pass on vulkan" << std::endl;
}

// With --update-pass-list: the passing combinations of the tests that ran,
// plus the old entries of tests that did not run (a --run_test filter).
void update_pass_list() {
  const Suite& s = suite();
  PassList entries;
  for (const auto& entry : s.pass_list.entries)
    if (s.results.count(entry.first) == 0 && fs::exists(s.data_dir / entry.first)) entries.insert(entry);
  for (const auto& [name, r] : s.results) {
    if (r.reference.passed) entries.emplace(name, "reference");
    if (r.vulkan.passed) entries.emplace(name, "vulkan");
    // Vulkan not runnable here: keep what the list says rather than dropping it.
    if (s.vulkan_unavailable && listed(name, "vulkan")) entries.emplace(name, "vulkan");
  }
  write_pass_list(pass_list_path(), entries);
  std::cout << "wrote " << entries.size() << " entries to " << pass_list_path().string() << std::endl;
}

bool register_tests() {
  Suite& s = suite();
  auto& master = boost::unit_test::framework::master_test_suite();
  master.p_name.value = "onnx_node";
  for (const auto& entry : fs::directory_iterator(s.data_dir))
    if (entry.is_directory() && fs::exists(entry.path() / "model.onnx")) s.tests.push_back(entry.path().filename().string());
  std::sort(s.tests.begin(), s.tests.end());
  s.pass_list = read_pass_list(pass_list_path());

#ifdef KILN_HAVE_ONNX
  auto* node = BOOST_TEST_SUITE("node");
  for (const std::string& name : s.tests)
    node->add(boost::unit_test::make_test_case([name] { check_node_test(name); }, name, __FILE__, __LINE__));
  master.add(node);
#endif
  master.add(boost::unit_test::make_test_case(
      [] {
        print_summary();
        if (suite().update) update_pass_list();
        BOOST_TEST(!suite().results.empty(), "no node test ran");
      },
      "summary", __FILE__, __LINE__));
  return true;
}

}  // namespace

// ---- the harness itself ---------------------------------------------------

BOOST_AUTO_TEST_SUITE(harness)

BOOST_AUTO_TEST_CASE(float_comparison_uses_relative_and_absolute_tolerance) {
  const kiln::Tensor want = kiln::Tensor::from_f32({3}, {1000.0f, 0.0f, -2.0f});
  BOOST_TEST(!mismatch(kiln::Tensor::from_f32({3}, {1000.5f, 5e-6f, -2.001f}), want));
  const auto far = mismatch(kiln::Tensor::from_f32({3}, {1000.0f, 5e-5f, -2.0f}), want);
  BOOST_REQUIRE(far.has_value());
  BOOST_TEST(far->find("first at flat index 1") != std::string::npos, *far);
}

BOOST_AUTO_TEST_CASE(nan_matches_only_nan_and_infinities_match_exactly) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  const kiln::Tensor want = kiln::Tensor::from_f32({2}, {nan, inf});
  BOOST_TEST(!mismatch(kiln::Tensor::from_f32({2}, {nan, inf}), want));
  BOOST_TEST(mismatch(kiln::Tensor::from_f32({2}, {0.0f, inf}), want).has_value());
  BOOST_TEST(mismatch(kiln::Tensor::from_f32({2}, {nan, -inf}), want).has_value());
  BOOST_TEST(mismatch(kiln::Tensor::from_f32({1}, {1.0f}), kiln::Tensor::from_f32({1}, {nan})).has_value());
}

BOOST_AUTO_TEST_CASE(integers_compare_exactly_and_dtype_and_shape_must_match) {
  const std::int64_t big = (std::int64_t{1} << 60) + 1;
  const kiln::Tensor want = kiln::Tensor::from_i64({2}, {big, -3});
  BOOST_TEST(!mismatch(kiln::Tensor::from_i64({2}, {big, -3}), want));
  BOOST_TEST(mismatch(kiln::Tensor::from_i64({2}, {big - 1, -3}), want).has_value());  // equal as doubles
  const auto dtype = mismatch(kiln::Tensor::from_f32({2}, {1, 2}), want);
  BOOST_REQUIRE(dtype.has_value());
  BOOST_TEST(dtype->find("dtype f32, expected i64") != std::string::npos, *dtype);
  const auto shape = mismatch(kiln::Tensor::from_i64({1, 2}, {big, -3}), want);
  BOOST_REQUIRE(shape.has_value());
  BOOST_TEST(shape->find("shape [1, 2], expected [2]") != std::string::npos, *shape);
}

BOOST_AUTO_TEST_CASE(bools_compare_by_truth_and_halves_by_value) {
  kiln::Tensor got(kiln::DType::boolean, {2}), want(kiln::DType::boolean, {2});
  got.values<std::uint8_t>()[0] = 1;
  want.values<std::uint8_t>()[0] = 1;
  BOOST_TEST(!mismatch(got, want));
  got.values<std::uint8_t>()[1] = 1;
  BOOST_TEST(mismatch(got, want).has_value());

  BOOST_TEST(kiln::f16_value(0x3c00) == 1.0f);
  BOOST_TEST(kiln::f16_value(0xc000) == -2.0f);
  BOOST_TEST(kiln::f16_value(0x0001) == std::ldexp(1.0f, -24));  // smallest subnormal
  BOOST_TEST(std::isinf(kiln::f16_value(0x7c00)));
  BOOST_TEST(std::isnan(kiln::f16_value(0x7e00)));
  kiln::Tensor h(kiln::DType::f16, {1}), h2(kiln::DType::f16, {1});
  h.values<std::uint16_t>()[0] = 0x3c00;   // 1.0
  h2.values<std::uint16_t>()[0] = 0x3c02;  // 1.00195: beyond rtol 1e-3
  BOOST_TEST(mismatch(h2, h).has_value());
  BOOST_TEST(!mismatch(h, h));
}

BOOST_AUTO_TEST_CASE(pass_list_is_well_formed_and_names_existing_tests) {
  const PassListFile& file = suite().pass_list;
  BOOST_REQUIRE_MESSAGE(file.found || suite().update, "pass list not found: " << pass_list_path().string());
  for (const std::string& error : file.errors) BOOST_ERROR(error);
  for (const auto& [test, backend] : file.entries)
    BOOST_TEST(std::binary_search(suite().tests.begin(), suite().tests.end(), test),
               "pass list names '" << test << "', which is not a test folder in " << suite().data_dir.string());
}

BOOST_AUTO_TEST_SUITE_END()

int main(int argc, char* argv[]) {
  // Our own flag is taken out before Boost.Test parses the rest.
  std::vector<char*> args;
  for (int i = 0; i < argc; ++i) {
    if (std::strcmp(argv[i], "--update-pass-list") == 0)
      suite().update = true;
    else
      args.push_back(argv[i]);
  }
#ifndef KILN_HAVE_ONNX
  std::cout << "onnx_node: skipped: kiln was built without ONNX import (libonnx-dev, libprotobuf-dev)\n";
  return 77;
#endif
  suite().data_dir = test_data_dir();
  if (!fs::is_directory(suite().data_dir)) {
    std::cout << "onnx_node: skipped: ONNX's node tests are not installed (" << suite().data_dir.string()
              << "; apt-get install libonnx-testdata, or set KILN_ONNX_NODE_DATA)\n";
    return 77;
  }
  suite().vulkan_unavailable = "kiln was built without the Vulkan backend";
  for (const kiln::BackendDescription& b : kiln::list_backends()) {
    if (b.name != "vulkan") continue;
    suite().vulkan_unavailable.reset();
    if (!b.available || b.devices.empty())
      suite().vulkan_unavailable = b.available ? "no devices" : b.unavailable_reason;
  }
  // The device pool keeps a device only while something holds it; holding it
  // here lets every test reuse one device and its loaded kernels.
  if (!suite().vulkan_unavailable) suite().vulkan_device = kiln::runtime::acquire_device("vulkan", "", "");

  const int status = boost::unit_test::unit_test_main(&register_tests, static_cast<int>(args.size()), args.data());
  suite().vulkan_device.reset();
  return status;
}
