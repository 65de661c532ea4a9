#include "src/artifact/model_file.h"
#include "src/base/json_number.h"

#include "backends/registry.h"
#include "graph/model_access.h"
#include "src/artifact/container.h"
#include "src/artifact/kiln_source_digest.h"
#include "src/artifact/plan_codec.h"
#include "src/base/check.h"
#include "src/base/log.h"
#include "src/cache/compile_cache.h"
#include "src/compile/sources.h"
#include "src/tune/autotune.h"
#include "src/tune/tuner.h"

#include <kiln/error.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <set>

namespace kiln::artifact {
namespace {

using nlohmann::json;

constexpr const char* kModelFileKind = "MODL";

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::size_t begin = 0;
  while (true) {
    const std::size_t end = text.find(separator, begin);
    parts.push_back(text.substr(begin, end == std::string::npos ? std::string::npos : end - begin));
    if (end == std::string::npos) return parts;
    begin = end + 1;
  }
}

std::string utc_now() {
  const std::time_t now = std::time(nullptr);
  std::tm tm{};
  gmtime_r(&now, &tm);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return text;
}

// The offline target for `arch`: the backend's own when it lists it, else one
// of its offline targets of the same family with the architecture replaced
// (CUDA: sm_NN from sm_90, compute_NN from compute_80; HIP: wave64 gfx9 from
// gfx90a, wave32 gfx10+ from gfx1030).
backend::TargetDesc offline_target_for(const backend::Backend& b, const std::string& arch) {
  const std::vector<backend::TargetDesc> offline = b.offline_targets();
  for (const backend::TargetDesc& t : offline)
    if (t.arch == arch) return t;
  auto family = [](const std::string& a) -> std::string {
    if (a.starts_with("sm_")) return "sm";
    if (a.starts_with("compute_")) return "compute";
    if (a.starts_with("gfx9")) return "gfx9";
    if (a.starts_with("gfx")) return "gfx10+";
    return a;
  };
  for (const backend::TargetDesc& t : offline)
    if (family(t.arch) == family(arch)) {
      backend::TargetDesc derived = t;
      derived.arch = arch;
      derived.device_name = arch + " (offline)";
      return derived;
    }
  std::string listed;
  for (const backend::TargetDesc& t : offline) listed += (listed.empty() ? "" : ", ") + t.arch;
  throw_error(ErrorKind::InvalidArgument, "backend " + b.name() + " has no offline target like '" + arch +
                                              "' (it has: " + (listed.empty() ? "none" : listed) + ")");
}

// The binaries a device of `target` may load, best first (the backend's
// binary_targets: CUDA's CUBIN and PTX).
std::vector<backend::KernelBinary> compile_binaries(const backend::Backend& b, const backend::TargetDesc& target,
                                                    const backend::KernelSource& source,
                                                    const cache::CompileCache& cache, const std::string& compiler) {
  std::vector<backend::KernelBinary> binaries;
  for (const backend::TargetDesc& t : b.binary_targets(target)) {
    const cache::CacheKey key = cache::CompileCache::key(source, t, compiler);
    if (std::optional<backend::KernelBinary> cached = cache.load(key)) {
      binaries.push_back(std::move(*cached));
      continue;
    }
    backend::KernelBinary binary = b.compiler().compile(source, t);
    cache.store(key, binary);
    binaries.push_back(std::move(binary));
  }
  for (backend::KernelBinary& binary : binaries) binary.log.clear();
  return binaries;
}


std::string target_label(const compiler::Plan& plan) {
  const backend::TargetDesc& t = plan.target;
  if (t.offline) return plan.backend + " " + t.arch;
  return plan.backend + " on " + t.device_name + " [" + t.driver + "]";
}

}  // namespace

std::vector<Model> models_for_shape_sets(const Model& model, const std::vector<std::map<std::string, Shape>>& sets) {
  if (sets.empty()) return {model};
  const std::vector<TensorSpec> inputs = model.inputs();
  std::string names;
  for (const TensorSpec& input : inputs) names += (names.empty() ? "" : ", ") + input.name;
  const auto& source = internal::ModelAccess::shape_source(model);
  KILN_CHECK(source != nullptr, ErrorKind::InvalidArgument,
             "shape sets: model '" + model.name() +
                 "' has no symbolic dims, so it runs only at the shapes it was made for (a built-in model: "
                 "--image-size and --batch; an ONNX file: dims written as names or -1 can vary)");
  std::vector<std::vector<Shape>> seen;
  std::vector<Model> models;
  for (std::size_t k = 0; k < sets.size(); ++k) {
    const std::string what = "shape set " + std::to_string(k + 1);
    KILN_CHECK(!sets[k].empty(), ErrorKind::InvalidArgument, what + " names no input (model '" + model.name() +
                                                                 "' has: " + names + ")");
    std::vector<Shape> shapes;
    for (const TensorSpec& input : inputs) shapes.push_back(input.shape);
    for (const auto& [name, shape] : sets[k]) {
      std::size_t i = 0;
      while (i < inputs.size() && inputs[i].name != name) ++i;
      KILN_CHECK(i < inputs.size(), ErrorKind::InvalidArgument,
                 what + ": model '" + model.name() + "' has no input '" + name + "' (its inputs: " + names + ")");
      shapes[i] = shape;
    }
    for (std::size_t j = 0; j < seen.size(); ++j)
      KILN_CHECK(seen[j] != shapes, ErrorKind::InvalidArgument,
                 what + " repeats shape set " + std::to_string(j + 1));
    seen.push_back(shapes);
    try {
      models.push_back(source->instantiate(shapes));
    } catch (const Error& e) {
      throw Error(e.kind(), what + " of model '" + model.name() + "': " + e.what());
    }
  }
  return models;
}

TargetSpec parse_target_spec(const std::string& spec) {
  const std::size_t colon = spec.find(':');
  TargetSpec t;
  t.backend = spec.substr(0, colon);
  KILN_CHECK(!t.backend.empty(), ErrorKind::InvalidArgument, "target '" + spec + "' names no backend");
  if (colon == std::string::npos) return t;
  const std::string rest = spec.substr(colon + 1);
  KILN_CHECK(!rest.empty(), ErrorKind::InvalidArgument, "target '" + spec + "': nothing after ':'");
  if (backend::get_backend(t.backend).target_spec_names_a_device()) {
    t.device = rest;
    return t;
  }
  for (const std::string& arch : split(rest, ','))
    if (!arch.empty()) t.archs.push_back(arch);
  KILN_CHECK(!t.archs.empty(), ErrorKind::InvalidArgument, "target '" + spec + "' lists no architecture");
  return t;
}

std::vector<WrittenTarget> write_model_file(const Model& model, const std::string& path,
                                            const ModelFileOptions& options) {
  KILN_CHECK(!options.targets.empty(), ErrorKind::InvalidArgument, "kiln compile: no target");
  const Settings settings = Settings::resolve(options.mode, options.settings);
  const cache::CompileCache cache(options.cache_dir);
  const std::vector<Model> models = models_for_shape_sets(model, options.shape_sets);
  BlobWriter blobs;
  json entries = json::array();
  std::vector<WrittenTarget> written;
  for (const TargetSpec& spec : options.targets) {
    const backend::Backend& b = backend::get_backend(spec.backend);
    std::vector<backend::TargetDesc> targets;
    if (spec.archs.empty()) {
      if (auto why = b.unavailable_reason())
        throw_error(ErrorKind::DeviceUnavailable,
                    "target " + spec.backend + ": " + *why + " (name an architecture to compile offline, e.g. " +
                        spec.backend + ":" + (b.offline_targets().empty() ? "ARCH" : b.offline_targets()[0].arch) + ")");
      const int index = backend::resolve_device(b, spec.device);
      for (const backend::DeviceInfo& d : b.enumerate_devices())
        if (d.index == index) targets.push_back(d.target);
      KILN_ASSERT(!targets.empty());
    } else {
      for (const std::string& arch : spec.archs) targets.push_back(offline_target_for(b, arch));
    }
    const std::string compiler = b.compiler().version();
    for (const backend::TargetDesc& target : targets) {
      for (const Model& set_model : models) {
        // A copy: its kernels get their binaries.
        auto plan = std::make_shared<compiler::Plan>(
            *compiler::plan_from_records(set_model, b, target, settings, options.cache_dir));
        WrittenTarget w{b.name(), target.offline ? target.arch : target.device_name, 0, 0, 0,
                        plan_input_shapes(*plan)};
        for (compiler::RenderedKernel& kernel : plan->rendered) {
          kernel.binaries = compile_binaries(b, target, kernel.source, cache, compiler);
          for (const backend::KernelBinary& binary : kernel.binaries) w.binary_bytes += binary.data.size();
        }
        w.kernels = static_cast<int>(plan->rendered.size());
        if (plan->autotune)
          for (const tune::SiteDecision& d : plan->autotune->decisions)
            w.tuned_sites += d.source != tune::ChoiceSource::heuristic ? 1 : 0;
        base::log(base::LogLevel::info, "kiln compile: " + model.name() + " for " + target_label(*plan) +
                                                  (models.size() > 1 ? ", inputs " + describe_inputs(*plan) : "") +
                                                  ": " + std::to_string(w.kernels) + " kernels");
        entries.push_back(encode_plan(*plan, blobs));
        written.push_back(std::move(w));
      }
    }
  }
  const json metadata = {{"format", kModelFileFormat},
                         {"kiln_version", tune::kiln_version()},
                         {"kiln_sources", KILN_SOURCE_DIGEST},
                         {"created", utc_now()},
                         {"model_name", model.name()},
                         {"task", model.task()},
                         {"plans", std::move(entries)}};
  write_container(path, kModelFileKind, metadata, blobs);
  return written;
}

ModelFile read_model_file(const std::string& path) {
  const auto start = std::chrono::steady_clock::now();
  const Container file = read_container(path, kModelFileKind);
  const double read_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  const json& meta = file.metadata();
  ModelFile model = decoding(file, [&] {
    const std::string version = meta.at("kiln_version").get<std::string>();
    const int format = base::json_number<int>(meta.at("format"));
    KILN_CHECK(version == tune::kiln_version() && format == kModelFileFormat, ErrorKind::Unsupported,
               "'" + path + "' was written by kiln " + version + " (format " + std::to_string(format) +
                   "); this is kiln " + tune::kiln_version() + " (format " + std::to_string(kModelFileFormat) +
                   "), which reads only its own: compile the model again with `kiln compile`");
    // The same version built from other sources (a developer's build) plans differently.
    const std::string sources = meta.contains("kiln_sources") ? meta.at("kiln_sources").get<std::string>() : "unknown";
    KILN_CHECK(sources == KILN_SOURCE_DIGEST, ErrorKind::Unsupported,
               "'" + path + "' was written by another build of kiln " + version + " (sources " + sources +
                   "; this build's are " + KILN_SOURCE_DIGEST +
                   "), and plans are read only by the build that wrote them: compile the model again with `kiln "
                   "compile`");
    ModelFile out;
    out.path = path;
    out.model_name = meta.at("model_name").get<std::string>();
    out.task = meta.at("task").get<std::string>();
    for (const json& entry : meta.at("plans")) out.plans.push_back(decode_plan(entry, file));
    KILN_CHECK(!out.plans.empty(), ErrorKind::Corrupt, "'" + path + "' holds no plan");
    return out;
  });
  char timing[96];
  std::snprintf(timing, sizeof timing, " read and checked in %.1f ms, decoded in %.1f ms", read_ms,
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count() - read_ms);
  base::log(base::LogLevel::debug, "'" + path + "'" + timing);
  return model;
}

std::vector<Shape> plan_input_shapes(const compiler::Plan& plan) {
  std::vector<Shape> shapes;
  for (const graph::ValueId id : plan.graph->inputs()) shapes.push_back(plan.graph->value(id).type.shape);
  return shapes;
}

std::string describe_inputs(const compiler::Plan& plan) {
  std::string text;
  for (const graph::ValueId id : plan.graph->inputs()) {
    const graph::Value& value = plan.graph->value(id);
    text += (text.empty() ? "" : ", ") + value.name + " " + graph::type_str(value.type);
  }
  return text;
}

std::vector<std::vector<Shape>> shape_sets(const ModelFile& file) {
  std::vector<std::vector<Shape>> sets;
  for (const auto& plan : file.plans) {
    std::vector<Shape> shapes = plan_input_shapes(*plan);
    if (std::find(sets.begin(), sets.end(), shapes) == sets.end()) sets.push_back(std::move(shapes));
  }
  return sets;
}

std::string describe_targets(const ModelFile& file) {
  std::vector<std::string> labels;
  for (const auto& plan : file.plans)
    if (std::find(labels.begin(), labels.end(), target_label(*plan)) == labels.end())
      labels.push_back(target_label(*plan));
  std::string text;
  for (const std::string& label : labels) text += (text.empty() ? "" : "; ") + label;
  std::vector<std::string> sets;
  for (const auto& plan : file.plans)
    if (std::find(sets.begin(), sets.end(), describe_inputs(*plan)) == sets.end()) sets.push_back(describe_inputs(*plan));
  if (sets.size() > 1)
    for (std::size_t k = 0; k < sets.size(); ++k)
      text += (k == 0 ? ", each for input shapes " : k + 1 == sets.size() ? " and " : "; ") + sets[k];
  return text;
}

std::optional<std::string> plan_unfit(const compiler::Plan& plan, const backend::Backend& b,
                                      const backend::TargetDesc& device) {
  if (plan.backend != b.name()) return "it is for backend " + plan.backend;
  if (plan.storage.alignment % std::max<std::uint64_t>(device.min_buffer_offset_alignment, 1) != 0)
    return "its buffers are aligned to " + std::to_string(plan.storage.alignment) + " bytes, the device needs " +
           std::to_string(device.min_buffer_offset_alignment);
  for (const compiler::RenderedKernel& kernel : plan.rendered)
    if (auto why = b.supports(kernel.requirements, device)) return "kernel '" + kernel.source.name + "': " + *why;
  for (const compiler::Step& step : plan.steps)
    if (step.dispatch)
      for (int axis = 0; axis < 3; ++axis)
        if (device.max_workgroup_count[axis] != 0 && step.dispatch->grid[axis] > device.max_workgroup_count[axis])
          return "dispatch '" + step.dispatch->kernel_name + "' needs " + std::to_string(step.dispatch->grid[axis]) +
                 " workgroups along axis " + std::to_string(axis) + ", the device allows " +
                 std::to_string(device.max_workgroup_count[axis]);
  std::set<std::string> formats;
  for (const compiler::RenderedKernel& kernel : plan.rendered)
    for (const backend::KernelBinary& binary : kernel.binaries) formats.insert(binary.format);
  return b.foreign_plan_refusal(plan.target, device, formats);
}

std::shared_ptr<const compiler::Plan> select_plan(const ModelFile& file, const backend::Backend& b,
                                                  const backend::TargetDesc& device) {
  const std::string fingerprint = device.fingerprint();
  for (const auto& plan : file.plans)
    if (plan->backend == b.name() && plan->target.fingerprint() == fingerprint) return plan;
  // The device's own architecture first (its CUBIN over another's PTX).
  for (const auto& plan : file.plans)
    if (plan->target.arch == device.arch && !plan_unfit(*plan, b, device)) return plan;
  std::string reasons;
  for (const auto& plan : file.plans) {
    const std::optional<std::string> why = plan_unfit(*plan, b, device);
    if (!why) return plan;
    reasons += "\n  " + target_label(*plan) + ": " + *why;
  }
  throw_error(ErrorKind::Unsupported, "'" + file.path + "' holds no plan for " + b.name() + " device " +
                                          device.device_name + " (" + device.arch + "); it holds " +
                                          describe_targets(file) + ":" + reasons +
                                          "\ncompile it for this device with `kiln compile --target " + b.name() +
                                          "`");
}

std::shared_ptr<const compiler::Plan> select_plan(const ModelFile& file, const backend::Backend& b,
                                                  const backend::TargetDesc& device,
                                                  const std::vector<Shape>& input_shapes) {
  ModelFile same_shapes = file;
  same_shapes.plans.clear();
  for (const auto& plan : file.plans)
    if (plan_input_shapes(*plan) == input_shapes) same_shapes.plans.push_back(plan);
  KILN_CHECK(!same_shapes.plans.empty(), ErrorKind::InvalidArgument,
             "'" + file.path + "' holds no plan for these input shapes; it holds " + describe_targets(file));
  return select_plan(same_shapes, b, device);
}

}  // namespace kiln::artifact
