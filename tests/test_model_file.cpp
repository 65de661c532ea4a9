// Compiled-model files (.kiln): kiln::compile_to_file / `kiln compile` write
// one, kiln::load / `kiln run` run it without compiling; damaged, foreign and
// mismatched files are refused by name.
#define BOOST_TEST_MODULE model_file
#include <boost/test/unit_test.hpp>

#include <kiln/kiln.h>
#include <kiln/npy.h>
#include <kiln/onnx.h>

#include "backends/registry.h"
#include "cli_runner.h"
#include "src/artifact/cbor_shape.h"
#include "src/artifact/container.h"
#include "src/artifact/graph_codec.h"
#include "src/artifact/model_file.h"

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>

#include <onnx/onnx_pb.h>
#include <nlohmann/json.hpp>
#include <xxhash.h>

namespace fs = std::filesystem;
using kiln::ErrorKind;

namespace {

kiln::Model small_resnet() {
  return kiln::models::resnet18({.batch = 1, .image_size = 32, .num_classes = 10, .seed = 3});
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
    BOOST_TEST_MESSAGE("error: " << e.what());
    return e;
  }
  BOOST_FAIL("expected a kiln::Error");
  throw std::logic_error("unreachable");
}

fs::path fresh_dir(const std::string& name) {
  fs::path dir = fs::temp_directory_path() / ("kiln-test-" + name + "-" + std::to_string(std::random_device{}()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  return dir;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::vector<char> read_bytes(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_bytes(const fs::path& path, const std::vector<char>& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// One file for the whole suite: compiling it is the slow part.
struct CompiledFile {
  fs::path dir = fresh_dir("model-file");
  fs::path path = dir / "resnet.kiln";
  kiln::Model model = small_resnet();
  CompiledFile() {
    kiln::compile_to_file(model, path.string(), {.targets = {"vulkan"}, .cache_dir = (dir / "cache").string()});
  }
  ~CompiledFile() {
    std::error_code ignored;
    fs::remove_all(dir, ignored);
  }
};

const CompiledFile& compiled_file() {
  static CompiledFile file;
  return file;
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_loaded_file_runs_no_pass_and_no_compiler_and_matches_a_compile) {
  const CompiledFile& file = compiled_file();
  const kiln::Tensor input = random_input({1, 3, 32, 32}, 11);
  // An empty kernel cache: any kernel compiled would count as a miss.
  const fs::path cache = file.dir / "empty-cache";
  kiln::CompiledModel loaded = kiln::load(file.path.string(), {.cache_dir = cache.string()});
  const std::vector<kiln::Tensor> out = loaded({input});
  const kiln::RunStats& stats = loaded.stats();
  BOOST_TEST(stats.graph_passes_run == 0);
  BOOST_TEST(stats.kernel_cache_misses == 0);
  BOOST_TEST(stats.kernel_cache_hits == 0);
  BOOST_TEST(stats.kernels > 0);
  BOOST_TEST(stats.kernels_from_file == stats.kernels);
  BOOST_TEST(stats.kernel_compile_ms == 0.0);  // no compiler ran
  BOOST_TEST(stats.pipeline_ms > 0.0);         // the driver still creates every pipeline
  BOOST_TEST(contains(loaded.explain(), "read from " + file.path.string()));

  kiln::CompiledModel compiled = kiln::compile(file.model, {.cache_dir = "off"});
  const std::vector<kiln::Tensor> expected = compiled({input});
  BOOST_TEST(compiled.stats().graph_passes_run > 0);
  BOOST_TEST(compiled.stats().kernel_compile_ms > 0.0);  // no cache: every kernel compiled
  BOOST_TEST(compiled.stats().pipeline_ms > 0.0);
  BOOST_REQUIRE(out.size() == expected.size());
  // The same kernels on the same data: the same result.
  BOOST_TEST(kiln::max_abs_diff(out[0], expected[0]) == 0.0f);
  const std::vector<kiln::Tensor> reference = kiln::eager(file.model)({input});
  BOOST_TEST(kiln::max_abs_diff(out[0], reference[0]) < 1e-3f);
  BOOST_TEST(loaded.model().inputs().at(0).name == file.model.inputs().at(0).name);
}

BOOST_AUTO_TEST_CASE(truncated_files_are_refused) {
  const CompiledFile& file = compiled_file();
  const std::vector<char> bytes = read_bytes(file.path);
  const fs::path damaged = file.dir / "truncated.kiln";
  for (std::size_t size : {std::size_t{0}, std::size_t{4}, std::size_t{47}, std::size_t{48}, std::size_t{100},
                           bytes.size() / 2, bytes.size() - 1}) {
    write_bytes(damaged, std::vector<char>(bytes.begin(), bytes.begin() + static_cast<std::ptrdiff_t>(size)));
    const kiln::Error e = expect_error([&] { kiln::load(damaged.string()); });
    BOOST_TEST((e.kind() == ErrorKind::Corrupt), "truncated to " << size << " bytes: " << e.what());
    BOOST_TEST(contains(e.what(), damaged.string()));
  }
}

BOOST_AUTO_TEST_CASE(altered_bytes_are_refused_wherever_they_are) {
  const CompiledFile& file = compiled_file();
  const std::vector<char> bytes = read_bytes(file.path);
  const fs::path damaged = file.dir / "altered.kiln";
  std::vector<std::size_t> positions = {0, 3, 4, 8, 16, 24, 32, 47, 48, 60, bytes.size() - 1};
  for (std::size_t i = 1; i < 24; ++i) positions.push_back(bytes.size() * i / 24);
  for (std::size_t at : positions) {
    std::vector<char> altered = bytes;
    altered[at] = static_cast<char>(altered[at] ^ 0x5a);
    write_bytes(damaged, altered);
    const kiln::Error e = expect_error([&] { kiln::load(damaged.string()); });
    BOOST_TEST((e.kind() == ErrorKind::Corrupt), "byte " << at << " altered: " << e.what());
  }
}

BOOST_AUTO_TEST_CASE(a_file_from_another_kiln_version_is_refused_naming_both) {
  const CompiledFile& file = compiled_file();
  const kiln::artifact::Container original = kiln::artifact::read_container(file.path, "MODL");
  // The same content, written as another kiln would: a valid container.
  nlohmann::json metadata = original.metadata();
  metadata["kiln_version"] = "0.0.1";
  kiln::artifact::BlobWriter blobs;
  for (std::size_t i = 0; i < metadata["blobs"].size(); ++i) blobs.add(original.blob(i, "test"));
  metadata.erase("blobs");
  const fs::path other = file.dir / "other-version.kiln";
  kiln::artifact::write_container(other, "MODL", metadata, blobs);
  const kiln::Error e = expect_error([&] { kiln::load(other.string()); });
  BOOST_TEST((e.kind() == ErrorKind::Unsupported));
  BOOST_TEST(contains(e.what(), "kiln 0.0.1"));
  BOOST_TEST(contains(e.what(), "kiln compile"));
  // The same version built from other sources.
  nlohmann::json other_build = original.metadata();
  other_build["kiln_sources"] = "0123456789abcdef";
  other_build.erase("blobs");
  const fs::path rebuilt = file.dir / "other-build.kiln";
  kiln::artifact::write_container(rebuilt, "MODL", other_build, blobs);
  const kiln::Error b = expect_error([&] { kiln::load(rebuilt.string()); });
  BOOST_TEST((b.kind() == ErrorKind::Unsupported));
  BOOST_TEST(contains(b.what(), "another build of kiln"));
  BOOST_TEST(contains(b.what(), "sources 0123456789abcdef"));

  // Another kind of kiln file, and a file that is not kiln's at all.
  const fs::path plan_kind = file.dir / "plan-kind.kiln";
  kiln::artifact::write_container(plan_kind, "PLAN", metadata, blobs);
  BOOST_TEST((expect_error([&] { kiln::load(plan_kind.string()); }).kind() == ErrorKind::Corrupt));
  const fs::path text = file.dir / "text.kiln";
  write_bytes(text, std::vector<char>(100, 'x'));
  BOOST_TEST(contains(expect_error([&] { kiln::load(text.string()); }).what(), "not a kiln file"));
  BOOST_TEST((expect_error([&] { kiln::load((file.dir / "missing.kiln").string()); }).kind() == ErrorKind::NotFound));
  BOOST_TEST((expect_error([&] { kiln::load(file.dir.string()); }).kind() == ErrorKind::Io));
}

// The plan cache maps its files instead of reading them: the same metadata,
// blobs in place and aligned, and damage reported the same way.
BOOST_AUTO_TEST_CASE(a_mapped_file_reads_as_a_read_one_and_its_damage_is_reported) {
  using kiln::artifact::FileHolding;
  const fs::path dir = fresh_dir("mapped");
  const kiln::Tensor weights = random_input({9, 13}, 3);
  kiln::artifact::BlobWriter blobs;
  const nlohmann::json metadata = {{"weights", kiln::artifact::encode_tensor(weights, blobs)}};
  const fs::path path = dir / "mapped.plan";
  kiln::artifact::write_container(path, "PLAN", metadata, blobs);

  const kiln::artifact::Container read = kiln::artifact::read_container(path, "PLAN", FileHolding::read);
  const kiln::artifact::Container mapped = kiln::artifact::read_container(path, "PLAN", FileHolding::map);
  BOOST_TEST(mapped.metadata() == read.metadata());
  const kiln::Tensor decoded = kiln::artifact::decode_tensor(mapped.metadata()["weights"], mapped);
  BOOST_TEST(kiln::max_abs_diff(decoded, weights) == 0.0f);
  BOOST_TEST((decoded.bytes().data() == mapped.blob(0, "test").data()));
  BOOST_TEST(reinterpret_cast<std::uintptr_t>(mapped.blob(0, "test").data()) % kiln::artifact::kBlobAlignment == 0u);

  std::vector<char> bytes = read_bytes(path);
  bytes.back() ^= 1;  // a flipped bit in the last blob
  write_bytes(path, bytes);
  const kiln::Error altered = expect_error([&] { kiln::artifact::read_container(path, "PLAN", FileHolding::map); });
  BOOST_TEST((altered.kind() == ErrorKind::Corrupt));
  BOOST_TEST(contains(altered.what(), "fails its checksum"));
  bytes.resize(bytes.size() / 2);
  write_bytes(path, bytes);
  const kiln::Error truncated = expect_error([&] { kiln::artifact::read_container(path, "PLAN", FileHolding::map); });
  BOOST_TEST((truncated.kind() == ErrorKind::Corrupt));
  BOOST_TEST(contains(truncated.what(), "truncated or damaged"));
  write_bytes(path, {});
  const kiln::Error empty = expect_error([&] { kiln::artifact::read_container(path, "PLAN", FileHolding::map); });
  BOOST_TEST(contains(empty.what(), "not a kiln file"));
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(blobs_lie_aligned_and_decoded_weights_use_the_read_file_in_place) {
  const fs::path dir = fresh_dir("blobs");
  // Odd sizes, so that only padding can align the blobs after the first.
  const kiln::Tensor odd = random_input({3}, 1);
  const kiln::Tensor weights = random_input({5, 7}, 2);
  kiln::artifact::BlobWriter blobs;
  nlohmann::json metadata = {{"odd", kiln::artifact::encode_tensor(odd, blobs)},
                             {"weights", kiln::artifact::encode_tensor(weights, blobs)},
                             {"again", kiln::artifact::encode_tensor(weights, blobs)}};  // stored once
  const fs::path path = dir / "blobs.kiln";
  kiln::artifact::write_container(path, "PLAN", metadata, blobs);

  const kiln::artifact::Container file = kiln::artifact::read_container(path, "PLAN");
  BOOST_TEST(file.metadata()["blobs"].size() == 2u);
  for (std::uint64_t i = 0; i < 2; ++i)
    BOOST_TEST(reinterpret_cast<std::uintptr_t>(file.blob(i, "test").data()) % kiln::artifact::kBlobAlignment == 0u);
  const kiln::Tensor decoded = kiln::artifact::decode_tensor(file.metadata()["weights"], file);
  const kiln::Tensor again = kiln::artifact::decode_tensor(file.metadata()["again"], file);
  BOOST_TEST(kiln::max_abs_diff(decoded, weights) == 0.0f);
  BOOST_TEST(kiln::max_abs_diff(kiln::artifact::decode_tensor(file.metadata()["odd"], file), odd) == 0.0f);
  // In place: the decoded tensor's bytes are the file's blob, not a copy.
  BOOST_TEST((decoded.bytes().data() == file.blob(1, "test").data()));
  BOOST_TEST((again.bytes().data() == decoded.bytes().data()));

  // A container of the previous layout (version 1, blobs unaligned) is refused by version.
  std::vector<char> bytes = read_bytes(path);
  bytes[8] = 1;
  write_bytes(path, bytes);
  const kiln::Error e = expect_error([&] { kiln::artifact::read_container(path, "PLAN"); });
  BOOST_TEST((e.kind() == ErrorKind::Corrupt));
  BOOST_TEST(contains(e.what(), "container version 1; this kiln reads version 2"));
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(a_device_no_plan_fits_gets_an_error_naming_what_the_file_holds) {
  const CompiledFile& file = compiled_file();
  const kiln::artifact::ModelFile read = kiln::artifact::read_model_file(file.path.string());
  BOOST_REQUIRE(read.plans.size() == 1);
  const kiln::backend::Backend& vulkan = kiln::backend::get_backend("vulkan");
  kiln::backend::TargetDesc device = read.plans[0]->target;
  BOOST_TEST(kiln::artifact::select_plan(read, vulkan, device) == read.plans[0]);
  // Another device whose bindings need a coarser alignment than the plan's.
  device.device_name = "a stricter GPU";
  device.driver = "another driver";
  device.min_buffer_offset_alignment = 1u << 20;
  const kiln::Error e = expect_error([&] { kiln::artifact::select_plan(read, vulkan, device); });
  BOOST_TEST((e.kind() == ErrorKind::Unsupported));
  BOOST_TEST(contains(e.what(), "a stricter GPU"));
  BOOST_TEST(contains(e.what(), "vulkan on " + read.plans[0]->target.device_name));
  BOOST_TEST(contains(e.what(), "aligned"));
  // Asking for a backend the file holds nothing for.
  const kiln::Error null_backend = expect_error([&] { kiln::load(file.path.string(), {.backend = "null"}); });
  BOOST_TEST(contains(null_backend.what(), "vulkan on "));
}

BOOST_AUTO_TEST_CASE(one_file_holds_several_targets_and_each_device_gets_its_own) {
  const kiln::backend::Backend& cuda = kiln::backend::get_backend("cuda");
  const fs::path dir = fresh_dir("model-file-cuda");
  const fs::path path = dir / "two.kiln";
  const kiln::Model model = small_resnet();
  try {
    kiln::compile_to_file(model, path.string(),
                          {.targets = {"vulkan", "cuda:sm_80,sm_90"}, .cache_dir = (dir / "cache").string()});
  } catch (const kiln::Error& e) {
    // NVRTC is opened at run time: without it there is nothing to compile CUDA with.
    BOOST_REQUIRE_MESSAGE(e.kind() == ErrorKind::Unsupported, e.what());
    BOOST_TEST_MESSAGE("skipped the CUDA targets: " << e.what());
    fs::remove_all(dir);
    return;
  }
  const kiln::artifact::ModelFile read = kiln::artifact::read_model_file(path.string());
  BOOST_REQUIRE(read.plans.size() == 3);
  BOOST_TEST(read.plans[1]->target.arch == "sm_80");
  BOOST_TEST(read.plans[2]->target.arch == "sm_90");
  for (std::size_t i = 1; i < 3; ++i) {
    const kiln::compiler::RenderedKernel& kernel = read.plans[i]->rendered.at(0);
    BOOST_REQUIRE(kernel.binaries.size() == 2);
    BOOST_TEST(kernel.binaries[0].format == "cubin");
    BOOST_TEST(kernel.binaries[1].format == "ptx");
  }
  // An sm_90 device gets the sm_90 plan (its own CUBIN), not the first that could run (sm_80's PTX).
  kiln::backend::TargetDesc hopper = read.plans[2]->target;
  hopper.device_type = "discrete-gpu";
  hopper.offline = false;
  hopper.device_name = "NVIDIA H100";
  BOOST_TEST(kiln::artifact::select_plan(read, cuda, hopper)->target.arch == "sm_90");
  // The Vulkan device here still gets the Vulkan plan, and runs it.
  kiln::CompiledModel loaded = kiln::load(path.string(), {.backend = "vulkan", .cache_dir = (dir / "empty").string()});
  loaded({random_input({1, 3, 32, 32}, 5)});
  BOOST_TEST(loaded.stats().kernel_cache_misses == 0);
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(kiln_compile_then_kiln_run_from_the_command_line) {
  const fs::path dir = fresh_dir("model-file-cli");
  const std::string file = (dir / "resnet18.kiln").string();
  const cli_test::Result compiled =
      cli_test::run_kiln("compile --model resnet18 --image-size 32 -o " + file + " --cache-dir " + (dir / "c").string());
  BOOST_TEST(compiled.exit_code == 0);
  BOOST_TEST(fs::exists(file));
  const cli_test::Result run = cli_test::run_kiln("run " + file + " --iters 1 --cache-dir " + (dir / "empty").string());
  BOOST_TEST(run.exit_code == 0);
  BOOST_TEST(cli_test::has(run, "0 graph passes run"));
  BOOST_TEST(cli_test::has(run, "0 compiled"));
  BOOST_TEST(!cli_test::has(run, "WARNING"));
  const cli_test::Result explain = cli_test::run_kiln("explain " + file + " --cache-dir " + (dir / "empty").string());
  BOOST_TEST(explain.exit_code == 0);
  BOOST_TEST(cli_test::has(explain, "plan: read from " + file));
  // A command that needs the model itself says so.
  const cli_test::Result dump = cli_test::run_kiln("dump " + file + " --output-dir " + (dir / "dump").string());
  BOOST_TEST(dump.exit_code != 0);
  BOOST_TEST(cli_test::has(dump, "compiled-model file"));
  // A failed write leaves nothing behind.
  const cli_test::Result unwritable =
      cli_test::run_kiln("compile --model resnet18 --image-size 32 -o " + (dir / "no-such-dir" / "x.kiln").string());
  BOOST_TEST(unwritable.exit_code != 0);
  BOOST_TEST(cli_test::has(unwritable, "cannot write"));
  std::size_t files = 0;
  for (const auto& entry : fs::directory_iterator(dir)) files += entry.is_regular_file() ? 1 : 0;
  BOOST_TEST(files == 1u);
  fs::remove_all(dir);
}

namespace {

// CBOR of `depth` nested one-element arrays around 0.
std::vector<std::uint8_t> nested_arrays(std::size_t depth) {
  std::vector<std::uint8_t> cbor(depth, 0x81);
  cbor.push_back(0x00);
  return cbor;
}

// A container file of `kind` holding `cbor` as its metadata and no blobs,
// with a correct checksum: what a forger (not a damaged disk) writes.
void forge_container(const fs::path& path, std::string_view kind, const std::vector<std::uint8_t>& cbor) {
  std::vector<std::uint8_t> body(cbor);
  body.resize((48 + body.size() + 63) / 64 * 64 - 48, 0);
  const XXH128_hash_t digest = XXH3_128bits(body.data(), body.size());
  std::vector<char> file(48, '\0');
  std::memcpy(file.data(), "KILN", 4);
  std::memcpy(file.data() + 4, kind.data(), 4);
  const auto put = [&](std::size_t at, std::uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) file[at + static_cast<std::size_t>(i)] = static_cast<char>(v >> (8 * i));
  };
  put(8, kiln::artifact::kContainerVersion, 4);
  put(16, cbor.size(), 8);
  put(24, 0, 8);
  put(32, digest.high64, 8);
  put(40, digest.low64, 8);
  file.insert(file.end(), body.begin(), body.end());
  write_bytes(path, file);
}

}  // namespace

BOOST_AUTO_TEST_CASE(metadata_of_any_shape_is_walked_before_it_is_decoded) {
  using kiln::artifact::cbor_shape_problem;
  const auto problem = [](const std::vector<std::uint8_t>& cbor) { return cbor_shape_problem(cbor).value_or("none"); };
  // What kiln writes passes.
  const nlohmann::json metadata = {{"key", "k"}, {"list", {1, -2, 3.5, "text", nullptr, true}}, {"nested", {{"a", {{"b", {}}}}}}};
  BOOST_TEST(problem(nlohmann::json::to_cbor(metadata)) == "none");
  BOOST_TEST(problem(nested_arrays(64)) == "none");
  // Indefinite arrays, maps and strings, and tags.
  BOOST_TEST(problem({0x9f, 0x01, 0xbf, 0x61, 'a', 0x02, 0xff, 0xff}) == "none");
  BOOST_TEST(problem({0x7f, 0x61, 'a', 0x62, 'b', 'c', 0xff}) == "none");
  BOOST_TEST(problem({0xc1, 0x1a, 0, 0, 0, 1}) == "none");
  // Refused: too deep (two million levels would overflow the decoder's stack),
  // counts beyond the bytes left, truncations, reserved encodings, strays.
  BOOST_TEST(problem(nested_arrays(65)) == "CBOR nests deeper than 64 levels");
  BOOST_TEST(problem(nested_arrays(2'000'000)) == "CBOR nests deeper than 64 levels");
  BOOST_TEST(problem({0x9b, 0x40, 0, 0, 0, 0, 0, 0, 0, 0x01}) ==
             "CBOR array claims 4611686018427387904 entries, more than the bytes left");
  BOOST_TEST(problem({0xa2, 0x01, 0x02, 0x03}) == "CBOR map claims 2 entries, more than the bytes left");
  BOOST_TEST(problem({0x5a, 0xff, 0xff, 0xff, 0xff, 0x00}) == "CBOR string is longer than the bytes left");
  BOOST_TEST(problem({0x9f, 0x01}) == "CBOR ends inside an item");
  BOOST_TEST(problem({0x82, 0x01}) == "CBOR array claims 2 entries, more than the bytes left");
  BOOST_TEST(problem({0x1c}) == "CBOR has a truncated or reserved encoding");
  BOOST_TEST(problem({0x19, 0x01}) == "CBOR has a truncated or reserved encoding");
  BOOST_TEST(problem({0xff}) == "CBOR has a break outside an indefinite item");
  BOOST_TEST(problem({0x7f, 0x41, 0x00, 0xff}) == "CBOR indefinite string has a chunk of another type");
  BOOST_TEST(problem({0x01, 0x02}) == "CBOR has 1 bytes after its item");

  // In a file whose checksum holds (written by a forger, not damaged by a
  // disk): a clear Corrupt error naming the file, for a compiled-model file
  // and a plan-cache entry alike.
  const fs::path dir = fresh_dir("forged-metadata");
  const std::vector<std::pair<std::string, std::vector<std::uint8_t>>> forged = {
      {"deep.kiln", nested_arrays(2'000'000)},
      {"huge.kiln", {0xa1, 0x64, 'b', 'l', 'o', 'b', 0x9b, 0x40, 0, 0, 0, 0, 0, 0, 0}},
  };
  for (const auto& [name, cbor] : forged) {
    BOOST_TEST_CONTEXT(name) {
      forge_container(dir / name, "MODL", cbor);
      try {
        kiln::artifact::read_container(dir / name, "MODL");
        BOOST_FAIL("a forged file was read");
      } catch (const kiln::Error& e) {
        BOOST_TEST((e.kind() == kiln::ErrorKind::Corrupt), e.what());
        BOOST_TEST(std::string(e.what()).find(name + "' has malformed metadata: CBOR") != std::string::npos, e.what());
      }
    }
  }
  fs::remove_all(dir);
}

// A float where an integer belongs (or an integer out of its field's range)
// in a forged file is refused as Corrupt: nlohmann would convert it without
// a check, out of range with undefined behaviour (found by fuzz_model_file's
// kind of mutation, in the tokenizer's reader first).
BOOST_AUTO_TEST_CASE(numbers_of_the_wrong_kind_in_a_forged_file_are_refused) {
  const fs::path dir = fresh_dir("forged-numbers");
  const kiln::artifact::Container original = kiln::artifact::read_container(compiled_file().path, "MODL");
  kiln::artifact::BlobWriter blobs;
  for (std::size_t i = 0; i < original.metadata().at("blobs").size(); ++i) blobs.add(original.blob(i, "a blob"));
  // The unchanged metadata, rewritten, still reads: the forging is sound.
  nlohmann::json unchanged = original.metadata();
  unchanged.erase("blobs");
  kiln::artifact::write_container(dir / "unchanged.kiln", "MODL", unchanged, blobs);
  BOOST_TEST(kiln::artifact::read_model_file((dir / "unchanged.kiln").string()).plans.size() == 1u);
  const std::vector<std::pair<std::string, std::function<void(nlohmann::json&)>>> edits = {
      {"a huge float subgroup size", [](nlohmann::json& m) { m["plans"][0]["target"]["subgroup_size"] = 5.6e36; }},
      {"a negative subgroup size", [](nlohmann::json& m) { m["plans"][0]["target"]["subgroup_size"] = -1; }},
      {"a float value id", [](nlohmann::json& m) { m["plans"][0]["root"][0] = 1e300; }},
      {"a value id past i32", [](nlohmann::json& m) { m["plans"][0]["root"][0] = std::int64_t{1} << 40; }},
      {"a number for a flag", [](nlohmann::json& m) { m["plans"][0]["compiled"] = 1; }},
      {"a float kernel-node count", [](nlohmann::json& m) { m["plans"][0]["kernel_nodes"] = -3.0e20; }},
  };
  for (const auto& [what, edit] : edits) {
    BOOST_TEST_CONTEXT(what) {
      nlohmann::json metadata = unchanged;
      edit(metadata);
      const fs::path path = dir / "forged.kiln";
      kiln::artifact::write_container(path, "MODL", metadata, blobs);
      try {
        kiln::artifact::read_model_file(path.string());
        BOOST_ERROR("a forged file was read");
      } catch (const kiln::Error& e) {
        BOOST_TEST((e.kind() == kiln::ErrorKind::Corrupt), e.what());
        BOOST_TEST(contains(e.what(), "forged.kiln' has malformed metadata"), e.what());
      }
    }
  }
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(a_second_compile_reads_its_plan_from_the_plan_cache_and_a_bad_entry_is_rebuilt) {
  const fs::path dir = fresh_dir("plan-cache");
  const kiln::Model model = small_resnet();
  const kiln::Tensor input = random_input({1, 3, 32, 32}, 4);
  const kiln::CompileOptions options{.cache_dir = dir.string()};
  std::vector<kiln::Tensor> first;
  {
    kiln::CompiledModel m = kiln::compile(model, options);
    first = m({input});
    BOOST_TEST(!m.stats().plan_from_cache);
    BOOST_TEST(m.stats().graph_passes_run > 0);
  }
  std::vector<fs::path> plans;
  for (const auto& entry : fs::directory_iterator(dir / "plans"))
    if (entry.path().extension() == ".plan") plans.push_back(entry.path());
  BOOST_REQUIRE(plans.size() == 1u);
  {
    kiln::CompiledModel m = kiln::compile(model, options);
    BOOST_TEST(kiln::max_abs_diff(m({input})[0], first[0]) == 0.0f);
    BOOST_TEST(m.stats().plan_from_cache);
    BOOST_TEST(m.stats().graph_passes_run == 0);
    BOOST_TEST(m.stats().kernel_cache_misses == 0);
    BOOST_TEST(contains(m.explain(), "read from " + plans[0].string()));
  }
  // Other settings or another model: another plan.
  {
    kiln::CompileOptions other = options;
    other.settings = {{"winograd", "off"}};
    kiln::CompiledModel m = kiln::compile(model, other);
    m({input});
    BOOST_TEST(!m.stats().plan_from_cache);
    kiln::CompiledModel n = kiln::compile(kiln::models::resnet18({.batch = 1, .image_size = 32, .num_classes = 10,
                                                                 .seed = 4}), options);
    n({input});
    BOOST_TEST(!n.stats().plan_from_cache);
  }
  // A damaged entry is removed and the plan built again (and stored again).
  std::vector<char> bytes = read_bytes(plans[0]);
  bytes[bytes.size() / 2] = static_cast<char>(bytes[bytes.size() / 2] ^ 1);
  write_bytes(plans[0], bytes);
  {
    kiln::CompiledModel m = kiln::compile(model, options);
    BOOST_TEST(kiln::max_abs_diff(m({input})[0], first[0]) == 0.0f);
    BOOST_TEST(!m.stats().plan_from_cache);
  }
  {
    kiln::CompiledModel m = kiln::compile(model, options);
    m({input});
    BOOST_TEST(m.stats().plan_from_cache);
  }
  // Entries whose checksum holds but which this kiln did not write (a
  // forger's): without their plan, with metadata nested two million deep, or
  // with a kernel source that does not compile. Each is removed and the
  // model planned again (and stored again), never an internal error.
  const kiln::artifact::Container good = kiln::artifact::read_container(plans[0], "PLAN");
  const auto rewrite = [&](nlohmann::json metadata) {
    kiln::artifact::BlobWriter blobs;
    for (const nlohmann::json& entry : good.metadata().at("blobs")) {
      (void)entry;
      blobs.add(good.blob(blobs.size(), "a blob"));
    }
    metadata.erase("blobs");
    kiln::artifact::write_container(plans[0], "PLAN", metadata, blobs);
  };
  nlohmann::json altered_source = good.metadata();
  altered_source["plan"]["kernels"][0]["source"]["text"] = "this is not a kernel";
  nlohmann::json without_plan = good.metadata();
  without_plan.erase("plan");
  const std::vector<std::pair<std::string, std::function<void()>>> forgeries = {
      {"no plan", [&] { rewrite(without_plan); }},
      {"nested two million deep", [&] { forge_container(plans[0], "PLAN", nested_arrays(2'000'000)); }},
      {"a kernel source that does not compile", [&] { rewrite(altered_source); }},
  };
  for (const auto& [what, forge] : forgeries) {
    BOOST_TEST_CONTEXT(what) {
      forge();
      {
        kiln::CompiledModel m = kiln::compile(model, options);
        BOOST_TEST(kiln::max_abs_diff(m({input})[0], first[0]) == 0.0f);
        BOOST_TEST(!m.stats().plan_from_cache);
        BOOST_TEST(m.stats().graph_passes_run > 0);
      }
      kiln::CompiledModel again = kiln::compile(model, options);
      again({input});
      BOOST_TEST(again.stats().plan_from_cache);
    }
  }
  // The setting turns it off.
  {
    kiln::CompileOptions off = options;
    off.settings = {{"plan_cache", "off"}};
    kiln::CompiledModel m = kiln::compile(model, off);
    m({input});
    BOOST_TEST(!m.stats().plan_from_cache);
  }
  fs::remove_all(dir);
}

// A model's plans share its weights, a file each (other modes, settings and
// shape sets only add plans of a few KiB); kiln::prune_cache removes the least
// recently used entries first and keeps what fits; a plan whose weights are
// gone is planned again; clear_cache keeps the tuning database.
BOOST_AUTO_TEST_CASE(plans_share_their_weights_and_the_cache_stays_within_its_limit) {
  const fs::path dir = fresh_dir("cache-limit");
  const kiln::Model model = small_resnet();
  const kiln::Tensor input = random_input({1, 3, 32, 32}, 5);
  auto compile_and_run = [&](kiln::Mode mode) {
    kiln::CompiledModel m = kiln::compile(model, {.mode = mode, .cache_dir = dir.string()});
    m({input});
    return m.stats().plan_from_cache;
  };
  BOOST_TEST(!compile_and_run(kiln::Mode::default_));
  const std::int64_t weight_files = kiln::cache_info(dir.string()).weight_files;
  BOOST_TEST(weight_files > 1);  // one per weight of 4 KiB or more
  BOOST_TEST(!compile_and_run(kiln::Mode::reduce_overhead));
  kiln::CacheInfo info = kiln::cache_info(dir.string());
  BOOST_TEST(info.path == dir.string());
  BOOST_TEST(info.plans == 2);
  BOOST_TEST(info.weight_files == weight_files);  // the second plan added none
  BOOST_TEST(info.kernels > 0);
  BOOST_TEST(info.plan_bytes * 4 < info.weight_bytes, info.plan_bytes << " bytes of plans, " << info.weight_bytes
                                                                      << " of weights");
  BOOST_TEST(compile_and_run(kiln::Mode::default_));
  BOOST_TEST(compile_and_run(kiln::Mode::reduce_overhead));

  // The least recently used plan goes first: make the default mode's old.
  std::vector<fs::path> plans;
  for (const auto& entry : fs::directory_iterator(dir / "plans"))
    if (entry.path().extension() == ".plan") plans.push_back(entry.path());
  BOOST_REQUIRE(plans.size() == 2u);
  const auto old_time = fs::file_time_type::clock::now() - std::chrono::hours(2);
  fs::last_write_time(plans[0], old_time);
  const std::uint64_t total = info.kernel_bytes + info.plan_bytes + info.weight_bytes;
  const std::uint64_t oldest = fs::file_size(plans[0]);
  BOOST_TEST(kiln::prune_cache(dir.string(), total - 1) == oldest);
  BOOST_TEST(!fs::exists(plans[0]));
  BOOST_TEST(fs::exists(plans[1]));
  BOOST_TEST(kiln::cache_info(dir.string()).weight_files == weight_files);

  // Weights gone: the plan that needs them is built again, and so are they.
  fs::remove_all(dir / "plans" / "weights");
  BOOST_TEST(!compile_and_run(kiln::Mode::reduce_overhead));
  BOOST_TEST(kiln::cache_info(dir.string()).weight_files == weight_files);
  BOOST_TEST(compile_and_run(kiln::Mode::reduce_overhead));

  // Clearing keeps the tuning database.
  std::ofstream(dir / "tuning.db") << "records";
  kiln::clear_cache(dir.string());
  info = kiln::cache_info(dir.string());
  BOOST_TEST(info.kernels == 0);
  BOOST_TEST(info.plans == 0);
  BOOST_TEST(info.weight_files == 0);
  BOOST_TEST(fs::exists(dir / "tuning.db"));
  fs::remove_all(dir);
}

namespace {

// Conv 3x3 (4 channels, padded) then Relu of an f32[1, 3, height, width] image,
// written as an ONNX file with symbolic height and width.
void write_symbolic_conv_model(const fs::path& path) {
  onnx::ModelProto model;
  model.set_ir_version(8);
  model.add_opset_import()->set_version(17);
  auto* g = model.mutable_graph();
  auto* in = g->add_input();
  in->set_name("image");
  in->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto_DataType_FLOAT);
  auto* shape = in->mutable_type()->mutable_tensor_type()->mutable_shape();
  shape->add_dim()->set_dim_value(1);
  shape->add_dim()->set_dim_value(3);
  shape->add_dim()->set_dim_param("height");
  shape->add_dim()->set_dim_param("width");
  auto* weight = g->add_initializer();
  weight->set_name("weight");
  weight->set_data_type(onnx::TensorProto_DataType_FLOAT);
  for (std::int64_t d : {4, 3, 3, 3}) weight->add_dims(d);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-0.5f, 0.5f);
  for (int i = 0; i < 4 * 3 * 3 * 3; ++i) weight->add_float_data(dist(rng));
  auto* conv = g->add_node();
  conv->set_op_type("Conv");
  conv->set_name("conv");
  conv->add_input("image");
  conv->add_input("weight");
  conv->add_output("features");
  auto* pads = conv->add_attribute();
  pads->set_name("pads");
  pads->set_type(onnx::AttributeProto_AttributeType_INTS);
  for (int p = 0; p < 4; ++p) pads->add_ints(1);
  auto* relu = g->add_node();
  relu->set_op_type("Relu");
  relu->set_name("relu");
  relu->add_input("features");
  relu->add_output("activations");
  g->add_output()->set_name("activations");
  std::ofstream(path, std::ios::binary) << model.SerializeAsString();
}

}  // namespace

// A model with symbolic dims compiled ahead of time for two shape sets: one
// file, a plan per set, each call picking its set by its shapes with nothing
// compiled; other shapes are an error listing what the file holds.
BOOST_AUTO_TEST_CASE(one_file_serves_several_shape_sets_and_names_them_for_other_shapes) {
  const fs::path dir = fresh_dir("model-file-shape-sets");
  const fs::path onnx_path = dir / "conv.onnx";
  write_symbolic_conv_model(onnx_path);
  const kiln::Model model = kiln::load_onnx(onnx_path.string());
  const fs::path path = dir / "conv.kiln";
  kiln::compile_to_file(model, path.string(),
                        {.cache_dir = (dir / "cache").string(),
                         .shape_sets = {{{"image", {1, 3, 16, 16}}}, {{"image", {1, 3, 24, 20}}}}});
  const kiln::artifact::ModelFile read = kiln::artifact::read_model_file(path.string());
  BOOST_TEST(read.plans.size() == 2u);
  BOOST_TEST(kiln::artifact::shape_sets(read).size() == 2u);
  BOOST_TEST(contains(kiln::artifact::describe_targets(read), "f32[1, 3, 24, 20]"));

  kiln::CompiledModel loaded = kiln::load(path.string(), {.cache_dir = (dir / "empty").string()});
  for (const kiln::Shape& shape : {kiln::Shape{1, 3, 24, 20}, kiln::Shape{1, 3, 16, 16}, kiln::Shape{1, 3, 24, 20}}) {
    const kiln::Tensor input = random_input(shape, 9);
    const std::vector<kiln::Tensor> out = loaded({input});
    BOOST_TEST(out.at(0).shape() == (kiln::Shape{1, 4, shape[2], shape[3]}));
    const kiln::RunStats stats = loaded.stats();
    BOOST_TEST(stats.graph_passes_run == 0);
    BOOST_TEST(stats.kernel_cache_misses == 0);
    BOOST_TEST(stats.kernels_from_file == stats.kernels);
    BOOST_TEST(stats.shape_sets == 2);
    BOOST_TEST(loaded.model_for({shape}).inputs().at(0).shape == shape);
    const std::vector<kiln::Tensor> reference = kiln::eager(model)({input});
    BOOST_TEST(kiln::max_abs_diff(out[0], reference[0]) < 1e-4f);
  }
  BOOST_TEST(contains(loaded.explain(), "shape sets held by '" + path.string() + "': 2"));

  const kiln::Error other = expect_error([&] { loaded({random_input({1, 3, 32, 32}, 1)}); });
  BOOST_TEST(other.kind() == ErrorKind::ShapeMismatch);
  BOOST_TEST(contains(other.what(), "image f32[1, 3, 16, 16] and image f32[1, 3, 24, 20]"));
  BOOST_TEST(contains(other.what(), "this call gives image f32[1, 3, 32, 32]"));
  BOOST_TEST(contains(other.what(), "--shape-set 'image=1x3x32x32'"));

  // A file of one set names it too.
  const fs::path single = dir / "single.kiln";
  kiln::compile_to_file(model, single.string(),
                        {.cache_dir = (dir / "cache").string(), .shape_sets = {{{"image", {1, 3, 16, 16}}}}});
  kiln::CompiledModel one = kiln::load(single.string(), {.cache_dir = (dir / "empty").string()});
  const kiln::Error outside = expect_error([&] { one({random_input({1, 3, 24, 20}, 1)}); });
  BOOST_TEST(contains(outside.what(), "'" + single.string() + "' holds plans for input shapes image f32[1, 3, 16, 16];"));

  // Sets that cannot be: an unknown input, a repeat, a fixed dim changed, a model without symbolic dims.
  auto refused = [&](const kiln::Model& m, std::vector<std::map<std::string, kiln::Shape>> sets) {
    return expect_error([&] {
      kiln::compile_to_file(m, (dir / "refused.kiln").string(),
                            {.cache_dir = (dir / "cache").string(), .shape_sets = std::move(sets)});
    });
  };
  const kiln::Error unknown = refused(model, {{{"images", {1, 3, 16, 16}}}});
  BOOST_TEST(unknown.kind() == ErrorKind::InvalidArgument);
  BOOST_TEST(contains(unknown.what(), "shape set 1: model 'conv' has no input 'images' (its inputs: image)"));
  const kiln::Error repeat = refused(model, {{{"image", {1, 3, 16, 16}}}, {{"image", {1, 3, 16, 16}}}});
  BOOST_TEST(contains(repeat.what(), "shape set 2 repeats shape set 1"));
  const kiln::Error fixed = refused(model, {{{"image", {1, 4, 16, 16}}}});
  BOOST_TEST(fixed.kind() == ErrorKind::ShapeMismatch);
  BOOST_TEST(contains(fixed.what(), "shape set 1 of model 'conv'"));
  const kiln::Error static_model = refused(small_resnet(), {{{"input", {1, 3, 64, 64}}}});
  BOOST_TEST(contains(static_model.what(), "has no symbolic dims"));
  BOOST_TEST(!fs::exists(dir / "refused.kiln"));
  fs::remove_all(dir);
}

BOOST_AUTO_TEST_CASE(kiln_compile_takes_shape_sets_and_kiln_run_picks_one_by_the_input_file) {
  const fs::path dir = fresh_dir("model-file-shape-sets-cli");
  write_symbolic_conv_model(dir / "conv.onnx");
  const std::string file = (dir / "conv.kiln").string();
  const cli_test::Result compiled =
      cli_test::run_kiln("compile " + (dir / "conv.onnx").string() + " -o " + file +
                         " --shape-set image=1x3x16x16 --shape-set 'image=1x3x24x20' --cache-dir " + (dir / "c").string());
  BOOST_TEST(compiled.exit_code == 0);
  BOOST_TEST(cli_test::has(compiled, "2 shape set(s)"));
  kiln::save_npy((dir / "wide.npy").string(), random_input({1, 3, 24, 20}, 3));
  kiln::save_npy((dir / "odd.npy").string(), random_input({1, 3, 20, 20}, 3));
  const cli_test::Result run = cli_test::run_kiln("run " + file + " --iters 1 --input image=" +
                                                  (dir / "wide.npy").string() + " --cache-dir " + (dir / "e").string());
  BOOST_TEST(run.exit_code == 0);
  BOOST_TEST(cli_test::has(run, "0 compiled"));
  const cli_test::Result odd = cli_test::run_kiln("run " + file + " --iters 1 --input image=" +
                                                  (dir / "odd.npy").string() + " --cache-dir " + (dir / "e").string());
  BOOST_TEST(odd.exit_code != 0);
  BOOST_TEST(cli_test::has(odd, "holds plans for input shapes image f32[1, 3, 16, 16] and image f32[1, 3, 24, 20]"));
  const cli_test::Result bad = cli_test::run_kiln("compile " + (dir / "conv.onnx").string() + " -o " + file +
                                                  " --shape-set image=1x3xhigh");
  BOOST_TEST(bad.exit_code != 0);
  BOOST_TEST(cli_test::has(bad, "--shape-set 'image=1x3xhigh'"));
  fs::remove_all(dir);
}
