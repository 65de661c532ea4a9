// Thread safety (include/kiln/kiln.h, "Threads"): several threads calling
// one model, several models calling one device at once, first calls racing
// to compile, submitted calls from several threads. Built and run under the
// thread sanitizer too (.ci/run), where any report fails the run.
#define BOOST_TEST_MODULE threads
#include <boost/test/unit_test.hpp>

#include <kiln/kiln.h>

#include "backends/vulkan/buffer.h"
#include "backends/vulkan/device.h"
#include "backends/vulkan/instance.h"
#include "backends/vulkan/physical_device.h"
#include "src/runtime/device_pool.h"
#include "src/runtime/executor.h"
#include "small_models.h"
#include "src/runtime/internal_access.h"

#include <atomic>
#include <cstring>
#include <filesystem>
#include <functional>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace kiln;
using small_models::max_difference;
using small_models::random_tensor;
using small_models::to_host;

namespace {

constexpr int kThreads = 4;
constexpr int kCallsPerThread = 6;

std::string fresh_dir(const std::string& name) {
  const auto dir = std::filesystem::temp_directory_path() /
                   ("kiln-test-" + name + "-" + std::to_string(std::random_device{}()));
  std::filesystem::remove_all(dir);
  return dir.string();
}

// Runs body(t) on `threads` threads that start together; Boost.Test's
// assertions are not thread-safe, so bodies record failures as text.
void run_threads(int threads, const std::function<void(int, std::vector<std::string>&)>& body) {
  std::vector<std::vector<std::string>> failures(threads);
  std::atomic<int> waiting = threads;
  {
    std::vector<std::jthread> pool;
    for (int t = 0; t < threads; ++t)
      pool.emplace_back([&, t] {
        --waiting;
        while (waiting.load() > 0) std::this_thread::yield();
        try {
          body(t, failures[t]);
        } catch (const std::exception& e) {
          failures[t].push_back(std::string("threw: ") + e.what());
        }
      });
  }
  for (int t = 0; t < threads; ++t)
    for (const std::string& failure : failures[t]) BOOST_ERROR("thread " << t << ": " << failure);
}

// Inputs per (thread, call), and the outputs one thread computed for them first.
struct Workload {
  std::vector<std::vector<Tensor>> inputs;
  std::vector<std::vector<Tensor>> expected;
  std::vector<Tensor>& at(int thread, int call) { return inputs[thread * kCallsPerThread + call]; }
};

template <class Callable>
Workload make_workload(Callable& model, const Shape& input_shape, unsigned seed) {
  Workload w;
  for (int i = 0; i < kThreads * kCallsPerThread; ++i) {
    w.inputs.push_back({random_tensor(input_shape, seed + i)});
    w.expected.push_back(model(w.inputs.back()));
  }
  return w;
}

// Each thread's calls against what one thread computed for the same inputs.
void expect_same(const std::vector<Tensor>& got, const std::vector<Tensor>& want, const std::string& what,
                 std::vector<std::string>& failures) {
  if (got.size() != want.size()) return failures.push_back(what + ": " + std::to_string(got.size()) + " outputs");
  for (std::size_t i = 0; i < got.size(); ++i)
    if (got[i].shape() != want[i].shape() || max_abs_diff(got[i], want[i]) != 0.0f)
      failures.push_back(what + ": output " + std::to_string(i) + " differs from the single-threaded call");
}

}  // namespace

BOOST_AUTO_TEST_CASE(threads_calling_one_model_get_their_own_outputs) {
  for (Mode mode : {Mode::default_, Mode::reduce_overhead}) {
    CompiledModel model = compile(small_models::trunk(), {.mode = mode});
    Workload w = make_workload(model, {1, 3, 16, 16}, 100);
    run_threads(kThreads, [&](int t, std::vector<std::string>& failures) {
      for (int c = 0; c < kCallsPerThread; ++c) {
        const std::string what = "call " + std::to_string(c);
        const std::vector<Tensor>& want = w.expected[t * kCallsPerThread + c];
        // Host calls, device calls and submitted calls interleave on one model.
        switch (c % 3) {
          case 0: expect_same(model(w.at(t, c)), want, what, failures); break;
          case 1: expect_same(to_host(model.call_on_device({w.at(t, c)[0]})), want, what, failures); break;
          default: expect_same(to_host(model.submit({w.at(t, c)[0]}).wait()), want, what, failures); break;
        }
        const RunStats stats = model.stats();  // read while other threads call
        if (stats.dispatches_per_run <= 0) failures.push_back("stats() without dispatches");
      }
    });
  }
}

BOOST_AUTO_TEST_CASE(models_sharing_a_device_run_at_once) {
  CompiledModel trunk = compile(small_models::trunk(), {.mode = Mode::reduce_overhead});
  CompiledModel mlp = compile(small_models::mlp());
  EagerModel head = eager(small_models::head());
  Workload trunk_work = make_workload(trunk, {1, 3, 16, 16}, 200);
  Workload mlp_work = make_workload(mlp, {4, 32}, 300);
  Workload head_work = make_workload(head, {1, 8, 16, 16}, 400);
  // One device: the pool hands every model the same context.
  BOOST_TEST(trunk.to_device(Tensor()).device() == mlp.to_device(Tensor()).device());
  BOOST_TEST(&kiln::internal::engine(trunk) != &kiln::internal::engine(mlp));
  run_threads(3, [&](int t, std::vector<std::string>& failures) {
    for (int i = 0; i < kThreads * kCallsPerThread; ++i) {
      const std::string what = "call " + std::to_string(i);
      if (t == 0) expect_same(trunk(trunk_work.inputs[i]), trunk_work.expected[i], "trunk " + what, failures);
      if (t == 1) expect_same(mlp(mlp_work.inputs[i]), mlp_work.expected[i], "mlp " + what, failures);
      if (t == 2) expect_same(head(head_work.inputs[i]), head_work.expected[i], "head " + what, failures);
    }
  });
}

BOOST_AUTO_TEST_CASE(first_calls_race_to_compile_one_model) {
  const std::string cache = fresh_dir("threads-first-call");
  CompiledModel model = compile(small_models::trunk(), {.cache_dir = cache});
  CompiledModel reference = compile(small_models::trunk(), {.cache_dir = "off"});
  Workload w = make_workload(reference, {1, 3, 16, 16}, 500);
  run_threads(kThreads, [&](int t, std::vector<std::string>& failures) {
    expect_same(model(w.at(t, 0)), w.expected[t * kCallsPerThread], "first call", failures);
  });
  // Compiled once: the one compile found every kernel missing from the empty cache.
  const RunStats stats = model.stats();
  BOOST_TEST_REQUIRE(kiln::internal::engine(model).plan() != nullptr);
  BOOST_TEST(stats.kernel_cache_misses == static_cast<int>(kiln::internal::engine(model).plan()->rendered.size()));
  BOOST_TEST(stats.kernel_cache_hits == 0);
  std::filesystem::remove_all(cache);
}

BOOST_AUTO_TEST_CASE(models_of_one_graph_compile_at_once_on_one_device) {
  const std::string cache = fresh_dir("threads-compile-race");
  const Model source = small_models::trunk();
  CompiledModel reference = compile(source, {.cache_dir = "off"});
  Workload w = make_workload(reference, {1, 3, 16, 16}, 600);
  std::vector<CompiledModel> models;
  for (int t = 0; t < kThreads; ++t)
    models.push_back(compile(source, {.mode = t % 2 ? Mode::reduce_overhead : Mode::default_, .cache_dir = cache}));
  run_threads(kThreads, [&](int t, std::vector<std::string>& failures) {
    if (t == 0) models[t].prepare();
    for (int c = 0; c < kCallsPerThread; ++c)
      expect_same(models[t](w.at(t, c)), w.expected[t * kCallsPerThread + c], "call " + std::to_string(c), failures);
  });
  // Kernels raced into one cache: one loaded kernel per distinct source.
  auto device = runtime::acquire_device("vulkan", "", cache);
  BOOST_TEST(device->kernels->distinct_kernels() == static_cast<int>(kiln::internal::engine(models[0]).plan()->rendered.size()));
  // The plan cache entries written at once are whole: a new model reads one.
  CompiledModel warm = compile(source, {.cache_dir = cache});
  BOOST_TEST(max_difference(warm(w.inputs[0]), w.expected[0]) == 0.0f);
  BOOST_TEST(warm.stats().plan_from_cache);
  std::filesystem::remove_all(cache);
}

BOOST_AUTO_TEST_CASE(calls_submitted_from_several_threads_finish_in_order) {
  CompiledModel model = compile(small_models::mlp(), {.mode = Mode::reduce_overhead});
  Workload w = make_workload(model, {4, 32}, 700);
  // Each thread submits all its calls, then waits for the last one first:
  // the calls it submitted before must be finished by then.
  run_threads(kThreads, [&](int t, std::vector<std::string>& failures) {
    std::vector<PendingCall> calls;
    for (int c = 0; c < kCallsPerThread; ++c) calls.push_back(model.submit({w.at(t, c)[0]}));
    const std::vector<Tensor> last = to_host(calls.back().wait());
    for (int c = 0; c < kCallsPerThread; ++c) {
      if (!calls[c].ready()) failures.push_back("call " + std::to_string(c) + " not finished after a later one");
      expect_same(to_host(calls[c].wait()), w.expected[t * kCallsPerThread + c], "call " + std::to_string(c),
                  failures);
    }
  });
}

BOOST_AUTO_TEST_CASE(chains_of_device_calls_on_several_threads) {
  CompiledModel trunk = compile(small_models::trunk());
  CompiledModel head = compile(small_models::head(), {.mode = Mode::reduce_overhead});
  std::vector<Tensor> inputs;
  std::vector<std::vector<Tensor>> expected;
  for (int i = 0; i < kThreads; ++i) {
    inputs.push_back(random_tensor({1, 3, 16, 16}, 800 + i));
    expected.push_back(head(trunk({inputs.back()})));
  }
  run_threads(kThreads, [&](int t, std::vector<std::string>& failures) {
    for (int c = 0; c < 3; ++c) {
      const std::vector<DeviceTensor> features = trunk.submit({inputs[t]}).wait();
      expect_same(to_host(head.call_on_device({features[0]})), expected[t], "chain " + std::to_string(c), failures);
    }
  });
}

BOOST_AUTO_TEST_CASE(dropping_a_model_waits_for_its_submitted_calls) {
  std::vector<PendingCall> calls;
  Workload w;
  {
    CompiledModel model = compile(small_models::mlp());
    w = make_workload(model, {4, 32}, 900);
    for (int c = 0; c < kCallsPerThread; ++c) calls.push_back(model.submit({w.inputs[c][0]}));
  }  // the last copy goes: its destructor runs the queued calls first
  for (int c = 0; c < kCallsPerThread; ++c) {
    BOOST_TEST(calls[c].ready());
    BOOST_TEST(max_difference(to_host(calls[c].wait()), w.expected[c]) == 0.0f);
  }
}

BOOST_AUTO_TEST_CASE(threads_share_a_device_s_staging_copier_and_queue) {
  // The discrete-GPU path (no mapped device memory): every upload and
  // download goes through the device's one staging buffer.
  namespace kv = backend::vulkan;
  const auto instance = kv::Instance::shared();
  kv::VulkanDevice device(instance, kv::query_physical_devices(*instance).at(0), 0,
                          kv::DeviceOptions{.map_device_memory = false});
  run_threads(kThreads, [&](int t, std::vector<std::string>& failures) {
    std::mt19937 rng(static_cast<unsigned>(t));
    for (int round = 0; round < 8; ++round) {
      const std::size_t bytes = 64 + 16 * (rng() % 64);
      std::vector<std::byte> data(bytes), back(bytes);
      for (std::byte& b : data) b = static_cast<std::byte>(rng() & 0xff);
      auto a = device.allocate(bytes), b = device.allocate(bytes + 32);
      if (dynamic_cast<kv::VulkanBuffer&>(*a).mapped() != nullptr) return failures.push_back("a mapped buffer");
      device.upload(*a, 0, data);
      auto list = device.create_command_list();
      list->copy(*a, 0, *b, 32, bytes);
      list->finish();
      list->submit();
      device.download(*b, 32, back);
      if (std::memcmp(back.data(), data.data(), bytes) != 0)
        failures.push_back("round " + std::to_string(round) + ": the copy came back different");
    }
  });
}
