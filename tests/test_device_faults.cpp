// Device faults injected at every call (src/runtime/fault_injection.h): for
// each backend with a device here, each way a model runs (eager, default,
// reduce-overhead) and each counted device call of creating a model and
// calling it twice (directly, and through submit() and wait(), where the
// fault meets the model's own thread), that call fails, once as out of
// memory and once as a lost device. Every run ends in a kiln::Error of that kind naming the
// operation, never a crash, hang or wrong output; after out of memory the
// same model answers its next call with the unfaulted outputs, bit for bit;
// after a lost device every later call fails cleanly, and the documented
// recovery (destroy the models, create them again) works. Once the models
// are gone kiln holds no device memory (kiln::device_memory_use). The sanitizer
// build runs it too (suite fast): no leak on any of these paths.
#include <boost/test/unit_test.hpp>

#include <kiln/kiln.h>

#include "small_models.h"
#include "src/runtime/fault_injection.h"

#include <cstring>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace {

using kiln::runtime::FaultInjector;

struct Way {
  std::string name;
  std::optional<kiln::Mode> mode;  // nullopt: eager
  bool submitted = false;          // calls through submit() and wait(), on the model's own thread
};

// A model made ready to call on `backend`, its way.
class Runner {
 public:
  Runner(const kiln::Model& model, const std::string& backend, const Way& way) : submitted_(way.submitted) {
    if (way.mode)
      compiled_.emplace(kiln::compile(model, {.backend = backend, .mode = *way.mode}));
    else
      eager_.emplace(kiln::eager(model, {.backend = backend}));
  }
  std::vector<kiln::Tensor> operator()(const std::vector<kiln::Tensor>& inputs) {
    if (submitted_) {
      const std::vector<kiln::CallInput> call(inputs.begin(), inputs.end());
      const std::vector<kiln::DeviceTensor> out = compiled_ ? compiled_->submit(call).wait() : eager_->submit(call).wait();
      std::vector<kiln::Tensor> host;
      for (const kiln::DeviceTensor& t : out) host.push_back(t.to_host());
      return host;
    }
    return compiled_ ? (*compiled_)(inputs) : (*eager_)(inputs);
  }

 private:
  bool submitted_ = false;
  std::optional<kiln::CompiledModel> compiled_;
  std::optional<kiln::EagerModel> eager_;
};

bool same_bits(const std::vector<kiln::Tensor>& a, const std::vector<kiln::Tensor>& b) {
  if (a.size() != b.size()) return false;
  for (std::size_t i = 0; i < a.size(); ++i)
    if (a[i].nbytes() != b[i].nbytes() || std::memcmp(a[i].bytes().data(), b[i].bytes().data(), a[i].nbytes()) != 0)
      return false;
  return true;
}

// Runs `step` and returns the kind of the kiln::Error it threw (checking that
// the message names the injected fault or the lost device), or nullopt.
std::optional<kiln::ErrorKind> error_of(const std::function<void()>& step) {
  try {
    step();
  } catch (const kiln::Error& e) {
    const std::string what = e.what();
    BOOST_TEST((what.find("injected fault") != std::string::npos || what.find("the device was lost") != std::string::npos),
               what);
    return e.kind();
  }
  return std::nullopt;
}

// What every model gone should leave: no device memory (a buffer still
// counted is a leak on the error path).
std::uint64_t device_bytes_held() {
  std::uint64_t bytes = 0;
  for (const kiln::DeviceMemoryUse& use : kiln::device_memory_use()) {
    if (use.bytes > 0) BOOST_TEST_MESSAGE(use.device << ": " << use.bytes << " bytes in " << use.buffers << " buffers");
    bytes += use.bytes;
  }
  return bytes;
}

// Sets the injector for the scope, and clears it on the way out.
struct Injecting {
  explicit Injecting(std::shared_ptr<FaultInjector> faults) { kiln::runtime::set_fault_injector(std::move(faults)); }
  ~Injecting() { kiln::runtime::set_fault_injector(nullptr); }
};

void walk_faults(const std::string& backend, const Way& way) {
  const kiln::Model model = small_models::trunk();
  const std::vector<kiln::Tensor> inputs = {small_models::random_tensor({1, 3, 16, 16}, 5)};
  // The unfaulted run: its outputs, and how many counted calls it makes.
  std::vector<kiln::Tensor> want;
  std::uint64_t calls = 0;
  {
    auto counter = std::make_shared<FaultInjector>(0, kiln::ErrorKind::OutOfMemory);
    Injecting injecting(counter);
    Runner run(model, backend, way);
    run(inputs);
    want = run(inputs);
    calls = counter->calls();
  }
  BOOST_TEST_MESSAGE(backend << " " << way.name << ": " << calls << " counted device calls");
  BOOST_REQUIRE(calls >= 4u);

  for (std::uint64_t n = 1; n <= calls; ++n) {
    BOOST_TEST_CONTEXT(backend << " " << way.name << ", call " << n << " of " << calls << " out of memory") {
      auto faults = std::make_shared<FaultInjector>(n, kiln::ErrorKind::OutOfMemory);
      Injecting injecting(faults);
      std::unique_ptr<Runner> run;
      // The unfaulted run's steps (make the model, call it twice) until two
      // calls have answered: the one that meets the fault fails, and is
      // simply tried again.
      int answers = 0, failures = 0;
      for (int attempt = 0; attempt < 4 && answers < 2; ++attempt) {
        std::vector<kiln::Tensor> got;
        const auto kind = error_of([&] {
          if (!run) run = std::make_unique<Runner>(model, backend, way);
          got = (*run)(inputs);
        });
        if (kind) {
          BOOST_TEST((*kind == kiln::ErrorKind::OutOfMemory));
          ++failures;
        } else {
          BOOST_TEST(same_bits(got, want));
          ++answers;
        }
      }
      BOOST_TEST(answers == 2);
      BOOST_TEST(failures == 1);
      BOOST_TEST(faults->fired());
    }
    BOOST_TEST(device_bytes_held() == 0u, "device memory kept after a fault at call " << n);
  }

  for (std::uint64_t n = 1; n <= calls; ++n) {
    BOOST_TEST_CONTEXT(backend << " " << way.name << ", call " << n << " of " << calls << " device lost") {
      {
        auto faults = std::make_shared<FaultInjector>(n, kiln::ErrorKind::DeviceUnavailable);
        Injecting injecting(faults);
        std::unique_ptr<Runner> run;
        std::optional<kiln::ErrorKind> first;
        for (int attempt = 0; attempt < 3 && !first; ++attempt)
          first = error_of([&] {
            if (!run) run = std::make_unique<Runner>(model, backend, way);
            (*run)(inputs);
          });
        BOOST_TEST(faults->fired());
        BOOST_TEST((first == kiln::ErrorKind::DeviceUnavailable));
        // Every later call on the lost device fails the same way.
        if (run) BOOST_TEST((error_of([&] { (*run)(inputs); }) == kiln::ErrorKind::DeviceUnavailable));
      }
      // The recovery: the models on the lost device gone, a new one works.
      Runner again(model, backend, way);
      BOOST_TEST(same_bits(again(inputs), want));
    }
    BOOST_TEST(device_bytes_held() == 0u, "device memory kept after a lost device at call " << n);
  }
}

bool init_suite() {
  auto& master = boost::unit_test::framework::master_test_suite();
  const std::vector<Way> ways = {{"eager", std::nullopt},
                                 {"default", kiln::Mode::default_},
                                 {"reduce-overhead", kiln::Mode::reduce_overhead},
                                 {"default-submitted", kiln::Mode::default_, true},
                                 {"reduce-overhead-submitted", kiln::Mode::reduce_overhead, true}};
  for (const kiln::BackendDescription& b : kiln::list_backends()) {
    if (!b.available || b.devices.empty()) continue;
    auto* suite = BOOST_TEST_SUITE(b.name);
    for (const Way& way : ways) {
      const std::string backend = b.name;
      suite->add(boost::unit_test::make_test_case([backend, way] { walk_faults(backend, way); }, way.name, __FILE__,
                                                  __LINE__));
    }
    master.add(suite);
  }
  return true;
}

}  // namespace

int main(int argc, char* argv[]) { return boost::unit_test::unit_test_main(&init_suite, argc, argv); }
