// Device-resident inputs and outputs (kiln::DeviceTensor), submitted calls
// (kiln::PendingCall) and the command lists' device-to-device copy.
#define BOOST_TEST_MODULE device_io
#include <boost/test/unit_test.hpp>

#include <kiln/kiln.h>

#include "backends/registry.h"
#include "graph/ir.h"
#include "small_models.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <functional>
#include <optional>
#include <random>
#include <string>
#include <vector>

using namespace kiln;
using small_models::max_difference;
using small_models::random_tensor;
using small_models::to_host;

namespace {

void expect_error(const std::function<void()>& body, ErrorKind kind, const std::vector<std::string>& fragments) {
  try {
    body();
  } catch (const Error& e) {
    BOOST_TEST(error_kind_name(e.kind()) == error_kind_name(kind), "message: " << e.what());
    for (const std::string& fragment : fragments)
      BOOST_TEST(std::string(e.what()).find(fragment) != std::string::npos,
                 "'" << fragment << "' not in: " << e.what());
    return;
  }
  BOOST_FAIL("expected a kiln::Error");
}

std::string fresh_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("kiln-test-" + name + "-" + std::to_string(std::random_device{}()));
  std::filesystem::remove_all(dir);
  return dir.string();
}

const std::vector<Mode> kModes = {Mode::default_, Mode::reduce_overhead};

}  // namespace

BOOST_AUTO_TEST_CASE(device_outputs_feed_the_next_model_without_a_host_round_trip) {
  for (Mode mode : kModes) {
    CompiledModel trunk = compile(small_models::trunk(), {.mode = mode});
    CompiledModel head = compile(small_models::head(), {.mode = mode});
    const Tensor x = random_tensor({1, 3, 16, 16}, 5);
    const std::vector<Tensor> features = trunk({x});
    const std::vector<Tensor> expected = head(features);
    // A host call moves its inputs up and its outputs down.
    BOOST_TEST(trunk.stats().uploaded_bytes == x.nbytes());
    BOOST_TEST(trunk.stats().downloaded_bytes == features[0].nbytes());

    const std::vector<DeviceTensor> on_device = trunk.call_on_device({x});
    BOOST_TEST(trunk.stats().uploaded_bytes == x.nbytes());
    BOOST_TEST(trunk.stats().downloaded_bytes == 0u);
    BOOST_TEST_REQUIRE(on_device.size() == 1u);
    BOOST_TEST(on_device[0].on_device());
    BOOST_TEST(on_device[0].shape() == features[0].shape());
    BOOST_TEST(on_device[0].device().find("vulkan:") == 0u, on_device[0].device());

    const std::vector<DeviceTensor> probabilities = head.call_on_device({on_device[0]});
    BOOST_TEST(head.stats().uploaded_bytes == 0u);
    BOOST_TEST(head.stats().downloaded_bytes == 0u);
    // Same kernels, same inputs: the same bits as the host round trip.
    BOOST_TEST(max_difference(to_host(probabilities), expected) == 0.0f);
    BOOST_TEST(max_difference(to_host(on_device), features) == 0.0f);
  }
}

BOOST_AUTO_TEST_CASE(device_outputs_outlive_later_calls) {
  CompiledModel trunk = compile(small_models::trunk(), {.mode = Mode::reduce_overhead});
  const Tensor x1 = random_tensor({1, 3, 16, 16}, 1);
  const Tensor x2 = random_tensor({1, 3, 16, 16}, 2);
  const std::vector<Tensor> want1 = trunk({x1});
  const std::vector<DeviceTensor> first = trunk.call_on_device({x1});
  const std::vector<DeviceTensor> second = trunk.call_on_device({x2});
  trunk({x2});
  BOOST_TEST(max_difference(to_host(first), want1) == 0.0f);
  BOOST_TEST(max_difference(to_host(second), trunk({x2})) == 0.0f);
  BOOST_TEST(max_difference(to_host(first), to_host(second)) > 0.0f);  // really two calls
}

BOOST_AUTO_TEST_CASE(to_device_inputs_are_copied_on_the_device) {
  CompiledModel mlp = compile(small_models::mlp());
  const Tensor x = random_tensor({4, 32}, 9);
  const std::vector<Tensor> want = mlp({x});
  const DeviceTensor dx = mlp.to_device(x);
  BOOST_TEST(dx.on_device());
  BOOST_TEST(max_difference({dx.to_host()}, {x}) == 0.0f);
  const std::vector<DeviceTensor> got = mlp.call_on_device({dx});
  BOOST_TEST(mlp.stats().uploaded_bytes == 0u);
  BOOST_TEST(max_difference(to_host(got), want) == 0.0f);
  // The same device tensor serves any number of calls, host calls in between.
  mlp({random_tensor({4, 32}, 10)});
  BOOST_TEST(max_difference(to_host(mlp.call_on_device({dx})), want) == 0.0f);
}

BOOST_AUTO_TEST_CASE(host_and_device_inputs_mix_in_one_call) {
  Builder b("two_inputs");
  auto a = b.input("a", DType::f32, {2, 8});
  auto c = b.input("c", DType::f32, {2, 8});
  Model model = b.build({b.relu(b.sub(a, c)), b.mul(a, c)});
  const Tensor ta = random_tensor({2, 8}, 3), tc = random_tensor({2, 8}, 4);
  for (bool compiled : {false, true}) {
    std::vector<Tensor> want;
    std::vector<DeviceTensor> got;
    if (compiled) {
      CompiledModel m = compile(model);
      want = m({ta, tc});
      got = m.call_on_device({ta, m.to_device(tc)});
      BOOST_TEST(m.stats().uploaded_bytes == ta.nbytes());
    } else {
      EagerModel m = eager(model);
      want = m({ta, tc});
      got = m.call_on_device({m.to_device(ta), tc});
      BOOST_TEST(m.stats().uploaded_bytes == tc.nbytes());
    }
    BOOST_TEST(max_difference(to_host(got), want) == 0.0f);
  }
}

BOOST_AUTO_TEST_CASE(an_output_that_is_an_input_is_a_copy) {
  Builder b("passthrough");
  auto x = b.input("x", DType::f32, {3, 4});
  Model model = b.build({b.reshape(x, {4, 3}), b.relu(x)});
  CompiledModel m = compile(model);
  const Tensor tx = random_tensor({3, 4}, 8);
  const DeviceTensor dx = m.to_device(tx);
  const std::vector<DeviceTensor> out = m.call_on_device({dx});
  BOOST_TEST(out[0].on_device());
  BOOST_TEST(out[0].shape() == Shape({4, 3}));
  m.call_on_device({random_tensor({3, 4}, 9)});  // rewrites the input storage
  BOOST_TEST(max_difference({out[0].to_host()}, {tx.reshaped({4, 3})}) == 0.0f);
  BOOST_TEST(max_difference({dx.to_host()}, {tx}) == 0.0f);
}

BOOST_AUTO_TEST_CASE(submitted_calls_equal_direct_calls_in_every_mode) {
  const Tensor x = random_tensor({1, 3, 16, 16}, 12);
  EagerModel slow = eager(small_models::trunk());
  const std::vector<Tensor> eager_want = slow({x});
  BOOST_TEST(max_difference(to_host(slow.submit({x}).wait()), eager_want) == 0.0f);
  for (Mode mode : kModes) {
    CompiledModel m = compile(small_models::trunk(), {.mode = mode});
    PendingCall first = m.submit({x});  // compiles on the model's thread
    const std::vector<Tensor> got = to_host(first.wait());
    BOOST_TEST(first.ready());
    BOOST_TEST(max_difference(got, m({x})) == 0.0f);
    BOOST_TEST(max_difference(got, eager_want) < 1e-4f);
    // wait() again: the same outputs.
    BOOST_TEST(max_difference(to_host(first.wait()), got) == 0.0f);
  }
}

BOOST_AUTO_TEST_CASE(submit_copies_host_inputs_before_returning) {
  CompiledModel mlp = compile(small_models::mlp());
  Tensor x = random_tensor({4, 32}, 30);
  const std::vector<Tensor> want = mlp({x.clone()});
  PendingCall call = mlp.submit({x});
  for (float& v : x.values<float>()) v = 100.0f;  // the caller reuses its tensor at once
  BOOST_TEST(max_difference(to_host(call.wait()), want) == 0.0f);
}

BOOST_AUTO_TEST_CASE(graph_break_outputs_stay_on_the_host) {
  // Relu on the device, then NonZero (host, dynamic) and TopK (host, static).
  Builder b("breaks");
  auto x = b.input("x", DType::f32, {2, 16});
  auto relu = b.relu(x);
  graph::Attributes topk_attrs;
  topk_attrs.set("k", std::int64_t{4});
  topk_attrs.set("axis", std::int64_t{1});
  auto topk = b.op("TopK", {relu}, topk_attrs);
  auto nonzero = b.op("NonZero", {relu}, {});
  Model model = b.build({b.sigmoid(topk[0]), nonzero[0], relu});
  CompiledModel m = compile(model);
  const Tensor tx = random_tensor({2, 16}, 2);
  const std::vector<Tensor> want = m({tx});
  const std::vector<DeviceTensor> got = m.call_on_device({tx});
  BOOST_TEST_REQUIRE(got.size() == 3u);
  BOOST_TEST(got[0].on_device());   // a kernel's output (reading a host-made value)
  BOOST_TEST(!got[1].on_device());  // dynamic: the host has it
  BOOST_TEST(got[1].device() == "host");
  BOOST_TEST(got[2].on_device());
  for (std::size_t i = 0; i < got.size(); ++i) {
    const Tensor host = got[i].to_host();
    BOOST_TEST(host.shape() == want[i].shape());
    BOOST_TEST(std::memcmp(host.bytes().data(), want[i].bytes().data(), host.nbytes()) == 0, "output " << i);
  }
  // A host-held DeviceTensor is an input like any other (uploaded).
  Builder b2("count");
  auto indices = b2.input("indices", DType::i64, got[1].shape());
  CompiledModel identity = compile(b2.build({b2.reshape(indices, {-1})}));
  const Tensor flat = identity.call_on_device({got[1]})[0].to_host();
  BOOST_TEST(identity.stats().uploaded_bytes == got[1].nbytes());
  BOOST_TEST(std::memcmp(flat.bytes().data(), want[1].bytes().data(), flat.nbytes()) == 0);
}

BOOST_AUTO_TEST_CASE(errors_name_the_input_and_the_devices) {
  CompiledModel trunk = compile(small_models::trunk());
  CompiledModel mlp = compile(small_models::mlp());
  const DeviceTensor wrong_shape = mlp.to_device(random_tensor({4, 32}, 1));
  expect_error([&] { trunk.call_on_device({wrong_shape}); }, ErrorKind::ShapeMismatch,
               {"input 'x' of model 'trunk' expects f32[1, 3, 16, 16] but got f32[4, 32]"});
  // Submitted calls check their inputs before they return.
  expect_error([&] { trunk.submit({wrong_shape}); }, ErrorKind::ShapeMismatch, {"input 'x' of model 'trunk'"});
  expect_error([&] { trunk.submit({}); }, ErrorKind::ShapeMismatch, {"takes 1 input(s) but 0 were given"});
  expect_error([&] { trunk.call_on_device({DeviceTensor()}); }, ErrorKind::ShapeMismatch,
               {"expects f32[1, 3, 16, 16] but got f32[0]"});

  // Another cache folder is another device context (its own VkDevice).
  const std::string other_cache = fresh_dir("device-io-other");
  CompiledModel elsewhere = compile(small_models::mlp(), {.cache_dir = other_cache});
  const DeviceTensor foreign = elsewhere.to_device(random_tensor({4, 32}, 2));
  expect_error([&] { mlp.call_on_device({foreign}); }, ErrorKind::InvalidArgument,
               {"input 'x' of model 'mlp' is a DeviceTensor on vulkan:0", "kernel cache '" + other_cache + "'",
                "but the model runs on vulkan:0", "to_host()"});
  expect_error([&] { mlp.submit({foreign}); }, ErrorKind::InvalidArgument, {"is a DeviceTensor on vulkan:0"});
  // Through the host it is fine.
  BOOST_TEST(max_difference(to_host(mlp.call_on_device({foreign.to_host()})),
                            to_host(elsewhere.call_on_device({foreign}))) == 0.0f);
  std::filesystem::remove_all(other_cache);

  PendingCall none;
  BOOST_TEST(!none.valid());
  expect_error([&] { none.wait(); }, ErrorKind::InvalidArgument, {"holds no call"});
}

BOOST_AUTO_TEST_CASE(a_submitted_call_s_error_comes_from_wait) {
  // fullgraph with a graph break fails at compile time: on the model's thread.
  Builder b("breaks_fullgraph");
  auto x = b.input("x", DType::f32, {2, 16});
  auto nonzero = b.op("NonZero", {b.relu(x)}, {});
  CompiledModel m = compile(b.build({nonzero[0]}), {.fullgraph = true});
  PendingCall call = m.submit({random_tensor({2, 16}, 1)});
  expect_error([&] { call.wait(); }, ErrorKind::Unsupported, {"NonZero"});
  expect_error([&] { call.wait(); }, ErrorKind::Unsupported, {"NonZero"});
}

BOOST_AUTO_TEST_SUITE(command_list_copy)

struct VulkanDevice {
  std::shared_ptr<backend::Device> device = backend::get_backend("vulkan").create_device(0);
};

std::vector<std::byte> pattern(std::size_t n, unsigned seed) {
  std::vector<std::byte> bytes(n);
  std::mt19937 rng(seed);
  for (std::byte& b : bytes) b = static_cast<std::byte>(rng() & 0xff);
  return bytes;
}

BOOST_FIXTURE_TEST_CASE(copies_chain_within_one_list_and_keep_other_bytes, VulkanDevice) {
  auto a = device->allocate(256), b = device->allocate(256), c = device->allocate(256);
  const auto data = pattern(256, 1), keep = pattern(256, 2);
  device->upload(*a, 0, data);
  device->upload(*c, 0, keep);
  auto list = device->create_command_list();
  list->copy(*a, 16, *b, 64, 100);   // a[16..116) -> b[64..164)
  list->copy(*b, 64, *c, 4, 100);    // then b's copy -> c[4..104): a read after the write
  list->copy(*a, 0, *a, 128, 16);    // within one buffer, not overlapping
  list->finish();
  list->submit();
  std::vector<std::byte> got(256);
  device->download(*c, 0, got);
  std::vector<std::byte> want = keep;
  std::memcpy(want.data() + 4, data.data() + 16, 100);
  BOOST_TEST((got == want));
  device->download(*a, 128, std::span<std::byte>(got.data(), 16));
  BOOST_TEST(std::memcmp(got.data(), data.data(), 16) == 0);
}

BOOST_FIXTURE_TEST_CASE(copy_errors_are_named, VulkanDevice) {
  auto a = device->allocate(64), b = device->allocate(32);
  auto list = device->create_command_list();
  expect_error([&] { list->copy(*a, 0, *b, 0, 64); }, ErrorKind::InvalidArgument,
               {"copy destination: bytes [0, 64) exceed the buffer's 32 bytes"});
  expect_error([&] { list->copy(*a, 60, *b, 0, 8); }, ErrorKind::InvalidArgument,
               {"copy source: bytes [60, 68) exceed the buffer's 64 bytes"});
  expect_error([&] { list->copy(*a, 0, *a, 16, 32); }, ErrorKind::InvalidArgument, {"the regions overlap"});
  // A buffer of another VkDevice on the same physical device.
  auto other = backend::get_backend("vulkan").create_device(0);
  auto foreign = other->allocate(64);
  expect_error([&] { list->copy(*foreign, 0, *a, 0, 16); }, ErrorKind::InvalidArgument,
               {"copy source belongs to another device than Vulkan device 0"});
  list->finish();
  expect_error([&] { list->copy(*a, 0, *b, 0, 16); }, ErrorKind::InvalidArgument, {"after finish()"});
}

BOOST_AUTO_TEST_SUITE_END()

namespace {

// A key/value cache step: `update` written into the cache at `position`
// (TensorScatter), which a later op reads, as attention reads it.
Model cache_step_model() {
  Builder b("cache_step");
  auto past = b.input("past", DType::f32, {1, 2, 8, 4});
  auto update = b.input("update", DType::f32, {1, 2, 1, 4});
  auto position = b.input("position", DType::i64, {1});
  auto present = b.op("TensorScatter", {past, update, position}, {})[0];
  return b.build({b.relu(present), present});
}

// `cache` [1, 2, 8, 4] with row `position` of each head replaced by `update`'s.
Tensor written(const Tensor& cache, const Tensor& update, std::int64_t position) {
  Tensor out = cache.clone();
  for (std::int64_t h = 0; h < 2; ++h)
    for (std::int64_t d = 0; d < 4; ++d)
      out.values<float>()[static_cast<std::size_t>((h * 8 + position) * 4 + d)] =
          update.values<float>()[static_cast<std::size_t>(h * 4 + d)];
  return out;
}

// Eight steps into each of two device caches, alternating, then a call with
// a host cache: each device cache holds its own rows and is the output the
// call returns; the host tensor is left as it was.
template <class M>
void check_caches_updated_in_place(M& m) {
  const Tensor zeros(DType::f32, {1, 2, 8, 4});
  std::vector<DeviceTensor> caches = {m.to_device(zeros), m.to_device(zeros)};
  std::vector<Tensor> expected = {zeros, zeros};
  for (std::int64_t step = 0; step < 8; ++step)
    for (std::size_t c = 0; c < caches.size(); ++c) {
      const Tensor update = random_tensor({1, 2, 1, 4}, static_cast<unsigned>(100 + 10 * step + c));
      const std::vector<DeviceTensor> out = m.call_on_device({caches[c], update, Tensor::from_i64({1}, {step})});
      expected[c] = written(expected[c], update, step);
      BOOST_TEST(max_difference({caches[c].to_host()}, {expected[c]}) == 0.0f);  // the caller's handle
      BOOST_TEST(max_difference({out[1].to_host()}, {expected[c]}) == 0.0f);
      Tensor relu = expected[c].clone();
      for (float& v : relu.values<float>()) v = std::max(v, 0.0f);
      BOOST_TEST(max_difference({out[0].to_host()}, {relu}) == 0.0f);  // what read the cache saw it written
    }
  const Tensor host_cache = expected[0].clone();
  const Tensor update = random_tensor({1, 2, 1, 4}, 7);
  const std::vector<Tensor> out = m({host_cache, update, Tensor::from_i64({1}, {3})});
  BOOST_TEST(max_difference({out[1]}, {written(expected[0], update, 3)}) == 0.0f);
  BOOST_TEST(max_difference({host_cache}, {expected[0]}) == 0.0f);
  BOOST_TEST(max_difference({caches[1].to_host()}, {expected[1]}) == 0.0f);  // not written by the host call
}

}  // namespace

BOOST_AUTO_TEST_CASE(a_cache_given_on_the_device_is_updated_where_it_lies) {
  const Model model = cache_step_model();
  EagerModel eager_model = eager(model);
  check_caches_updated_in_place(eager_model);
  for (Mode mode : kModes) {
    BOOST_TEST_CONTEXT("mode " << mode_name(mode)) {
      CompiledModel m = compile(model, {.mode = mode});
      check_caches_updated_in_place(m);
      // One kernel writes the cache; none copies it.
      BOOST_TEST(m.stats().dispatches_per_run == 2);
    }
  }
  // The cache input has no storage of its own while calls give it on the
  // device: the first call with a host cache allocates it, once.
  CompiledModel m = compile(model);
  const Tensor zeros(DType::f32, {1, 2, 8, 4});
  const Tensor update = random_tensor({1, 2, 1, 4}, 5);
  const DeviceTensor cache = m.to_device(zeros);
  (void)m.call_on_device({cache, update, Tensor::from_i64({1}, {0})});
  const std::uint64_t device_only = m.stats().peak_device_bytes;
  for (int call = 0; call < 2; ++call) {
    (void)m({zeros, update, Tensor::from_i64({1}, {1})});
    BOOST_TEST(m.stats().peak_device_bytes == device_only + zeros.nbytes());
  }
  // A compiled-model file keeps the in-place write (the plan's storage roots).
  const std::string dir = fresh_dir("in-place-file");
  std::filesystem::create_directories(dir);
  compile_to_file(model, dir + "/cache_step.kiln");
  CompiledModel from_file = load(dir + "/cache_step.kiln");
  BOOST_TEST(from_file.stats().graph_passes_run == 0);
  check_caches_updated_in_place(from_file);
  std::filesystem::remove_all(dir);
}

// Two models with the same large weight on one device hold one copy of it:
// the second finds the first's upload (and counts none of it), and keeps it
// when the first is gone.
BOOST_AUTO_TEST_CASE(models_with_the_same_weights_share_them_on_the_device) {
  const Tensor w = random_tensor({512, 1024}, 21);  // 2 MiB
  const auto model_of = [&](std::int64_t rows) {
    Builder b("shared_weight_" + std::to_string(rows));
    auto x = b.input("x", DType::f32, {rows, 512});
    return b.build({b.matmul(x, b.constant("w", w))});
  };
  const Model one_row = model_of(1), four_rows = model_of(4);
  const Tensor x1 = random_tensor({1, 512}, 22), x4 = random_tensor({4, 512}, 23);
  auto first = std::make_unique<CompiledModel>(compile(one_row));
  const std::vector<Tensor> want1 = eager(one_row)({x1}), want4 = eager(four_rows)({x4});
  BOOST_TEST(max_difference((*first)({x1}), want1) <= 1e-4f);
  CompiledModel second = compile(four_rows);
  BOOST_TEST(max_difference(second({x4}), want4) <= 1e-4f);
  BOOST_TEST(first->stats().peak_device_bytes >= w.nbytes());
  BOOST_TEST(second.stats().peak_device_bytes < w.nbytes());
  first.reset();
  BOOST_TEST(max_difference(second({x4}), want4) <= 1e-4f);
}

// Smaller weights are packed into blocks, and a block with the same bytes at
// the same offsets is shared too (the plans of one model's shape sets share
// their weights so): the second compile uploads none of the trunk's weights,
// and keeps them when the first is gone.
BOOST_AUTO_TEST_CASE(packed_small_weights_are_shared_between_models_too) {
  const Model trunk = small_models::trunk();
  const Tensor x = random_tensor({1, 3, 16, 16}, 5);
  const std::vector<Tensor> want = eager(trunk)({x});
  auto first = std::make_unique<CompiledModel>(compile(trunk));
  BOOST_TEST(max_difference((*first)({x}), want) <= 1e-4f);
  CompiledModel second = compile(trunk);
  BOOST_TEST(max_difference(second({x}), want) <= 1e-4f);
  const std::uint64_t weights = (8u * 27 + 8 + 8 * 72) * 4;
  BOOST_TEST(first->stats().peak_device_bytes >= second.stats().peak_device_bytes + weights);
  first.reset();
  BOOST_TEST(max_difference(second({x}), want) <= 1e-4f);
}

// kiln::device_memory_use() counts what models and device tensors hold on a
// device, and gives it back when they are gone: a service's leak check. The
// models use a cache folder of their own, so the device entry is theirs.
BOOST_AUTO_TEST_CASE(device_memory_use_rises_with_models_and_returns_when_they_are_gone) {
  const std::string cache = fresh_dir("memory-use");
  auto entry = [&]() -> std::optional<DeviceMemoryUse> {
    for (const DeviceMemoryUse& use : device_memory_use())
      if (use.cache_dir == cache) return use;
    return std::nullopt;
  };
  BOOST_TEST(!entry().has_value());
  {
    CompiledModel trunk = compile(small_models::trunk(), {.mode = Mode::reduce_overhead, .cache_dir = cache});
    const Tensor x = random_tensor({1, 3, 16, 16}, 5);
    trunk({x});
    const std::optional<DeviceMemoryUse> after_call = entry();
    BOOST_TEST_REQUIRE(after_call.has_value());
    BOOST_TEST(after_call->device.rfind("vulkan:", 0) == 0u, after_call->device);
    BOOST_TEST(after_call->buffers > 0u);
    // At least the weights (8*3*3*3 + 8 + 8*8*3*3 floats) and the output.
    BOOST_TEST(after_call->bytes >= (8u * 27 + 8 + 8 * 72) * 4 + 8u * 16 * 16 * 4);
    BOOST_TEST(after_call->peak_bytes >= after_call->bytes);
    {
      const DeviceTensor kept = trunk.to_device(x);
      BOOST_TEST(entry()->bytes >= after_call->bytes + x.nbytes());
      BOOST_TEST(entry()->buffers == after_call->buffers + 1);
    }
    BOOST_TEST(entry()->bytes == after_call->bytes);  // the tensor's buffer is given back
    // Calls reuse the plan's buffers: none are made per call.
    for (int i = 0; i < 3; ++i) trunk({x});
    BOOST_TEST(entry()->bytes == after_call->bytes);
    BOOST_TEST(entry()->buffers == after_call->buffers);
  }
  BOOST_TEST(!entry().has_value());  // the device closed with its last model
  std::filesystem::remove_all(cache);
}
