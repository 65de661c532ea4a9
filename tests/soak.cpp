// soak: kiln as a long-running service uses it, for a stated time. Threads
// (8 by default) call four compiled models of different kinds, two threads
// per model, each model destroyed and compiled again (warm, from the caches)
// every few iterations while the other thread may still be calling it:
//
//   segmentation  U-Net with symbolic batch, height and width, called at five
//                 image sizes with a recompile limit of three: two sizes run
//                 eagerly past the limit (eager_past_recompile_limit);
//   decoder       GPT-2 (tiny) with its key/value cache, reduce-overhead: a
//                 prefill and four decode steps, the cache passed from step
//                 to step as device tensors (call_on_device), its length
//                 growing (automatic dynamic shapes);
//   speech        a log-mel front end, LSTMs and a GRU over audio chunks of
//                 two lengths, submit() and wait(), the recurrent states
//                 kept on the device between chunks;
//   detector      SSDLite whole, its post-processing (data-dependent shapes,
//                 an If) run on the host between compiled segments.
//
// Every output is checked against eager mode's (computed once before the
// threads start). Host RSS, malloc's bytes in use, the device memory kiln holds
// (kiln::device_memory_use), open files and threads are sampled; the summary
// gives each one's slope after warm-up (the first quarter of the run). At
// the end every model is destroyed and the device memory kiln holds must
// return to nothing. Exit 0 when every call answered correctly and no
// memory was kept, 1 otherwise (2: bad arguments). The models are
// tests/fixtures/pytorch's exports with generated weights.
//
//   build/tests/soak --duration 1h --samples soak.csv
//   build/tests/soak --duration 2m --threads 8 --backend cpu
#include <kiln/kiln.h>
#include <kiln/npy.h>

#include "pytorch_exports.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <malloc.h>
#include <unistd.h>

namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

// ---- what a service would watch ---------------------------------------------

struct Sample {
  double seconds = 0;
  double rss_mib = 0;
  double heap_mib = 0;  // malloc's bytes in use: a leak grows it, the allocator's own caching does not
  double device_mib = 0;
  double device_buffers = 0;
  double open_files = 0;
  double threads = 0;
  double calls = 0;
};

double resident_mib() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1 << 20);
}

double open_files() {
  std::error_code ec;
  double count = 0;
  for (auto it = fs::directory_iterator("/proc/self/fd", ec); !ec && it != fs::directory_iterator(); it.increment(ec))
    ++count;
  return count;
}

double thread_count() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("Threads:", 0) == 0) return std::stod(line.substr(8));
  return 0;
}

double heap_in_use_mib() {
  const struct mallinfo2 info = mallinfo2();
  return static_cast<double>(info.uordblks + info.hblkhd) / (1 << 20);
}

Sample take_sample(double seconds, std::uint64_t calls) {
  Sample s{.seconds = seconds, .rss_mib = resident_mib(), .heap_mib = heap_in_use_mib(), .open_files = open_files(),
           .threads = thread_count(), .calls = static_cast<double>(calls)};
  for (const kiln::DeviceMemoryUse& use : kiln::device_memory_use()) {
    s.device_mib += static_cast<double>(use.bytes) / (1 << 20);
    s.device_buffers += static_cast<double>(use.buffers);
  }
  return s;
}

// Least-squares slope of y over time, per hour.
double slope_per_hour(const std::vector<Sample>& samples, double Sample::*field) {
  if (samples.size() < 2) return 0;
  double mt = 0, my = 0;
  for (const Sample& s : samples) mt += s.seconds, my += s.*field;
  mt /= static_cast<double>(samples.size());
  my /= static_cast<double>(samples.size());
  double num = 0, den = 0;
  for (const Sample& s : samples) {
    num += (s.seconds - mt) * (s.*field - my);
    den += (s.seconds - mt) * (s.seconds - mt);
  }
  return den == 0 ? 0 : num / den * 3600.0;
}

// ---- checking answers ---------------------------------------------------------

// Why a call's output is wrong, or "" when it agrees with `want`: the same
// shape and type, floats within 1e-3 of want's largest magnitude (compiled
// and eager kernels sum in other orders), integers equal.
std::string disagreement(const kiln::Tensor& got, const kiln::Tensor& want) {
  if (got.dtype() != want.dtype() || got.shape() != want.shape())
    return "got " + kiln::shape_str(got.shape()) + ", want " + kiln::shape_str(want.shape());
  if (want.dtype() == kiln::DType::i64) {
    const auto g = got.values<std::int64_t>(), w = want.values<std::int64_t>();
    return std::equal(g.begin(), g.end(), w.begin()) ? "" : "integers differ";
  }
  if (want.dtype() != kiln::DType::f32) return "";
  const auto g = got.values<float>(), w = want.values<float>();
  float scale = 1, worst = 0;
  for (float v : w) scale = std::max(scale, std::fabs(v));
  for (std::size_t i = 0; i < w.size(); ++i) {
    if (!std::isfinite(g[i])) return "a non-finite value";
    worst = std::max(worst, std::fabs(g[i] - w[i]));
  }
  if (worst <= 1e-3f * scale) return "";
  std::ostringstream out;
  out << "max |got - want| = " << worst << " (largest |want| " << scale << ")";
  return out.str();
}

struct WrongAnswer {
  std::string what;
};

void expect(const kiln::Tensor& got, const kiln::Tensor& want, const std::string& what) {
  const std::string problem = disagreement(got, want);
  if (!problem.empty()) throw WrongAnswer{what + ": " + problem};
}

// ---- the four workloads ---------------------------------------------------------

// One model kind: how to compile it, and one iteration of calls (returns
// how many calls it made; throws WrongAnswer or kiln::Error).
struct Workload {
  std::string name;
  std::function<kiln::CompiledModel()> make;
  std::function<int(kiln::CompiledModel&, std::uint64_t iteration)> run;
};

kiln::Tensor npy(const fs::path& dir, const std::string& name) { return kiln::load_npy((dir / (name + ".npy")).string()); }

Workload segmentation(const fs::path& dir, const std::string& backend) {
  const kiln::Model model = pytorch_exports::load_with_weights(dir.string(), "unet_small.onnx",
                                                               [](const std::string& n) { return n == "input"; });
  static const std::vector<std::int64_t> sizes = {32, 48, 40, 24, 56};
  auto images = std::make_shared<std::map<std::int64_t, kiln::Tensor>>();
  auto want = std::make_shared<std::map<std::int64_t, kiln::Tensor>>();
  kiln::EagerModel eager = kiln::eager(model, {.backend = backend});
  for (std::int64_t size : sizes) {
    (*images)[size] = pytorch_exports::generated_tensor("input", {1, 3, size, size});
    (*want)[size] = eager({(*images)[size]}).at(0);
  }
  return {"segmentation",
          [model, backend] {
            return kiln::compile(model, {.backend = backend,
                                         .recompile_limit = 3,
                                         .eager_past_recompile_limit = true,
                                         .automatic_dynamic = false});
          },
          [images, want](kiln::CompiledModel& compiled, std::uint64_t iteration) {
            const std::int64_t size = sizes[iteration % sizes.size()];
            expect(compiled({images->at(size)}).at(0), want->at(size), "segmentation at " + std::to_string(size) + " px");
            return 1;
          }};
}

Workload decoder(const fs::path& dir, const std::string& backend) {
  const kiln::Model model = pytorch_exports::load_with_weights(
      dir.string(), "gpt2_tiny.onnx", [](const std::string& n) { return n.rfind("transformer.", 0) != 0; });
  // A prefill of 5 tokens, then four one-token steps (the last two repeat
  // the second's token with a longer mask): host inputs per step, the
  // cache coming from the step before.
  auto steps = std::make_shared<std::vector<std::vector<kiln::Tensor>>>();
  for (const std::string step : {"prefill", "decode0", "decode1"})
    steps->push_back({npy(dir, "gpt2_tiny." + step + ".input_ids"), npy(dir, "gpt2_tiny." + step + ".attention_mask")});
  for (std::int64_t past = 7; past <= 8; ++past) {
    kiln::Tensor mask(kiln::DType::i64, {2, past + 1});
    for (std::int64_t& v : mask.values<std::int64_t>()) v = 1;
    steps->push_back({steps->back()[0], mask});
  }
  auto want = std::make_shared<std::vector<kiln::Tensor>>();
  kiln::EagerModel eager = kiln::eager(model, {.backend = backend});
  std::vector<kiln::Tensor> past(4, kiln::Tensor(kiln::DType::f32, {2, 4, 0, 8}));
  for (const std::vector<kiln::Tensor>& step : *steps) {
    std::vector<kiln::Tensor> inputs = step;
    inputs.insert(inputs.end(), past.begin(), past.end());
    std::vector<kiln::Tensor> out = eager(inputs);
    want->push_back(out.at(0));
    past.assign(out.begin() + 1, out.end());
  }
  return {"decoder", [model, backend] { return kiln::compile(model, {.backend = backend, .mode = kiln::Mode::reduce_overhead}); },
          [steps, want](kiln::CompiledModel& compiled, std::uint64_t) {
            std::vector<kiln::CallInput> past(4, kiln::Tensor(kiln::DType::f32, {2, 4, 0, 8}));
            for (std::size_t i = 0; i < steps->size(); ++i) {
              std::vector<kiln::CallInput> inputs((*steps)[i].begin(), (*steps)[i].end());
              inputs.insert(inputs.end(), past.begin(), past.end());
              std::vector<kiln::DeviceTensor> out = compiled.call_on_device(inputs);
              expect(out.at(0).to_host(), want->at(i), "decoder step " + std::to_string(i));
              past.assign(out.begin() + 1, out.end());
            }
            return static_cast<int>(steps->size());
          }};
}

Workload speech(const fs::path& dir, const std::string& backend) {
  const kiln::Model model = pytorch_exports::load_with_weights(dir.string(), "speech_rnn.onnx", [](const std::string& n) {
    return n == "audio" || n == "h" || n == "c" || n == "g";
  });
  // Chunks of 400, 272 and 400 samples, from zero states.
  auto chunks = std::make_shared<std::vector<kiln::Tensor>>(
      std::vector<kiln::Tensor>{npy(dir, "speech_rnn.chunk0.audio"), npy(dir, "speech_rnn.chunk1.audio"),
                                npy(dir, "speech_rnn.chunk0.audio")});
  auto zero_states = std::make_shared<std::vector<kiln::Tensor>>();
  for (const std::string state : {"h", "c", "g"}) {
    const kiln::Tensor given = npy(dir, "speech_rnn.chunk0." + state);
    zero_states->push_back(kiln::Tensor(given.dtype(), given.shape()));
  }
  auto want = std::make_shared<std::vector<kiln::Tensor>>();
  kiln::EagerModel eager = kiln::eager(model, {.backend = backend});
  std::vector<kiln::Tensor> states = *zero_states;
  for (const kiln::Tensor& audio : *chunks) {
    std::vector<kiln::Tensor> inputs = {audio};
    inputs.insert(inputs.end(), states.begin(), states.end());
    std::vector<kiln::Tensor> out = eager(inputs);
    want->push_back(out.at(0));
    states.assign(out.begin() + 1, out.end());
  }
  return {"speech", [model, backend] { return kiln::compile(model, {.backend = backend}); },
          [chunks, zero_states, want](kiln::CompiledModel& compiled, std::uint64_t) {
            std::vector<kiln::CallInput> states(zero_states->begin(), zero_states->end());
            for (std::size_t i = 0; i < chunks->size(); ++i) {
              std::vector<kiln::CallInput> inputs = {(*chunks)[i]};
              inputs.insert(inputs.end(), states.begin(), states.end());
              const kiln::PendingCall call = compiled.submit(std::move(inputs));
              const std::vector<kiln::DeviceTensor> out = call.wait();
              expect(out.at(0).to_host(), want->at(i), "speech chunk " + std::to_string(i));
              states.assign(out.begin() + 1, out.end());
            }
            return static_cast<int>(chunks->size());
          }};
}

Workload detector(const fs::path& dir, const std::string& backend) {
  const kiln::Model model = pytorch_exports::load_with_weights(dir.string(), "ssdlite320_detections.onnx",
                                                               [](const std::string& n) { return n == "input"; });
  auto image = std::make_shared<kiln::Tensor>(
      pytorch_exports::generated_tensor("input", {1, 3, 64, 64}).reshaped({3, 64, 64}));
  // Hundreds of scores lie within 1e-6 of another with generated weights, so
  // eager and compiled kernels may order tied detections differently: the
  // answer is the first compiled call's, and every later call (the same
  // kernels, or a model compiled again from the caches) must give it.
  auto want = std::make_shared<std::vector<kiln::Tensor>>(kiln::compile(model, {.backend = backend})({*image}));
  return {"detector", [model, backend] { return kiln::compile(model, {.backend = backend}); },
          [image, want](kiln::CompiledModel& compiled, std::uint64_t) {
            const std::vector<kiln::Tensor> out = compiled({*image});
            const char* names[] = {"boxes", "scores", "labels"};
            for (std::size_t i = 0; i < want->size(); ++i)
              expect(out.at(i), want->at(i), std::string("detector ") + names[i]);
            return 1;
          }};
}

// A model two threads share; either may replace it with a new compile.
class Slot {
 public:
  explicit Slot(const Workload& workload) : workload_(workload), model_(std::make_shared<kiln::CompiledModel>(workload.make())) {}
  std::shared_ptr<kiln::CompiledModel> get() {
    std::lock_guard lock(mutex_);
    return model_;
  }
  void recreate() {
    auto fresh = std::make_shared<kiln::CompiledModel>(workload_.make());
    std::lock_guard lock(mutex_);
    model_ = std::move(fresh);  // the old one goes with its last caller
  }
  void destroy() {
    std::lock_guard lock(mutex_);
    model_.reset();
  }
  const Workload& workload() const { return workload_; }

 private:
  const Workload& workload_;
  std::mutex mutex_;
  std::shared_ptr<kiln::CompiledModel> model_;
};

double parse_duration(const std::string& text) {
  std::size_t used = 0;
  const double value = std::stod(text, &used);
  const std::string unit = text.substr(used);
  if (unit.empty() || unit == "s") return value;
  if (unit == "m" || unit == "min") return value * 60;
  if (unit == "h") return value * 3600;
  throw std::invalid_argument("unknown unit '" + unit + "' (s, m or h)");
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"Threads calling four kinds of compiled model for a stated time, memory sampled"};
  std::string backend = "vulkan", duration_text = "2m", samples_path;
  std::string fixtures = KILN_PYTORCH_FIXTURES;
  int threads = 8, recreate_every = 25;
  double sample_every = 0;
  app.add_option("--backend", backend, "vulkan, cuda, hip or cpu");
  app.add_option("--duration", duration_text, "how long the threads call the models (120, 2m, 1h)");
  app.add_option("--threads", threads, "threads, spread over the four models")->check(CLI::Range(1, 256));
  app.add_option("--recreate-every", recreate_every, "iterations of a thread between recompiles of its model")
      ->check(CLI::Range(1, 1000000));
  app.add_option("--sample-every", sample_every, "seconds between samples (default: a fortieth of the run, 1 to 60)");
  app.add_option("--samples", samples_path, "write every sample to this CSV file");
  app.add_option("--fixtures", fixtures, "tests/fixtures/pytorch");
  std::vector<std::string> only;
  app.add_option("--models", only, "only these of segmentation, decoder, speech, detector")
      ->delimiter(',')
      ->check(CLI::IsMember({"segmentation", "decoder", "speech", "detector"}));
  CLI11_PARSE(app, argc, argv);
  // kiln's warnings go to a handler, as a service routes them: calls past
  // the recompile limit warn once per compiled model, and the models are
  // compiled again and again. Counted, and the distinct ones shown at the end.
  std::mutex warning_mutex;
  std::uint64_t warnings = 0;
  std::set<std::string> distinct_warnings;
  struct RestoreLog {  // before the handler's captures go
    ~RestoreLog() { kiln::set_log_handler({}); }
  } restore_log;
  kiln::set_log_handler([&](kiln::LogLevel, const std::string& message) {
    std::lock_guard lock(warning_mutex);
    ++warnings;
    if (distinct_warnings.size() < 8) distinct_warnings.insert(message.substr(0, message.find('\n')));
  });
  double duration = 0;
  try {
    duration = parse_duration(duration_text);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "soak: --duration %s: %s\n", duration_text.c_str(), e.what());
    return 2;
  }
  if (sample_every <= 0) sample_every = std::clamp(duration / 40, 1.0, 60.0);

  std::vector<Workload> workloads;
  const auto prepare_start = Clock::now();
  try {
    const fs::path dir(fixtures);
    const std::vector<std::pair<std::string, Workload (*)(const fs::path&, const std::string&)>> kinds = {
        {"segmentation", segmentation}, {"decoder", decoder}, {"speech", speech}, {"detector", detector}};
    for (const auto& [name, make] : kinds)
      if (only.empty() || std::find(only.begin(), only.end(), name) != only.end()) workloads.push_back(make(dir, backend));
  } catch (const kiln::Error& e) {
    std::fprintf(stderr, "soak: preparing the models: %s\n", e.what());
    return 1;
  }
  std::vector<std::unique_ptr<Slot>> slots;
  for (const Workload& w : workloads) slots.push_back(std::make_unique<Slot>(w));
  std::printf("soak: %d threads on %s for %s; models ready in %.1f s (eager answers, first compiles)\n", threads,
              backend.c_str(), duration_text.c_str(),
              std::chrono::duration<double>(Clock::now() - prepare_start).count());
  std::fflush(stdout);

  std::atomic<std::uint64_t> calls{0}, failures{0};
  std::mutex failure_mutex;
  std::vector<std::string> failure_messages;
  std::map<std::string, std::uint64_t> calls_per_model, recompiles_per_model;
  std::mutex count_mutex;
  auto fail = [&](const std::string& message) {
    ++failures;
    std::lock_guard lock(failure_mutex);
    if (failure_messages.size() < 20) failure_messages.push_back(message);
  };

  const auto start = Clock::now();
  const auto end = start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(duration));
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      Slot& slot = *slots[static_cast<std::size_t>(t) % slots.size()];
      const std::string& name = slot.workload().name;
      std::uint64_t iteration = static_cast<std::uint64_t>(t), made = 0, recompiled = 0;
      while (Clock::now() < end && failures.load() < 20) {
        try {
          std::shared_ptr<kiln::CompiledModel> model = slot.get();
          made += static_cast<std::uint64_t>(slot.workload().run(*model, iteration));
          model.reset();
          if (++iteration % static_cast<std::uint64_t>(recreate_every) == 0) {
            slot.recreate();
            ++recompiled;
          }
        } catch (const WrongAnswer& e) {
          fail(name + " (thread " + std::to_string(t) + "): wrong answer: " + e.what);
        } catch (const std::exception& e) {  // kiln::Error, or anything else a call let through
          fail(name + " (thread " + std::to_string(t) + "): " + e.what());
        }
      }
      calls += made;
      std::lock_guard lock(count_mutex);
      calls_per_model[name] += made;
      recompiles_per_model[name] += recompiled;
    });
  }

  std::vector<Sample> samples;
  std::printf("%8s %9s %9s %11s %9s %7s %8s %9s\n", "seconds", "rss MiB", "heap MiB", "device MiB", "buffers", "files",
              "threads", "failures");
  auto next = start;
  while (Clock::now() < end && failures.load() < 20) {
    next += std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(sample_every));
    std::this_thread::sleep_until(std::min(next, end));
    const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
    samples.push_back(take_sample(seconds, calls.load()));
    const Sample& s = samples.back();
    std::printf("%8.0f %9.1f %9.1f %11.2f %9.0f %7.0f %8.0f %9llu\n", s.seconds, s.rss_mib, s.heap_mib, s.device_mib,
                s.device_buffers, s.open_files, s.threads, static_cast<unsigned long long>(failures.load()));
    std::fflush(stdout);
  }
  for (std::thread& w : workers) w.join();

  if (!samples_path.empty()) {
    std::ofstream csv(samples_path);
    csv << "seconds,rss_mib,heap_mib,device_mib,device_buffers,open_files,threads,calls\n";
    for (const Sample& s : samples)
      csv << s.seconds << ',' << s.rss_mib << ',' << s.heap_mib << ',' << s.device_mib << ',' << s.device_buffers << ','
          << s.open_files << ',' << s.threads << ',' << s.calls << '\n';
  }

  std::printf("\ncalls per model (recompiles):");
  for (const auto& [name, n] : calls_per_model)
    std::printf(" %s %llu (%llu)", name.c_str(), static_cast<unsigned long long>(n),
                static_cast<unsigned long long>(recompiles_per_model[name]));
  std::printf("\n");
  // After warm-up (the first quarter): each measure's least-squares slope.
  std::vector<Sample> steady;
  for (const Sample& s : samples)
    if (s.seconds >= duration / 4) steady.push_back(s);
  if (steady.size() >= 2) {
    std::printf("after warm-up (%.0f s to %.0f s, %zu samples), slope per hour: rss %+.1f MiB, heap %+.1f MiB, "
                "device %+.2f MiB, buffers %+.1f, files %+.1f, threads %+.1f\n",
                steady.front().seconds, steady.back().seconds, steady.size(), slope_per_hour(steady, &Sample::rss_mib),
                slope_per_hour(steady, &Sample::heap_mib),
                slope_per_hour(steady, &Sample::device_mib), slope_per_hour(steady, &Sample::device_buffers),
                slope_per_hour(steady, &Sample::open_files), slope_per_hour(steady, &Sample::threads));
    auto range = [&](double Sample::*field) {
      auto [lo, hi] = std::minmax_element(steady.begin(), steady.end(),
                                          [&](const Sample& a, const Sample& b) { return a.*field < b.*field; });
      return std::pair((*lo).*field, (*hi).*field);
    };
    const auto rss = range(&Sample::rss_mib), heap = range(&Sample::heap_mib), device = range(&Sample::device_mib),
               files = range(&Sample::open_files), thr = range(&Sample::threads);
    std::printf("after warm-up, min to max: rss %.1f to %.1f MiB, heap %.1f to %.1f MiB, device %.2f to %.2f MiB, "
                "files %.0f to %.0f, threads %.0f to %.0f\n",
                rss.first, rss.second, heap.first, heap.second, device.first, device.second, files.first, files.second,
                thr.first, thr.second);
  }

  {
    std::lock_guard lock(warning_mutex);
    std::printf("kiln warnings: %llu; among them:\n", static_cast<unsigned long long>(warnings));
    for (const std::string& w : distinct_warnings) std::printf("  %s\n", w.c_str());
  }

  // Every model gone: kiln must hold no device memory.
  for (auto& slot : slots) slot->destroy();
  slots.clear();
  int status = 0;
  for (const kiln::DeviceMemoryUse& use : kiln::device_memory_use()) {
    if (use.bytes == 0) continue;
    std::printf("FAILED: %llu bytes in %llu buffers still held on %s after every model was destroyed\n",
                static_cast<unsigned long long>(use.bytes), static_cast<unsigned long long>(use.buffers),
                use.device.c_str());
    status = 1;
  }
  const Sample after = take_sample(0, calls.load());
  std::printf("every model destroyed: device memory %.2f MiB, rss %.1f MiB, heap %.1f MiB, files %.0f, threads %.0f\n",
              after.device_mib, after.rss_mib, after.heap_mib, after.open_files, after.threads);
  if (failures.load() > 0) {
    std::printf("FAILED: %llu calls failed or answered wrongly; the first:\n", static_cast<unsigned long long>(failures.load()));
    for (const std::string& m : failure_messages) std::printf("  %s\n", m.c_str());
    status = 1;
  }
  if (calls.load() == 0) {
    std::printf("FAILED: no call finished\n");
    status = 1;
  }
  std::printf("%s: %llu calls, %llu failed\n", status == 0 ? "passed" : "FAILED",
              static_cast<unsigned long long>(calls.load()), static_cast<unsigned long long>(failures.load()));
  return status;
}
