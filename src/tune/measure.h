// Measuring one candidate on a device (inside the tuning worker): build the
// site's kernel with the candidate's knobs, compile and load it, check it
// against the op's reference implementation on seeded random inputs, then
// time it.
#pragma once

#include "backends/backend.h"
#include "src/kernel/ir.h"
#include "src/tune/database.h"
#include "src/tune/site.h"

#include <kiln/error.h>

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace kiln::tune {

struct MeasureOptions {
  int warmup = 2;                // untimed submits first (caches, clocks, lazy driver work)
  int min_repeats = 5;           // timed submits before the spread may stop the loop
  int max_repeats = 200;
  double target_spread = 0.03;   // stop once (p75 - p25) / median is below this
  double time_cap_s = 2.0;       // or once the timed submits took this long
  std::uint64_t seed = 1;        // of the random inputs
  // The inputs and outputs are copied until the copies hold this many bytes
  // (at most max_copies), and the timed submits rotate among the copies, so
  // a small problem is not timed with its operands hot in cache.
  std::uint64_t rotate_bytes = std::uint64_t{64} << 20;
  int max_copies = 8;
  // A candidate whose first warm-up submit takes longer than this is timed
  // by that submit alone (it cannot win; the tuner passes a multiple of the
  // best median so far). 0: every candidate is timed in full.
  double give_up_ms = 0;
  // Largest accepted |got - expected| of any output element, relative to the
  // output's scale (output_error()).
  double tolerance = 1e-3;
  // Graph-level sites (worker/graph_measure.h): the tuning database whose kernel
  // records the candidate's kernels are built with, so that Winograd and
  // direct compare tuned kernels where records exist ("": the heuristic's).
  std::string kernel_records;
};

// The timing method every candidate gets, kernel or whole graph, after its
// first (verifying) run: `call(i)` runs once and returns its milliseconds.
// The first warm-up call alone where it exceeds options.give_up_ms, else the
// other warm-up calls, then repeats until the spread is small, the time cap
// or max_repeats. Never the verifying run: a driver may do one-time work in
// a pipeline's first dispatch (lavapipe compiles the subgroup and texel
// variants then, docs/benchmarks/max-autotune.md), which must not make a
// fast kernel give up.
std::vector<double> time_calls(const MeasureOptions& options, const std::function<double(int)>& call);

// How far `got` is from the reference `want`: the largest |got - want| over
// the elements, divided by the output's scale, max(1, largest finite
// |want|), as kiln bench compares two modes' outputs. A per-element relative
// rule rejected rounding that default mode itself produces (Winograd F(4,3)
// on a 4608-term convolution). An element outside an op's domain (NaN or
// infinity in the reference) is right where `got` has the same.
struct OutputError {
  double error = 0;     // NaN when an element is NaN where the reference is not
  std::size_t at = 0;   // the worst element
};
OutputError output_error(std::span<const float> got, std::span<const double> want);

// A candidate that failed: its knobs, status and why.
CandidateResult failed_candidate(const std::string& knobs, CandidateStatus status, std::string detail);

// A device error's status: out_of_memory where the device ran out, else `otherwise`.
CandidateStatus status_of(const Error& error, CandidateStatus otherwise);

// The environment variable naming candidates to break, for tests of the
// tuner's fault handling:
// "wrong=KNOBS;crash=KNOBS;hang=KNOBS;slow_first=KNOBS;crash_compile=KNOBS"
// (any subset, repeatable). The worker gives a wrong result for, aborts on,
// or never finishes a candidate whose knob text it names, or reports the
// first measurement of it in the process 10 times slower than it was (as a
// burst of other load would), or aborts while compiling it (ahead of its
// measurement too); nothing else reads it.
inline constexpr const char* kFaultVariable = "KILN_TUNE_FAULT";
// The fault it names for `knobs` ("wrong", "crash", "hang"), or "".
std::string injected_fault(const std::string& knobs);
// Aborts for "crash", never returns for "hang"; returns for anything else.
void crash_or_hang_if_injected(const std::string& fault);

// Fixed-seed values in [-1, 1): splitmix64 per element, the same on every
// platform (the inputs candidates are checked and timed on).
std::vector<float> random_values(std::size_t count, std::uint64_t seed);

// One device and the reference results of the sites it has seen.
class Measurer {
 public:
  Measurer(const backend::Backend& backend, std::shared_ptr<backend::Device> device);
  ~Measurer();

  // Computes the site's reference result now (measure() would on first use).
  void prepare(const Site& site, const MeasureOptions& options) { reference(site, options); }

  // Never throws for a candidate's own failure: that is the result's status.
  CandidateResult measure(const Site& site, const std::string& knobs, const MeasureOptions& options);

  // Builds and compiles these candidates of `site` now, on up to `threads`
  // threads at once, so that measure() finds them compiled: a GPU's
  // candidates take more host time to compile than device time to measure.
  // Only compiling runs in parallel (the device loads and times one kernel
  // at a time, with nothing else running). A candidate that fails to build
  // fails in measure() as it would have. Candidates built before are not
  // built again.
  void compile_ahead(const Site& site, const std::vector<std::string>& knobs, int threads);

 private:
  struct Reference;
  const Reference& reference(const Site& site, const MeasureOptions& options);
  // A candidate's kernel, lowered, rendered and compiled (or why not).
  struct Built {
    kir::Kernel kernel{"candidate"};
    backend::KernelSource source;
    backend::KernelBinary binary;
    std::optional<CandidateResult> failed;
  };
  Built build(const Site& site, const std::string& knobs) const;
  std::map<std::string, Built> built_;  // compiled ahead, by site JSON and knobs; measure() takes them

  const backend::Backend& backend_;
  std::shared_ptr<backend::Device> device_;
  std::map<std::string, std::unique_ptr<Reference>> references_;  // by site JSON and seed
};

}  // namespace kiln::tune
