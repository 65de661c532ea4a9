#include "src/tune/measure.h"

#include "graph/op_registry.h"
#include "src/base/check.h"
#include "src/lower/target_policy.h"
#include "src/render/cstyle.h"
#include "src/tune/choice.h"

#include <kiln/error.h>
#include <kiln/float16.h>

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <span>
#include <set>
#include <thread>

namespace kiln::tune {

namespace {

using Clock = std::chrono::steady_clock;

// A binding's bytes: at least one element, four bytes each (f32) or two
// (f16, bf16), rounded up to a whole four.
std::uint64_t buffer_bytes(std::int64_t elements, DType dtype) {
  const std::uint64_t bytes = static_cast<std::uint64_t>(std::max<std::int64_t>(elements, 1)) * dtype_size(dtype);
  return (bytes + 3) / 4 * 4;
}

}  // namespace

OutputError output_error(std::span<const float> got, std::span<const double> want) {
  double scale = 1;
  for (double w : want)
    if (std::isfinite(w)) scale = std::max(scale, std::fabs(w));
  OutputError out;
  for (std::size_t i = 0; i < got.size() && i < want.size(); ++i) {
    if (!std::isfinite(want[i]) && (std::isnan(want[i]) ? std::isnan(got[i]) : static_cast<double>(got[i]) == want[i]))
      continue;
    const double error = std::fabs(static_cast<double>(got[i]) - want[i]) / scale;
    if (!(error <= out.error)) {  // NaN included
      out = {error, i};
      if (std::isnan(error)) break;
    }
  }
  return out;
}

CandidateResult failed_candidate(const std::string& knobs, CandidateStatus status, std::string detail) {
  CandidateResult result;
  result.knobs = knobs;
  result.status = status;
  result.detail = std::move(detail);
  return result;
}

CandidateStatus status_of(const Error& error, CandidateStatus otherwise) {
  return error.kind() == ErrorKind::OutOfMemory ? CandidateStatus::out_of_memory : otherwise;
}

std::vector<double> time_calls(const MeasureOptions& options, const std::function<double(int)>& call) {
  // Far slower than the best so far on its first warm-up run: that run is its only timing.
  if (options.warmup > 0) {
    const double first_warm_ms = call(0);
    if (options.give_up_ms > 0 && first_warm_ms > options.give_up_ms) return {first_warm_ms};
  }
  for (int w = 1; w < options.warmup; ++w) call(w);
  std::vector<double> times;
  const Clock::time_point start = Clock::now();
  for (int r = 0; r < options.max_repeats; ++r) {
    times.push_back(call(r));
    if (std::chrono::duration<double>(Clock::now() - start).count() >= options.time_cap_s) break;
    if (r + 1 >= options.min_repeats && summarize(times).spread <= options.target_spread) break;
  }
  return times;
}

std::string injected_fault(const std::string& knobs) {
  const char* value = std::getenv(kFaultVariable);
  if (!value) return "";
  const std::string text = value;
  for (std::size_t start = 0; start <= text.size();) {
    const std::size_t end = std::min(text.find(';', start), text.size());
    const std::string entry = text.substr(start, end - start);
    const std::size_t equals = entry.find('=');
    if (equals != std::string::npos && entry.substr(equals + 1) == knobs) return entry.substr(0, equals);
    start = end + 1;
  }
  return "";
}

void crash_or_hang_if_injected(const std::string& fault) {
  if (fault == "crash") {
    const rlimit no_core{0, 0};  // a deliberate crash leaves no core file behind
    setrlimit(RLIMIT_CORE, &no_core);
    std::abort();
  }
  if (fault == "hang")
    for (;;) std::this_thread::sleep_for(std::chrono::seconds(1));
}

std::vector<float> random_values(std::size_t count, std::uint64_t seed) {
  std::vector<float> values(count);
  std::uint64_t state = seed;
  for (float& v : values) {
    std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    v = static_cast<float>(static_cast<double>(z >> 40) / double(1ull << 24) * 2.0 - 1.0);
  }
  return values;
}

struct Measurer::Reference {
  std::vector<Tensor> inputs;                // per present input, in kernel buffer order (f32, f16 or bf16)
  std::vector<DType> output_types;           // per output
  std::vector<std::vector<double>> outputs;  // per output, as f32 values
};

Measurer::Measurer(const backend::Backend& backend, std::shared_ptr<backend::Device> device)
    : backend_(backend), device_(std::move(device)) {}

Measurer::~Measurer() = default;

const Measurer::Reference& Measurer::reference(const Site& site, const MeasureOptions& options) {
  const std::string key = to_json(site) + "#" + std::to_string(options.seed);
  auto it = references_.find(key);
  if (it != references_.end()) return *it->second;
  auto ref = std::make_unique<Reference>();
  std::vector<Tensor> args;
  std::uint64_t seed = options.seed;
  for (const std::optional<graph::TensorType>& type : site.inputs) {
    if (!type) {
      args.emplace_back();
      continue;
    }
    KILN_CHECK(type->dtype == DType::f32 || type->dtype == DType::f16 || type->dtype == DType::bf16,
               ErrorKind::Unsupported, "tuning site '" + site.node.name + "': only float inputs are measured");
    const Tensor values =
        Tensor::from_f32(type->shape, random_values(static_cast<std::size_t>(num_elements(type->shape)), seed++));
    ref->inputs.push_back(type->dtype == DType::f32 ? values : values.to(type->dtype));
    args.push_back(ref->inputs.back());
  }
  const std::vector<Tensor> results = graph::get_op(site.node.op).reference(site.node, args);
  for (const Tensor& result : results) {
    ref->output_types.push_back(result.dtype());
    const Tensor wide = result.dtype() == DType::f32 ? result : result.to(DType::f32);
    const std::span<const float> values = wide.values<float>();
    ref->outputs.emplace_back(values.begin(), values.end());
  }
  return *references_.emplace(key, std::move(ref)).first->second;
}

Measurer::Built Measurer::build(const Site& site, const std::string& knobs) const {
  if (injected_fault(knobs) == "crash_compile") crash_or_hang_if_injected("crash");
  const backend::TargetDesc& target = device_->target();
  Built built;
  try {
    built.kernel = site.lower(lower::target_policy(target).lower, knobs);
  } catch (const Error& error) {
    built.failed = failed_candidate(knobs, CandidateStatus::compile_failed, std::string("lowering failed: ") + error.what());
    return built;
  }
  if (!built.kernel.tuning_site || built.kernel.tuning_site->knobs != knobs) {
    built.failed =
        failed_candidate(knobs, CandidateStatus::compile_failed, "lowering did not take these knobs (its warning says why)");
    return built;
  }
  if (auto why = backend_.supports(render::kernel_requirements(built.kernel), target)) {
    built.failed = failed_candidate(knobs, CandidateStatus::compile_failed, *why);
    return built;
  }
  try {
    built.source = render::make_kernel_source(built.kernel, backend_.language_for(target));
    built.binary = backend_.compiler().compile(built.source, target);
  } catch (const Error& error) {
    built.failed = failed_candidate(knobs, status_of(error, CandidateStatus::compile_failed), error.what());
  }
  return built;
}

void Measurer::compile_ahead(const Site& site, const std::vector<std::string>& knobs, int threads) {
  const std::string site_key = to_json(site) + "#";
  std::vector<std::string> todo;
  for (const std::string& k : knobs)
    if (!built_.count(site_key + k) && std::ranges::find(todo, k) == todo.end()) todo.push_back(k);
  std::vector<Built> done(todo.size());
  std::atomic<std::size_t> next{0};
  auto work = [&] {
    for (std::size_t i = next++; i < todo.size(); i = next++) try {
        done[i] = build(site, todo[i]);
      } catch (const std::exception& error) {  // as the worker reports one from measure()
        done[i].failed = failed_candidate(todo[i], CandidateStatus::crashed, std::string("tuning worker error: ") + error.what());
      }
  };
  std::vector<std::jthread> pool;
  const std::size_t helpers = std::min<std::size_t>(static_cast<std::size_t>(std::max(threads, 1)), todo.size());
  for (std::size_t t = 1; t < helpers; ++t) pool.emplace_back(work);
  work();
  pool.clear();  // joins
  for (std::size_t i = 0; i < todo.size(); ++i) built_.emplace(site_key + todo[i], std::move(done[i]));
}

CandidateResult Measurer::measure(const Site& site, const std::string& knobs, const MeasureOptions& options) {
  const std::string fault = injected_fault(knobs);
  crash_or_hang_if_injected(fault);

  const backend::TargetDesc& target = device_->target();
  Built built;
  if (auto ahead = built_.find(to_json(site) + "#" + knobs); ahead != built_.end()) {
    built = std::move(ahead->second);
    built_.erase(ahead);
  } else {
    built = build(site, knobs);
  }
  if (built.failed) return *built.failed;
  const kir::Kernel& kernel = built.kernel;

  std::shared_ptr<backend::LoadedKernel> loaded;
  try {
    loaded = device_->load_kernel(built.source, built.binary);
  } catch (const Error& error) {
    return failed_candidate(knobs, status_of(error, CandidateStatus::compile_failed), error.what());
  }

  const Reference& ref = reference(site, options);
  std::vector<std::int64_t> elements;  // per kernel buffer: present inputs, then outputs
  std::vector<DType> dtypes;
  for (const std::optional<graph::TensorType>& type : site.inputs)
    if (type) {
      elements.push_back(num_elements(type->shape));
      dtypes.push_back(type->dtype);
    }
  for (const graph::TensorType& type : site.outputs) {
    elements.push_back(num_elements(type.shape));
    dtypes.push_back(type.dtype);
  }
  if (elements.size() != kernel.buffers.size())
    return failed_candidate(knobs, CandidateStatus::compile_failed,
                  "the kernel binds " + std::to_string(kernel.buffers.size()) + " buffers, the node has " +
                      std::to_string(elements.size()) + " inputs and outputs");
  std::uint64_t copy_bytes = 0;
  for (std::size_t i = 0; i < elements.size(); ++i) copy_bytes += buffer_bytes(elements[i], dtypes[i]);
  const int copies = static_cast<int>(std::clamp<std::uint64_t>((options.rotate_bytes + copy_bytes - 1) / copy_bytes,
                                                                1, static_cast<std::uint64_t>(std::max(options.max_copies, 1))));
  const std::size_t first_output = ref.inputs.size();

  CandidateResult result;
  result.knobs = knobs;
  try {
    std::vector<std::vector<std::shared_ptr<backend::Buffer>>> storage(static_cast<std::size_t>(copies));
    std::vector<std::unique_ptr<backend::CommandList>> lists;
    const std::array<std::uint32_t, 3> grid = kir::dispatch_grid(kernel, target.max_workgroup_count[0]);
    for (auto& buffers : storage) {
      std::vector<backend::BufferBinding> bindings;
      for (std::size_t i = 0; i < elements.size(); ++i) {
        const std::uint64_t bytes = buffer_bytes(elements[i], dtypes[i]);
        buffers.push_back(device_->allocate(bytes));
        if (i < first_output) device_->upload(*buffers.back(), 0, ref.inputs[i].bytes());
        bindings.push_back({buffers.back().get(), 0, bytes});
      }
      lists.push_back(device_->create_command_list());
      lists.back()->dispatch(*loaded, grid, bindings, kernel.params);
      lists.back()->finish();
    }

    static std::set<std::string> measured_before;  // for the slow_first fault
    const double slowdown = fault == "slow_first" && measured_before.insert(knobs).second ? 10.0 : 1.0;
    auto timed_submit = [&](backend::CommandList& list) {
      const Clock::time_point before = Clock::now();
      list.submit();
      const double host_ms = std::chrono::duration<double, std::milli>(Clock::now() - before).count();
      return list.last_device_ms().value_or(host_ms) * slowdown;
    };
    // Verify on copy 0, its outputs first filled with NaN so an element the kernel never writes fails.
    const auto output_shape = [&](std::size_t o) { return Shape{static_cast<std::int64_t>(ref.outputs[o].size())}; };
    for (std::size_t o = 0; o < ref.outputs.size(); ++o) {
      const Tensor poison =
          Tensor::from_f32(output_shape(o), std::vector<float>(ref.outputs[o].size(), std::numeric_limits<float>::quiet_NaN()))
              .to(ref.output_types[o]);
      device_->upload(*storage[0][first_output + o], 0, poison.bytes());
    }
    timed_submit(*lists[0]);
    for (std::size_t o = 0; o < ref.outputs.size(); ++o) {
      Tensor stored(ref.output_types[o], output_shape(o));
      device_->download(*storage[0][first_output + o], 0, stored.bytes());
      const Tensor wide = stored.dtype() == DType::f32 ? stored : stored.to(DType::f32);
      std::vector<float> got(wide.values<float>().begin(), wide.values<float>().end());
      if (fault == "wrong" && !got.empty()) got.back() += 1.0f;  // the test hook: an edge element off by one
      const auto [worst, worst_at] = output_error(got, ref.outputs[o]);
      // A 16-bit output may land one value away from the reference's.
      const DType dtype = ref.output_types[o];
      const double tolerance =
          dtype == DType::f32 ? options.tolerance : std::max(options.tolerance, 2 * float_epsilon(dtype));
      if (!(worst <= tolerance))
        return failed_candidate(knobs, CandidateStatus::wrong_result,
                      "output " + std::to_string(o) + " element " + std::to_string(worst_at) + " is " +
                          std::to_string(got[worst_at]) + ", expected " + std::to_string(ref.outputs[o][worst_at]) +
                          " (relative error " + std::to_string(worst) + ", tolerance " +
                          std::to_string(tolerance) + ")");
    }

    result.times_ms = time_calls(options, [&](int i) {
      return timed_submit(*lists[static_cast<std::size_t>(i % copies)]);
    });
  } catch (const Error& error) {
    return failed_candidate(knobs, status_of(error, CandidateStatus::crashed), std::string("device error: ") + error.what());
  }
  const TimeSummary summary = summarize(result.times_ms);
  result.status = CandidateStatus::ok;
  result.median_ms = summary.median;
  result.spread = summary.spread;
  return result;
}

}  // namespace kiln::tune
