// What the kernel templates (and lowering) know of the device a kernel will
// run on: the few capability fields templates choose their knobs from (tile
// sizes, workgroup shape). A plain record, filled by the runtime from
// backend::TargetDesc; the default describes a generic GPU and gives good
// kernels on lavapipe too. It lives with the templates, its first readers, so
// that shaders/ includes nothing from the compiler that uses it.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kiln::lower {

// Knob choices that replace a heuristic's (the autotuner's winners): a
// tuning site's problem text (kir::TuningSite::problem) -> knob text. One
// that does not parse or does not fit the problem or target is ignored with
// a logged warning.
using KnobOverrides = std::map<std::string, std::string, std::less<>>;

// Knobs pinned for one template's site (kir::TuningSite::template_name).
struct KnobPin {
  std::string template_name;  // "" for none
  std::string knobs;
  friend bool operator==(const KnobPin&, const KnobPin&) = default;
};
// Node name -> the knobs pinned for that node's tuning site.
using NodeKnobPins = std::map<std::string, KnobPin, std::less<>>;

// A matrix instruction the device's subgroups run (backend::MatrixShape):
// `lanes` lanes multiply an m x k by a k x n tile of `inputs` ("tf32",
// "f16", "bf16") into f32.
struct MatrixUnit {
  std::string inputs;
  std::uint32_t m = 0, n = 0, k = 0, lanes = 0;
  friend bool operator==(const MatrixUnit&, const MatrixUnit&) = default;
};

// The kind of device kernels are chosen for, derived once from its
// capability record (lower::target_policy): the heuristics keep one set of
// choices per class.
enum class DeviceClass : std::uint8_t {
  // Its own memory and many multiprocessors (NVIDIA's and AMD's discrete
  // GPUs, every CUDA and HIP target): large shared-memory blocks,
  // double-buffered.
  discrete_gpu,
  // A GPU sharing the host's memory (mobile and laptop GPUs), or one whose
  // kind the driver does not say: blocks within Vulkan's guaranteed limits.
  integrated_gpu,
  // Vulkan on CPU cores (lavapipe, SwiftShader): a workgroup's invocations
  // run one after another, so register blocks and texel loads, no barriers.
  emulated_gpu,
  // The cpu backend: kernels compiled as C for the host's cores; the
  // emulated class's choices.
  host_cpu,
};
// "discrete-gpu", "integrated-gpu", "emulated-gpu", "host-cpu": in logs and `kiln devices`.
constexpr const char* device_class_name(DeviceClass device_class) {
  switch (device_class) {
    case DeviceClass::discrete_gpu: return "discrete-gpu";
    case DeviceClass::integrated_gpu: return "integrated-gpu";
    case DeviceClass::emulated_gpu: return "emulated-gpu";
    case DeviceClass::host_cpu: return "host-cpu";
  }
  return "unknown";
}

struct LowerTarget {
  std::string backend = "vulkan";                  // "vulkan", "cuda", "hip", "null"
  std::uint32_t subgroup_size = 32;                // SIMD width (lavapipe 8, NVIDIA 32, AMD 32/64)
  std::uint32_t max_workgroup_invocations = 1024;  // per workgroup
  std::uint64_t max_shared_memory_bytes = 32768;   // per workgroup
  DeviceClass device_class = DeviceClass::integrated_gpu;
  // A CPU implementation (lavapipe, SwiftShader, the cpu backend): each
  // lane's buffer load is a separate instruction and registers spill cheaply
  // to L1, so larger register blocks (fewer loads per multiply-add) win there.
  bool cpu_device() const {
    return device_class == DeviceClass::emulated_gpu || device_class == DeviceClass::host_cpu;
  }
  // Subgroup broadcasts in compute kernels written for subgroup_size lanes
  // (the GEMM's subgroup path, shaders/gemm_subgroup.h).
  bool subgroup_broadcast = false;
  // Uniform texel buffers of R32 and RGBA32 floats up to this many texels
  // (GemmKnobs::texel_loads); 0: none.
  std::uint64_t max_texel_buffer_elements = 0;
  // Texel buffers of f16 and bf16 elements too (R16 / RGBA16 views), so that
  // 16-bit operands are read as f32 ones are.
  bool texel_16bit = false;
  // The device's matrix instructions (tensor cores, MFMA): the GEMM
  // heuristic multiplies 16-bit operands with the instruction of their
  // precision (storage16 "f16" or "bf16": rounding them to it is exact).
  std::vector<MatrixUnit> matrix_units{};
  // Null: every template takes the heuristic's knobs. Shared and immutable,
  // so copying a target (fuse::PlanOptions::target) stays cheap.
  std::shared_ptr<const KnobOverrides> knob_overrides = nullptr;
  // A dynamic shape set's knobs, pinned so that a new extent keeps its
  // kernels' structure: applied like overrides (after them) where they fit,
  // dropped quietly where they do not (the user set none of them).
  std::shared_ptr<const KnobOverrides> knob_pins = nullptr;
  // The same, keyed by node name instead of problem (a new extent's
  // problems are not the set's): lower::lower_node sets `node_pin` from it
  // for the node it lowers, so a new extent lowers once with its set's knobs.
  std::shared_ptr<const NodeKnobPins> node_pins = nullptr;
  KnobPin node_pin{};  // the pin of the node being lowered, for a site of its template
  // A dynamic shape set whose image extents vary (a dim past the first of
  // some input): convolution templates take the choices that hold at every
  // height and width (bound checks kept, scalar stores where a row's
  // alignment depends on its width), so that each extent lowers to kernels
  // of one structure and a new extent compiles nothing.
  bool spatial_extents_vary = false;
  // The 16-bit storage types of the node being lowered ("f16", "bf16",
  // "bf16+f16"; "" for none): a kernel reading or writing them is a tuning
  // problem of its own, so template problem texts say it (tuning_site.h).
  std::string storage16{};
  // For an f32 node, the narrower input type its products may use on the
  // matrix units ("tf32", "bf16"; "" for f32): the node's "f32_products"
  // attribute, which the precision settings set (choose_f32_products).
  std::string f32_products{};

  friend bool operator==(const LowerTarget&, const LowerTarget&) = default;
};

}  // namespace kiln::lower
