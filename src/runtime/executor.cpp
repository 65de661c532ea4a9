#include "src/runtime/executor.h"

#include "graph/op_registry.h"
#include "graph/passes/passes.h"
#include "src/fuse/sources.h"
#include "src/kernel/parameterise.h"
#include "src/lower/lower.h"
#include "src/runtime/log.h"

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <sstream>

namespace kiln {
namespace {

using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

std::uint64_t align_up(std::uint64_t value, std::uint64_t alignment) {
  return (value + alignment - 1) / alignment * alignment;
}

std::uint64_t value_bytes(const graph::Value& v) {
  // Vulkan bindings must not be empty, so even a zero-element tensor gets 4 bytes.
  return std::max<std::uint64_t>(static_cast<std::uint64_t>(num_elements(v.type.shape)) * dtype_size(v.type.dtype), 4);
}

std::string mib(std::uint64_t bytes) {
  std::ostringstream s;
  s.precision(2);
  s << std::fixed << static_cast<double>(bytes) / (1024.0 * 1024.0) << " MiB";
  return s.str();
}

constexpr const char* kDynamicInput = "input shape depends on data";

// The reason without value names, so that breaks of one op group together.
std::string reason_kind(const std::string& reason) {
  return reason.starts_with(kDynamicInput) ? std::string(kDynamicInput) : reason;
}

}  // namespace

std::string graph_break_line(const Executor::GraphBreak& b) {
  return "graph break: " + b.op + " '" + b.node_name + "': " + b.reason;
}

Executor::Executor(Model model, Options options) : model_(std::move(model)), options_(std::move(options)) {
  ctx_ = runtime::acquire_device(options_.backend, options_.device, options_.compile.cache_dir);
}

Executor::~Executor() = default;

void Executor::prepare() {
  if (prepared_) return;
  plan();
  if (!options_.compiled) return;
  const auto start = Clock::now();
  warm_up();
  const double warm_up_ms = ms_since(start);
  stats_.compile_ms += warm_up_ms;
  runtime::log(runtime::LogLevel::info, "warmed up " + std::to_string(stats_.kernels) + " kernels of " +
                                            model_.name() + " in " + std::to_string(static_cast<int>(warm_up_ms)) +
                                            " ms");
}

void Executor::warm_up() {
  std::unique_ptr<backend::CommandList> list = ctx_->device->create_command_list();
  std::set<const backend::LoadedKernel*> seen;
  std::vector<backend::BufferBinding> bindings;
  for (const Segment& segment : segments_)
    for (const Dispatch& d : segment.dispatches) {
      if (!seen.insert(d.kernel.get()).second) continue;
      bindings.clear();
      for (graph::ValueId v : d.values) {
        const Storage& s = storage_[v];
        bindings.push_back({s.buffer, s.offset, s.bytes});
      }
      // The driver's deferred work is per pipeline, not per workgroup: one group is enough.
      list->dispatch(*d.kernel, {1, 1, 1}, bindings, d.params);
    }
  if (seen.empty()) return;
  list->finish();
  list->submit();
}

void Executor::plan() {
  const auto start = Clock::now();
  const int hits_before = ctx_->kernels->disk_hits();
  const int compiled_before = ctx_->kernels->compiled();

  if (options_.compiled) {
    auto result = graph::passes::run_compile_passes(model_.graph(),
                                                    {.cpu_device = ctx_->device->target().device_type == "cpu"});
    for (const auto& report : result.reports) {
      pass_log_.push_back(report.pass + ": " + std::to_string(report.changes) + " change(s)");
      for (const auto& line : report.details) pass_log_.push_back("    " + line);
    }
    graph_ = std::make_shared<const graph::Graph>(std::move(result.graph));
  } else {
    graph_ = model_.graph_ptr();
  }
  // Where a cold compile goes, phase by phase (KILN_LOG=debug).
  auto phase_done = [&, last = start](const char* phase) mutable {
    runtime::log(runtime::LogLevel::debug, model_.name() + ": " + phase + " in " +
                                               std::to_string(static_cast<int>(ms_since(last))) + " ms");
    last = Clock::now();
  };
  phase_done("graph passes");
  lower_graph();
  phase_done("lowering, fusion and kernel loading");
  assign_storage();
  phase_done("memory plan and constant upload");

  const bool replay = options_.compiled && options_.compile.mode == Mode::reduce_overhead;
  if (replay) {
    for (Segment& segment : segments_) {
      if (segment.host) continue;
      segment.recorded = ctx_->device->create_command_list();
      record(segment, *segment.recorded);
      segment.recorded->finish();
    }
  }

  std::set<const backend::LoadedKernel*> distinct;
  int dispatches = 0;
  for (const Segment& segment : segments_)
    for (const Dispatch& d : segment.dispatches) {
      distinct.insert(d.kernel.get());
      ++dispatches;
    }
  stats_.kernels = static_cast<int>(distinct.size());
  stats_.dispatches_per_run = dispatches;
  stats_.host_steps_per_run = static_cast<int>(breaks_.size());
  stats_.kernel_cache_hits = ctx_->kernels->disk_hits() - hits_before;
  stats_.kernel_cache_misses = ctx_->kernels->compiled() - compiled_before;
  stats_.peak_device_bytes = memory_plan_.arena_bytes + constant_bytes_ + io_bytes_;
  stats_.compile_ms = ms_since(start);
  prepared_ = true;
  runtime::log(runtime::LogLevel::info,
               std::string(options_.compiled ? "compiled " : "prepared eager ") + model_.name() + ": " +
                   std::to_string(dispatches) + " dispatches, " + std::to_string(stats_.kernels) + " kernels (" +
                   std::to_string(stats_.kernel_cache_misses) + " compiled, " +
                   std::to_string(stats_.kernel_cache_hits) + " from the disk cache) in " +
                   std::to_string(static_cast<int>(stats_.compile_ms)) + " ms");
}

void Executor::lower_graph() {
  const graph::Graph& g = *graph_;
  const backend::TargetDesc& target = ctx_->device->target();
  fuse::PlanOptions plan_options;
  plan_options.fuse = options_.compiled;
  plan_options.max_kernel_buffers = target.max_kernel_buffers;
  plan_options.target = fuse::lower_target(target);
  plan_options.kernel_unsupported = [&](const kir::Kernel& kernel) -> std::optional<std::string> {
    backend::KernelRequirements needs;
    needs.kernel_name = kernel.name;
    needs.workgroup_size = kernel.workgroup_size;
    needs.num_buffers = static_cast<std::uint32_t>(kernel.buffers.size());
    needs.shared_memory_bytes = kir::shared_memory_bytes(kernel);
    if (auto why = ctx_->backend->supports(needs, target))
      return "kernel '" + kernel.name + "' cannot run on " + target.device_name + ": " + *why;
    return std::nullopt;
  };
  const auto plan_start = Clock::now();
  fuse::KernelPlan plan = fuse::plan_kernels(g, plan_options);
  runtime::log(runtime::LogLevel::debug, model_.name() + ": lowered " + std::to_string(plan.kernel_nodes) +
                                             " nodes and fused them into " + std::to_string(plan.steps.size()) +
                                             " steps in " + std::to_string(static_cast<int>(ms_since(plan_start))) +
                                             " ms");
  root_ = std::move(plan.root);
  fused_away_ = std::move(plan.fused_away);
  kernel_nodes_ = plan.kernel_nodes;

  std::vector<kir::Kernel*> step_kernels;
  for (fuse::PlanStep& step : plan.steps)
    if (!step.host) step_kernels.push_back(&step.kernel->kernel);
  const std::vector<std::size_t> same_source_as = parameterise_kernels(step_kernels);

  // Compile and load every kernel first, distinct ones concurrently. Kernels
  // parameterisation made alike (a transformer's blocks) are rendered once.
  const auto kernels_start = Clock::now();
  std::vector<const kir::Kernel*> own_source;
  std::vector<std::size_t> source_index(step_kernels.size());
  for (std::size_t i = 0; i < step_kernels.size(); ++i) {
    if (same_source_as[i] != i) {
      source_index[i] = source_index[same_source_as[i]];
      continue;
    }
    source_index[i] = own_source.size();
    own_source.push_back(step_kernels[i]);
  }
  const std::vector<std::shared_ptr<backend::LoadedKernel>> loaded_sources = ctx_->kernels->get_all(own_source);
  std::vector<std::shared_ptr<backend::LoadedKernel>> loaded;
  loaded.reserve(step_kernels.size());
  for (std::size_t i : source_index) loaded.push_back(loaded_sources[i]);
  runtime::log(runtime::LogLevel::debug, model_.name() + ": " + std::to_string(step_kernels.size()) + " kernels (" +
                                             std::to_string(own_source.size()) + " to render) compiled and loaded in " +
                                             std::to_string(static_cast<int>(ms_since(kernels_start))) + " ms");
  std::size_t next_loaded = 0;

  breaks_.clear();
  for (fuse::PlanStep& step : plan.steps) {
    if (step.host) {
      const graph::Node& node = g.node(step.nodes[0]);
      breaks_.push_back({node.id, node.op, node.name, step.host_reason, reason_kind(step.host_reason)});
      Segment& host = segments_.emplace_back();
      host.host = true;
      host.host_node = node.id;
      continue;
    }
    if (segments_.empty() || segments_.back().host) segments_.emplace_back();
    Dispatch d;
    d.nodes = std::move(step.nodes);
    d.kernel = std::move(loaded[next_loaded++]);
    d.kernel_name = step.kernel->kernel.name;
    d.grid = kir::dispatch_grid(step.kernel->kernel, target.max_workgroup_count[0]);
    d.values = std::move(step.kernel->values);
    d.params = step.kernel->kernel.params;
    segments_.back().dispatches.push_back(std::move(d));
  }

  read_by_kernel_.assign(g.values().size(), false);
  for (const Segment& segment : segments_)
    for (const Dispatch& d : segment.dispatches)
      for (graph::ValueId v : d.values) read_by_kernel_[root_[v]] = true;

  if (!breaks_.empty()) {
    // Bounded: a model may have a million host nodes.
    std::string list;
    for (std::size_t i = 0; i < std::min(breaks_.size(), kMaxListedEntries); ++i)
      list += "\n  " + graph_break_line(breaks_[i]);
    if (breaks_.size() > kMaxListedEntries)
      list += "\n  ... (" + std::to_string(breaks_.size() - kMaxListedEntries) + " more; explain() lists them all)";
    if (options_.compiled && options_.compile.fullgraph)
      throw_error(ErrorKind::Unsupported, "fullgraph: model '" + model_.name() + "' has " +
                                              std::to_string(breaks_.size()) + " graph break(s) on " +
                                              options_.backend + ":" + list);
    runtime::log(runtime::LogLevel::warning, "model '" + model_.name() + "': " + std::to_string(breaks_.size()) +
                                                 " node(s) run on the host reference implementation:" + list);
  }
}

std::vector<std::size_t> Executor::parameterise_kernels(std::span<kir::Kernel* const> kernels) const {
  const auto start = Clock::now();
  kir::ParameteriseReport report = fuse::parameterise_for_target(kernels, ctx_->device->target());
  runtime::log(runtime::LogLevel::debug,
               "parameterised " + std::to_string(report.kernels) + " kernels of " + model_.name() + " into " +
                   std::to_string(report.groups) + " shared sources (up to " +
                   std::to_string(report.max_params_used) + " parameters; " +
                   std::to_string(report.groups_over_limit) + " groups over the limit) in " +
                   std::to_string(static_cast<int>(ms_since(start))) + " ms");
  if (report.same_source_as.size() == kernels.size()) return std::move(report.same_source_as);
  // Not parameterised (KILN_NO_PARAMETERISE): every kernel renders its own source.
  std::vector<std::size_t> own(kernels.size());
  for (std::size_t i = 0; i < own.size(); ++i) own[i] = i;
  return own;
}

void Executor::assign_storage() {
  const graph::Graph& g = *graph_;
  backend::Device& device = *ctx_->device;
  const std::uint64_t alignment = std::max<std::uint64_t>(device.target().min_buffer_offset_alignment, 16);
  const std::size_t n = g.values().size();
  storage_.assign(n, Storage{});

  // Step index of every dispatch and host node, in execution order.
  std::vector<int> step_of_node(g.nodes().size(), -1);
  int steps = 0;
  for (const Segment& segment : segments_) {
    if (segment.host) step_of_node[segment.host_node] = steps++;
    for (const Dispatch& d : segment.dispatches) {
      for (graph::NodeId node : d.nodes) step_of_node[node] = steps;  // a fusion group is one step
      ++steps;
    }
  }
  // Views (aliases) have no step: they take their input's, so lifetimes stay closed.
  std::vector<int> first(n, std::numeric_limits<int>::max()), last(n, -1);
  for (const graph::Node& node : g.nodes()) {
    int step = step_of_node[node.id];
    if (step < 0) continue;  // a view
    for (graph::ValueId v : node.outputs) first[root_[v]] = std::min(first[root_[v]], step);
  }
  for (const graph::Node& node : g.nodes()) {
    int step = step_of_node[node.id];
    if (step < 0) continue;
    for (graph::ValueId v : node.inputs)
      if (v >= 0) last[root_[v]] = std::max(last[root_[v]], step);
  }
  for (graph::ValueId v : g.outputs()) last[root_[v]] = steps;  // read back after the last step

  // Constants: one buffer, uploaded now.
  std::vector<graph::ValueId> constants, inputs, intermediates;
  for (const graph::Value& v : g.values()) {
    // Dynamic values live on the host only; fused values only in registers.
    if (root_[v.id] != v.id || v.type.dynamic || fused_away_[v.id]) continue;
    if (v.constant) constants.push_back(v.id);
    else if (v.producer == graph::kNoNode) inputs.push_back(v.id);
    else intermediates.push_back(v.id);
  }
  const std::uint64_t max_buffer = device.target().max_buffer_bytes ? device.target().max_buffer_bytes : UINT64_MAX;
  // Packs values one after another into as few buffers as the device's
  // largest buffer allows; returns the bytes allocated.
  auto place_packed = [&](const std::vector<graph::ValueId>& ids) -> std::uint64_t {
    std::uint64_t allocated = 0;
    std::size_t begin = 0;
    while (begin < ids.size()) {
      std::uint64_t total = 0;
      std::size_t end = begin;
      for (; end < ids.size(); ++end) {
        const std::uint64_t bytes = value_bytes(g.value(ids[end]));
        KILN_CHECK(bytes <= max_buffer, ErrorKind::OutOfMemory,
                   "'" + g.value(ids[end]).name + "' needs " + std::to_string(bytes) +
                       " bytes, more than the largest buffer of " + device.target().device_name + " (" +
                       std::to_string(max_buffer) + " bytes)");
        const std::uint64_t offset = align_up(total, alignment);
        if (end > begin && offset + bytes > max_buffer) break;
        storage_[ids[end]].offset = offset;
        storage_[ids[end]].bytes = bytes;
        total = offset + bytes;
      }
      buffers_.push_back(device.allocate(total));
      for (std::size_t i = begin; i < end; ++i) storage_[ids[i]].buffer = buffers_.back().get();
      allocated += total;
      begin = end;
    }
    return allocated;
  };
  constant_bytes_ = place_packed(constants);
  for (graph::ValueId id : constants) upload(id, *g.value(id).constant);
  io_bytes_ = place_packed(inputs);

  if (options_.compiled) {
    lifetimes_.clear();
    for (graph::ValueId id : intermediates) {
      KILN_ASSERT(first[id] <= steps);
      lifetimes_.push_back({value_bytes(g.value(id)), first[id], std::max(first[id], last[id])});
    }
    memory_plan_ = runtime::plan_memory(lifetimes_, alignment, max_buffer);
    std::vector<backend::Buffer*> arenas;
    for (std::uint64_t size : memory_plan_.arena_sizes) {
      buffers_.push_back(device.allocate(size));
      arenas.push_back(buffers_.back().get());
    }
    for (std::size_t i = 0; i < intermediates.size(); ++i) {
      Storage& s = storage_[intermediates[i]];
      s.buffer = arenas[memory_plan_.arena[i]];
      s.offset = memory_plan_.offsets[i];
      s.bytes = lifetimes_[i].bytes;
    }
  } else {
    // Eager: a buffer per tensor, kept between calls as a caching allocator would.
    std::uint64_t total = 0;
    for (graph::ValueId id : intermediates) {
      Storage& s = storage_[id];
      s.bytes = value_bytes(g.value(id));
      buffers_.push_back(device.allocate(s.bytes));
      s.buffer = buffers_.back().get();
      total += align_up(s.bytes, alignment);
    }
    memory_plan_ = {};
    memory_plan_.arena_bytes = total;
    memory_plan_.unshared_bytes = total;
  }
  for (std::size_t v = 0; v < n; ++v) {
    if (root_[v] == static_cast<graph::ValueId>(v) || g.values()[v].type.dynamic) continue;
    storage_[v] = storage_[root_[v]];
    storage_[v].bytes = value_bytes(g.value(static_cast<graph::ValueId>(v)));
  }
}

void Executor::record(Segment& segment, backend::CommandList& list) const {
  std::vector<backend::BufferBinding> bindings;
  for (const Dispatch& d : segment.dispatches) {
    bindings.clear();
    for (graph::ValueId v : d.values) {
      const Storage& s = storage_[v];
      bindings.push_back({s.buffer, s.offset, s.bytes});
    }
    list.dispatch(*d.kernel, d.grid, bindings, d.params);
  }
}

void Executor::run_host_node(const Segment& segment) {
  const graph::Graph& g = *graph_;
  const graph::Node& node = g.node(segment.host_node);
  std::vector<Tensor> inputs;
  for (graph::ValueId v : node.inputs) inputs.push_back(v >= 0 ? read_value(v) : Tensor());
  std::vector<Tensor> outputs = graph::get_op(node.op).reference(node, inputs);
  KILN_ASSERT(outputs.size() == node.outputs.size());
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const graph::ValueId v = node.outputs[i];
    // Only what a kernel reads goes to the device; the rest stays on the host.
    if (!g.value(v).type.dynamic && read_by_kernel_[v]) upload(v, outputs[i]);
    host_values_[v] = std::move(outputs[i]);
  }
}

Tensor Executor::read_value(graph::ValueId id) const {
  const graph::Value& v = graph_->value(id);
  if (v.constant) return *v.constant;
  if (const auto& host = host_values_[root_[id]]) return root_[id] == id ? *host : host->reshaped(v.type.shape);
  KILN_ASSERT(!v.type.dynamic);
  return download(id);
}

void Executor::check_inputs(const std::vector<Tensor>& inputs) const {
  const graph::Graph& g = model_.graph();
  KILN_CHECK(inputs.size() == g.inputs().size(), ErrorKind::ShapeMismatch,
             "model '" + model_.name() + "' takes " + std::to_string(g.inputs().size()) + " input(s) but " +
                 std::to_string(inputs.size()) + " were given");
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const graph::Value& v = g.value(g.inputs()[i]);
    graph::TensorType got{inputs[i].dtype(), inputs[i].shape()};
    KILN_CHECK(got == v.type, ErrorKind::ShapeMismatch,
               "input '" + v.name + "' of model '" + model_.name() + "' expects " + graph::type_str(v.type) +
                   " but got " + graph::type_str(got));
  }
}

Tensor Executor::download(graph::ValueId id) const {
  const graph::Value& v = graph_->value(id);
  Tensor t(v.type.dtype, v.type.shape);
  const Storage& s = storage_[id];
  if (t.nbytes() > 0) ctx_->device->download(*s.buffer, s.offset, t.bytes());
  return t;
}

void Executor::upload(graph::ValueId id, const Tensor& tensor) {
  const Storage& s = storage_[id];
  KILN_ASSERT(s.buffer != nullptr);
  if (tensor.nbytes() > 0) ctx_->device->upload(*s.buffer, s.offset, tensor.bytes());
}

void Executor::load_inputs(const std::vector<Tensor>& inputs) {
  // The graph after passes keeps the model's inputs and outputs in order.
  host_values_.assign(graph_->values().size(), std::nullopt);
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    upload(graph_->inputs()[i], inputs[i]);
    host_values_[graph_->inputs()[i]] = inputs[i];  // host steps read inputs without a download
  }
}

std::vector<Tensor> Executor::run(const std::vector<Tensor>& inputs) {
  check_inputs(inputs);
  if (!prepared_) plan();  // this call is its own warm-up
  const auto start = Clock::now();
  load_inputs(inputs);

  std::optional<double> device_ms = 0.0;
  for (Segment& segment : segments_) {
    if (segment.host) {
      run_host_node(segment);
      continue;
    }
    backend::CommandList* list = segment.recorded.get();
    std::unique_ptr<backend::CommandList> fresh;
    if (list == nullptr) {
      fresh = ctx_->device->create_command_list();
      record(segment, *fresh);
      fresh->finish();
      list = fresh.get();
    }
    list->submit();
    if (auto ms = list->last_device_ms(); ms && device_ms) *device_ms += *ms;
    else device_ms.reset();
  }

  std::vector<Tensor> outputs;
  for (graph::ValueId v : graph_->outputs()) {
    // Never hand out the caller's input or a constant's storage.
    const bool borrowed = graph_->value(root_[v]).producer == graph::kNoNode;
    Tensor t = read_value(v);
    outputs.push_back(borrowed ? t.clone() : t);
  }
  host_values_.clear();
  stats_.last_run_ms = ms_since(start);
  stats_.last_device_ms = device_ms;
  return outputs;
}

std::string Executor::ops_per_backend() const {
  // op -> (nodes as kernels or views, nodes on the host, the host reasons)
  struct Count {
    int device = 0;
    int host = 0;
    std::set<std::string> reasons;
  };
  std::map<std::string, Count> counts;
  std::vector<bool> on_host(graph_->nodes().size(), false);
  for (const GraphBreak& b : breaks_) {
    on_host[b.node] = true;
    Count& c = counts[b.op];
    ++c.host;
    c.reasons.insert(b.kind);
  }
  for (const graph::Node& node : graph_->nodes())
    if (!on_host[node.id]) ++counts[node.op].device;
  std::ostringstream out;
  out << "ops per backend (" << options_.backend << " | host):\n";
  for (const auto& [op, c] : counts) {
    out << "  " << op << ": " << c.device << " on " << options_.backend << ", " << c.host << " on host";
    std::string why;
    for (const auto& r : c.reasons) why += (why.empty() ? "" : "; ") + r;
    if (!why.empty()) out << " (" << why << ")";
    out << "\n";
  }
  return out.str();
}

std::string Executor::explain() const {
  std::ostringstream out;
  const backend::TargetDesc& target = ctx_->device->target();
  out << "model " << model_.name() << ": "
      << (options_.compiled ? "compiled, mode " + std::string(mode_name(options_.compile.mode)) : std::string("eager"))
      << ", on " << options_.backend << ":" << ctx_->index << " (" << target.device_name << ")\n";
  if (!prepared_) {
    out << "  (not compiled yet: call it once or prepare())\n";
    return out.str();
  }
  out << "graph breaks: " << breaks_.size() << "\n";
  for (const GraphBreak& b : breaks_) out << "  " << graph_break_line(b) << "\n";
  out << ops_per_backend();
  if (options_.compiled) {
    out << "graph passes:\n";
    for (const auto& line : pass_log_) out << "  " << line << "\n";
  }
  out << "nodes: " << model_.graph().nodes().size() << " in the model, " << graph_->nodes().size()
      << " after passes\n";
  out << fusion_groups();
  out << "memory: activations " << mib(memory_plan_.arena_bytes);
  if (options_.compiled)
    out << " (planned; " << mib(memory_plan_.unshared_bytes) << " without buffer reuse)";
  out << ", weights " << mib(constant_bytes_) << ", inputs " << mib(io_bytes_) << "\n";
  return out.str();
}

std::string Executor::fusion_groups() const {
  std::ostringstream out;
  int fused_values = 0;
  for (bool fused : fused_away_) fused_values += fused ? 1 : 0;
  out << "fusion: " << kernel_nodes_ << " kernel nodes -> " << stats_.dispatches_per_run << " dispatches ("
      << fused_values << " intermediate values fused away), " << stats_.kernels << " distinct kernels, "
      << stats_.host_steps_per_run << " host steps\n";
  std::size_t next_break = 0;
  int index = 0;
  for (const Segment& segment : segments_) {
    if (segment.host) {
      const GraphBreak& b = breaks_[next_break++];
      out << "  [host] " << b.node_name << " (" << b.op << "): graph break, run on the reference implementation ("
          << b.reason << ")\n";
      continue;
    }
    for (const Dispatch& d : segment.dispatches) {
      const graph::Node& last = graph_->node(d.nodes.back());
      out << "  #" << index++ << " kernel " << d.kernel_name << " grid [" << d.grid[0] << ", " << d.grid[1] << ", "
          << d.grid[2] << "] -> " << graph::type_str(graph_->value(last.outputs[0]).type) << "\n";
      for (graph::NodeId id : d.nodes) {
        const graph::Node& node = graph_->node(id);
        out << "      " << node.name << " (" << node.op << ")\n";
      }
    }
  }
  return out.str();
}

std::optional<Executor::Placement> Executor::placement(graph::ValueId value) const {
  KILN_ASSERT(value >= 0 && static_cast<std::size_t>(value) < storage_.size());
  const Storage& s = storage_[static_cast<std::size_t>(value)];
  if (s.buffer == nullptr) return std::nullopt;
  return Placement{s.buffer, s.offset, s.bytes};
}

std::vector<Executor::DispatchInfo> Executor::dispatches() const {
  std::vector<DispatchInfo> out;
  for (const Segment& segment : segments_)
    for (const Dispatch& d : segment.dispatches) out.push_back({d.nodes, d.kernel_name, d.values});
  return out;
}

}  // namespace kiln
