// Runtime kernel parameters: kernels that differ only in integer literals
// (shapes, strides, bounds) become one kernel whose differing literals are
// per-dispatch parameters, so a model compiles one pipeline for them instead
// of one per shape.
//
// Kernels group by structure: everything but the values of i32/u32 literals
// and the global size (name, buffers, workgroup size, statements, float
// constants, loop steps). In a group of two or more, a literal position
// whose value differs between members becomes param(i), and positions with
// one value in every member stay literals, so tile sizes, unroll counts and
// alignment constants stay compile-time constants. Positions whose values
// agree member by member share one parameter. The global size becomes a
// parameter too when it differs (Kernel::global_size_param).
//
// Divisors of div and mod that run per element (inside a loop, or in a kernel
// without loops) count as structure: a runtime division costs far more than
// division by a constant, so kernels differing there stay apart. So do loop
// bounds, unless ParameteriseOptions::loop_bounds is set.
#pragma once

#include "src/kernel/ir.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace kiln::kir {

// Constant loop bounds below this stay literals even where loop bounds may
// become parameters (ParameteriseOptions::loop_bounds): a short trip count
// (a 3x3 or 7x7 window, a small K) is what a driver's compiler unrolls.
inline constexpr std::int64_t kShortLoopBound = 32;

struct ParameteriseOptions {
  // Most parameters one kernel may take (Vulkan guarantees 128 bytes of push
  // constants: 32 i32s). A group needing more is left as it is.
  std::size_t max_params = 32;
  // Whether loop bounds may become parameters. Off, they are structure: a
  // trip count the driver's compiler knows keeps loops tight, at the price
  // of one kernel per distinct bound. On a CPU device runtime bounds cost
  // little device time and save compiles (docs/benchmarks/compile-scaling.md),
  // so the executor turns this on there only. Bounds below kShortLoopBound
  // stay literals anyway.
  bool loop_bounds = false;
};

struct ParameteriseReport {
  int groups = 0;               // groups of >= 2 kernels now sharing one source
  int kernels = 0;              // kernels given parameters
  int groups_over_limit = 0;    // groups left alone: they would need more than max_params
  int max_params_used = 0;      // largest parameter count given to a kernel
  // For each kernel given, the index of the first kernel given that renders
  // the same source: identical kernels, and the members of a group that now
  // share parameters. Its own index when no earlier one does. A caller needs
  // to render (and compile) only kernels that are their own.
  std::vector<std::size_t> same_source_as;
};

// Rewrites the kernels in place (each gets its own Kernel::params values).
// Kernels that already have parameters are left alone.
ParameteriseReport parameterise(std::span<Kernel* const> kernels, const ParameteriseOptions& options = {});

// parameterise() for kernels that must serve other extents of some dims
// (dynamic dims): `probes` are the same model's kernels lowered with those
// dims at other extents. A kernel and its twin (the k-th probe of its name,
// differing in literal values only) tell which literal positions vary with
// the extents; those become parameters even where they would be structure
// (divisors, loop bounds), so the kernel's source no longer depends on the
// extents and another shape set's kernels render to the same source. Kernels
// without a twin are parameterised as parameterise() would. The probes are
// not changed. `varying`, if given, receives how many kernels had positions
// that vary.
ParameteriseReport parameterise_with_probes(std::span<Kernel* const> kernels, std::span<Kernel* const> probes,
                                            const ParameteriseOptions& options = {}, int* varying = nullptr);

// The parameter values that make `parameterised` (a kernel parameterise()
// or parameterise_with_probes() gave parameters) compute what `literal`
// computes: `literal` is the same kernel lowered at other extents, without
// parameters. They must agree in everything but the literals `parameterised`
// turned into parameters (one value per parameter) and the global size where
// it is a parameter; nullopt when they do not. Lets a new extent of a
// dynamic shape set take the set's kernels without lowering a probe twin.
std::optional<std::vector<std::int32_t>> match_parameters(const Kernel& parameterised, const Kernel& literal);

// When match_parameters() fails only because some literals of `set_kernel`
// (with or without parameters) have other values in `literal`: `set_kernel`
// with those literals made parameters too (positions whose values agree pair
// by pair share one), its parameter values `literal`'s, its global size and
// tuning site `literal`'s. nullopt when they differ in anything else, when a
// parameter would need two values, or past `max_params`. A new extent of a
// dynamic shape set compiles this kernel once, and later extents match it.
std::optional<Kernel> generalise_parameters(const Kernel& set_kernel, const Kernel& literal, std::size_t max_params);

}  // namespace kiln::kir
