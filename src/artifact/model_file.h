// Compiled-model files (.kiln): a model compiled ahead of time for one or
// more targets, each a plan (src/compile/plan.h) with its kernels' binaries
// (SPIR-V; CUBIN and PTX; AMD code objects). Loading one runs no graph pass
// and no kernel compiler: the plan that fits the device is bound as it is.
//
//   kiln compile --model resnet18 -o resnet18.kiln --target vulkan --target cuda:sm_80,sm_90
//   kiln::CompiledModel m = kiln::load("resnet18.kiln");
//
// The file is a container (container.h, kind "MODL"): versioned, checksummed,
// written atomically. A file from another kiln version is refused by name:
// plans are read only by the kiln that wrote them.
#pragma once

#include "backends/backend.h"
#include "src/compile/plan.h"

#include <kiln/model.h>
#include <kiln/settings.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kiln::artifact {

// Bumped whenever the metadata's layout or meaning changes.
inline constexpr int kModelFileFormat = 1;

// One --target: "vulkan" (the first Vulkan device), "vulkan:NAME" (a device by
// index or name), "cuda:sm_80,sm_90" (offline, per architecture),
// "hip:gfx90a,gfx1030". Throws InvalidArgument naming the bad spec.
struct TargetSpec {
  std::string backend;
  std::string device;              // backends with devices: which one ("" the first)
  std::vector<std::string> archs;  // offline targets; empty: the device's
};
TargetSpec parse_target_spec(const std::string& spec);

struct ModelFileOptions {
  std::vector<TargetSpec> targets;  // at least one
  Mode mode = Mode::default_;
  SettingOverrides settings{};
  std::string cache_dir{};  // the kernel cache compiled binaries go through; the tuning database beside it
  // The input shapes to compile for, a plan per set and target (as
  // AheadOfTimeOptions::shape_sets); empty: the model's own.
  std::vector<std::map<std::string, Shape>> shape_sets{};
};

// What one target of a written file holds.
struct WrittenTarget {
  std::string backend;
  std::string target;  // device name or architecture
  int kernels = 0;
  std::uint64_t binary_bytes = 0;
  int tuned_sites = 0;  // sites whose knobs came from the tuning database
  std::vector<Shape> input_shapes;
};

// The models `options.shape_sets` asks for: `model` at each set's shapes
// (`model` itself when there is none). Throws InvalidArgument for a set that
// names no input of the model, repeats another set, or for a model without
// symbolic dims; ShapeMismatch for shapes the model cannot take.
std::vector<Model> models_for_shape_sets(const Model& model, const std::vector<std::map<std::string, Shape>>& sets);

// Compiles `model` for every target and writes the file atomically. Throws
// what compiling throws (an unsupported op with fullgraph off is a host step,
// as in any compile), NotFound for an unknown backend or device, Unsupported
// for an architecture the backend's compiler cannot target.
std::vector<WrittenTarget> write_model_file(const Model& model, const std::string& path,
                                            const ModelFileOptions& options);

struct ModelFile {
  std::string path;
  std::string model_name;
  std::string task;
  std::vector<std::shared_ptr<const compiler::Plan>> plans;  // in file order
};

// Reads and checks the whole file (container.h's errors, then a kiln
// version or format other than this one's: Unsupported naming both).
ModelFile read_model_file(const std::string& path);

// The input shapes `plan` was compiled for.
std::vector<Shape> plan_input_shapes(const compiler::Plan& plan);
// "images f32[1, 3, 320, 320]"; several inputs joined by ", ".
std::string describe_inputs(const compiler::Plan& plan);
// The input shapes the file's plans were compiled for, in file order, each once.
std::vector<std::vector<Shape>> shape_sets(const ModelFile& file);

// "vulkan on llvmpipe (LLVM 15.0.6, 256 bits); cuda sm_80": what the file
// holds, and the input shapes when it holds several sets.
std::string describe_targets(const ModelFile& file);

// Why `plan` cannot run on `device` of `backend`, or nullopt when it can:
// a kernel the device does not support, a storage alignment or grid beyond
// its limits.
std::optional<std::string> plan_unfit(const compiler::Plan& plan, const backend::Backend& backend,
                                      const backend::TargetDesc& device);

// The plan for `device`: one planned for this very device (same
// fingerprint), else the first of its backend that fits. Throws Unsupported
// naming what the file holds and why each plan does not fit.
std::shared_ptr<const compiler::Plan> select_plan(const ModelFile& file, const backend::Backend& backend,
                                                  const backend::TargetDesc& device);
// The same among the plans compiled for `input_shapes`.
std::shared_ptr<const compiler::Plan> select_plan(const ModelFile& file, const backend::Backend& backend,
                                                  const backend::TargetDesc& device,
                                                  const std::vector<Shape>& input_shapes);

}  // namespace kiln::artifact
