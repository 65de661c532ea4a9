#include "src/runtime/executor.h"

#include "src/base/cache_key.h"
#include "src/base/check.h"
#include "src/runtime/subgraph_models.h"

#include "src/artifact/plan_cache.h"
#include "src/runtime/background_tuning.h"
#include "graph/passes/passes.h"

#include "graph/model_access.h"
#include "graph/op_registry.h"
#include "src/base/log.h"
#include "src/runtime/device_tensor.h"

#include <algorithm>
#include <array>
#include <future>
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

std::string mib(std::uint64_t bytes) {
  std::ostringstream s;
  s.precision(2);
  s << std::fixed << static_cast<double>(bytes) / (1024.0 * 1024.0) << " MiB";
  return s.str();
}

}  // namespace

Executor::Executor(Model model, Options options) : model_(std::move(model)), options_(std::move(options)) {
  ctx_ = runtime::acquire_device(options_.backend, options_.device, options_.compile.cache_dir);
}

Executor::~Executor() {
  // A background tuning job of this model stops: one queued never runs.
  std::shared_ptr<runtime::TuningJob> job;
  {
    std::lock_guard lock(published_mutex_);
    job = tuning_job_;
  }
  if (job) job->cancel();
}

const compiler::Plan& Executor::prepared_plan() const {
  KILN_CHECK(plan_ != nullptr, ErrorKind::InvalidArgument,
             "model '" + model_.name() + "' is not compiled yet: call it once or prepare()");
  return *plan_;
}

void Executor::prepare() {
  std::lock_guard lock(mutex_);
  prepare_locked();
  publish_stats();
}

RunStats Executor::stats() const {
  std::lock_guard lock(published_mutex_);
  RunStats stats = published_;
  stats.tuning_in_background = tuning_job_ && !tuning_job_->finished();
  return stats;
}

void Executor::publish_stats() {
  std::lock_guard lock(published_mutex_);
  published_ = stats_;
}

void Executor::prepare_locked() {
  if (prepared_) return;
  plan_and_bind();
  if (!options_.compiled) return;
  const auto start = Clock::now();
  warm_up();
  const double warm_up_ms = ms_since(start);
  stats_.compile_ms += warm_up_ms;
  stats_.warm_up_ms = warm_up_ms;
  base::log(base::LogLevel::info, "warmed up " + std::to_string(stats_.kernels) + " kernels of " +
                                            model_.name() + " in " + std::to_string(static_cast<int>(warm_up_ms)) +
                                            " ms");
}

void Executor::warm_up() {
  std::unique_ptr<backend::CommandList> list = ctx_->device->create_command_list();
  std::vector<bool> seen(loaded_.size(), false);
  bool any = false;
  std::vector<backend::BufferBinding> bindings;
  for (const Segment& segment : segments_)
    for (const compiler::Dispatch* d : segment.dispatches) {
      if (seen[d->kernel]) continue;
      // A kernel writing an input in place has no storage to bind until a
      // call gives the input: its first call warms it.
      if (std::ranges::any_of(d->values, [&](graph::ValueId v) { return storage_[v].buffer == nullptr; })) continue;
      seen[d->kernel] = any = true;
      bindings.clear();
      for (graph::ValueId v : d->values) {
        const Storage& s = storage_[v];
        bindings.push_back({s.buffer, s.offset, s.bytes});
      }
      // The driver's deferred work is per pipeline, not per workgroup: one group is enough.
      list->dispatch(*loaded_[d->kernel], {1, 1, 1}, bindings, d->params);
    }
  if (!any) return;
  list->finish();
  list->submit();
}

namespace {

// How a compile treats the sites the tuning database lacks (the tune setting).
struct Tuning {
  bool tune_missing = true;         // false: records only
  std::function<bool()> stop = {};  // asked between candidates (a background job's cancel)
};

// The tune setting as this compile applies it: "records" when the budget is 0.
// What PyTorch's precision settings do on this device (explain()): the
// choose_f32_products pass lets f32 products use the device's matrix units
// in TF32 or bf16 where the settings allow it; each such node says so in the
// pass's report.
std::string precision_line(const Settings& settings, const backend::TargetDesc& target) {
  const std::string& matmul = settings.choice("float32_matmul_precision");
  const bool conv_tf32 = settings.flag("conv_allow_tf32");
  std::string line = "precision: float32_matmul_precision " + matmul + ", conv_allow_tf32 " + (conv_tf32 ? "on" : "off");
  std::vector<std::string> matrix_inputs;
  for (const backend::MatrixShape& shape : target.matrix_shapes) matrix_inputs.push_back(shape.inputs);
  const graph::passes::F32ProductOptions options = graph::passes::f32_product_options(settings, matrix_inputs);
  if (matmul == "highest" && !conv_tf32) return line + ": f32 products in f32";
  if (!graph::passes::has_f32_product_units(options))
    return line + ": no effect on " + target.device_name + ", which has no TF32 or bf16 matrix units: f32 products in f32";
  // As choose_f32_products decides. Only convolutions lowered to a GEMM
  // (1x1, implicit GEMM, Winograd's products) reach the matrix units.
  const std::string convs = graph::passes::allowed_f32_products("Conv", options).empty()
                                ? "f32 convolutions in f32"
                                : "f32 convolutions' GEMMs in TF32";
  const std::string products = graph::passes::allowed_f32_products("MatMul", options);
  return line + ": " + convs + ", f32 MatMul/Gemm in " +
         (products.empty() ? "f32" : products == "tf32" ? "TF32" : "bf16") + " on " + target.device_name +
         "'s matrix units (sums in f32; docs/precision.md)";
}

std::string tune_policy(const Settings& settings) {
  if (settings.seconds("tune_budget") <= 0) return "records";
  return settings.choice("tune");
}

// The plan for this model and device: compiler::build_plan with the options' settings (and autotuner).
std::shared_ptr<const compiler::Plan> make_plan(const Model& model, const Executor::Options& options,
                                                runtime::DeviceContext& ctx, const Tuning& tuning) {
  compiler::PlanRequest request;
  request.model_name = model.name();
  request.compiled = options.compiled;
  request.fullgraph = options.compiled && options.compile.fullgraph;
  request.settings = options.settings;
  if (options.compiled && options.settings.flag("autotune")) {
    tune::AutotuneOptions autotune;
    autotune.database_path = tune::database_path(options.settings, options.compile.cache_dir);
    autotune.tune_missing = tuning.tune_missing;
    autotune.budget_s = tuning.tune_missing ? options.settings.seconds("tune_budget") : 0.0;
    autotune.device = {options.backend, ctx.index};
    autotune.tune.stop_requested = tuning.stop;
    auto tuner = std::make_shared<tune::Autotuner>(ctx.device->target(), std::move(autotune));
    request.graph_chooser = [tuner](const graph::passes::GraphChoice& choice) { return tuner->choose(choice); };
    request.autotune = [tuner](const graph::Graph& passed, const lower::LowerTarget& lower_target) {
      return tuner->finish(passed, lower_target);
    };
  }
  if (options.compiled && options.graph_chooser) request.graph_chooser = options.graph_chooser;
  if (options.compiled) {
    request.probe_graph = options.dynamic_probe;
    request.pinned_sites = options.pinned_sites;
    request.pinned_choices = options.pinned_choices;
    request.set_plans = options.set_plans;
    request.weight_memo = options.weight_memo;
  }
  return compiler::build_plan(kiln::internal::graph_ptr(model), *ctx.backend, ctx.device->target(), request);
}

// The plan cache's key for this model, device and settings. A max-autotune
// plan reflects the tuning database, so its key holds the database's path
// and a digest of its records, and a records-only plan has a key of its
// own; nullopt when the database cannot be read.
std::optional<artifact::PlanKey> plan_key(const Model& model, const Executor::Options& options,
                                          const backend::TargetDesc& target, bool records_only) {
  const Settings& settings = options.settings;
  std::string tuning;
  if (settings.flag("autotune")) {
    const std::string db_path = tune::database_path(settings, options.compile.cache_dir);
    const std::optional<std::string> digest = tune::database_digest(db_path);
    if (!digest) return std::nullopt;
    tuning = "tuning database " + db_path + " " + *digest + (records_only ? " records only" : "");
  }
  if (options.dynamic_probe) {
    tuning += "; dynamic " + options.dynamic_dims + "; pinned";
    for (const compiler::SiteKnobs& site : options.pinned_sites) tuning += " " + site.template_name + ":" + site.knobs;
    for (const compiler::GraphChoiceMade& made : options.pinned_choices)
      tuning += " " + made.pass + ":" + made.node + "=" + made.choice;
  }
  return artifact::PlanCache::key(kiln::internal::graph(model), model.name(), true, options.compile.fullgraph, settings,
                                  target, tuning);
}

bool every_site_recorded(const compiler::Plan& plan) {
  return plan.autotune && std::ranges::all_of(plan.autotune->decisions, [](const tune::SiteDecision& d) {
           return d.source != tune::ChoiceSource::heuristic;
         });
}

}  // namespace

// What a background tuning job hands its executor: the tuned plan, its
// kernels loaded, and how long the job took.
struct Executor::TunedPlan {
  std::mutex mutex;
  std::shared_ptr<const compiler::Plan> plan;
  std::vector<std::shared_ptr<backend::LoadedKernel>> kernels;
  double ms = 0;
};

std::shared_ptr<const compiler::Plan> Executor::cached_or_built_plan() {
  // A forced graph choice (the tuning worker's) is not the model's plan: it
  // is always built. A max-autotune plan that tunes now is kept only when
  // every site had a record (one missing now may be tuned by the next
  // compile); a records-only one always.
  const Settings& settings = options_.settings;
  const bool cacheable = options_.compiled && settings.flag("plan_cache") && !options_.graph_chooser;
  const bool autotune = settings.flag("autotune");
  const bool records_only = autotune && tune_policy(settings) != "now";
  const artifact::PlanCache cache(options_.compile.cache_dir);
  const backend::TargetDesc& target = ctx_->device->target();
  std::optional<artifact::PlanKey> key;
  if (cacheable && cache.enabled()) {
    key = plan_key(model_, options_, target, records_only);
    if (key) {
      if (std::shared_ptr<const compiler::Plan> cached = cache.load(*key)) {
        stats_.plan_from_cache = true;
        base::log(base::LogLevel::debug, model_.name() + ": plan read from " + cached->read_from);
        return cached;
      }
    }
  }
  std::shared_ptr<const compiler::Plan> built = make_plan(model_, options_, *ctx_, {.tune_missing = !records_only});
  stats_.graph_passes_run = static_cast<int>(built->pass_reports.size());
  // The records as they are now, those tuned by this compile included.
  if (key && autotune) key = every_site_recorded(*built) || records_only ? plan_key(model_, options_, target, records_only) : std::nullopt;
  if (key) cache.store(*key, *built);
  return built;
}

void Executor::start_background_tuning() {
  const compiler::Plan& plan = *plan_;
  if (!options_.compiled || options_.plan || options_.graph_chooser || !plan.autotune ||
      tune_policy(options_.settings) != "background" || every_site_recorded(plan))
    return;
  auto tuned = std::make_shared<TunedPlan>();
  auto work = [model = model_, options = options_, ctx = ctx_, tuned](const runtime::TuningJob& job) {
    const auto start = Clock::now();
    std::shared_ptr<const compiler::Plan> plan =
        make_plan(model, options, *ctx, {.tune_missing = true, .stop = [&job] { return job.cancelled(); }});
    if (job.cancelled()) return;
    const artifact::PlanCache cache(options.compile.cache_dir);
    if (options.settings.flag("plan_cache") && cache.enabled() && every_site_recorded(*plan))
      if (std::optional<artifact::PlanKey> key = plan_key(model, options, ctx->device->target(), false))
        cache.store(*key, *plan);
    const bool changed = std::ranges::any_of(plan->autotune->decisions, [](const tune::SiteDecision& d) {
      return d.source == tune::ChoiceSource::tuned_now;
    });
    if (!changed) return;  // nothing was tuned: the plan the model has is this one
    // Kernels compiled and pipelines made here, not in the call that switches.
    std::vector<const compiler::RenderedKernel*> kernels;
    for (const compiler::RenderedKernel& kernel : plan->rendered) kernels.push_back(&kernel);
    std::vector<std::shared_ptr<backend::LoadedKernel>> loaded = ctx->kernels->get_all(kernels);
    runtime::save_pipeline_cache(*ctx);
    std::lock_guard lock(tuned->mutex);
    tuned->plan = std::move(plan);
    tuned->kernels = std::move(loaded);
    tuned->ms = ms_since(start);
    base::log(base::LogLevel::info, "max-autotune: " + model.name() + " tuned in the background in " +
                                              std::to_string(static_cast<int>(tuned->ms)) +
                                              " ms; its next call runs the tuned plan");
  };
  std::lock_guard lock(published_mutex_);
  tuned_ = tuned;
  tuning_job_ = runtime::tune_in_background("tuning of '" + model_.name() + "'", std::move(work));
}

bool Executor::adopt_tuned_plan() {
  if (!tuned_) return false;
  std::shared_ptr<const compiler::Plan> plan;
  std::vector<std::shared_ptr<backend::LoadedKernel>> kernels;
  double ms = 0;
  {
    std::lock_guard lock(tuned_->mutex);
    if (!tuned_->plan) return false;
    plan = std::move(tuned_->plan);
    kernels = std::move(tuned_->kernels);
    ms = tuned_->ms;
  }
  {
    std::lock_guard lock(published_mutex_);
    tuned_.reset();
  }
  // What the last plan's binding made goes; the new plan binds as the first
  // did, with its kernels already loaded. Outputs already returned have
  // buffers of their own.
  drop_binding();
  {
    std::lock_guard lock(plan_mutex_);
    plan_ = std::move(plan);
  }
  loaded_ = std::move(kernels);
  bind();
  stats_.background_tuning_ms = ms;
  base::log(base::LogLevel::info, model_.name() + ": switched to the plan tuned in the background");
  return true;
}

void Executor::wait_for_tuning() {
  std::shared_ptr<runtime::TuningJob> job;
  {
    std::lock_guard lock(published_mutex_);
    job = tuning_job_;
  }
  if (!job) return;
  job->wait();
  std::lock_guard lock(mutex_);
  if (adopt_tuned_plan()) warm_up();  // the next call costs what later ones do
  publish_stats();
}

void Executor::plan_and_bind() {
  const auto start = Clock::now();

  if (options_.plan) {
    KILN_CHECK(options_.plan->backend == ctx_->backend->name(), ErrorKind::InvalidArgument,
               "model '" + model_.name() + "': its plan is for backend " + options_.plan->backend + ", not " +
                   ctx_->backend->name());
  }
  std::shared_ptr<const compiler::Plan> chosen = options_.plan ? options_.plan : cached_or_built_plan();
  options_.set_plans.clear();  // they keep other shape sets' plans alive
  {
    std::lock_guard lock(plan_mutex_);
    plan_ = std::move(chosen);
  }
  const compiler::Plan& plan = *plan_;
  stats_.plan_ms = ms_since(start);
  const bool planned_here = !options_.plan && !stats_.plan_from_cache && plan.read_from.empty();
  stats_.tuning_ms = planned_here && plan.autotune ? plan.autotune->tuning_s * 1000.0 : 0.0;
  loaded_.clear();
  const BindTimes times = bind_or_replan();
  stats_.kernels_ms = times.kernels_ms;
  stats_.upload_ms = times.upload_ms;
  stats_.kernel_cache_hits = times.counts.disk_hits;
  stats_.kernel_cache_misses = times.counts.compiled;
  stats_.kernels_from_file = times.counts.from_binaries;
  stats_.kernel_compile_ms = times.counts.compile_ms;
  stats_.pipeline_ms = times.counts.load_ms;
  stats_.compile_ms = ms_since(start);
  prepared_ = true;
  if (!options_.extends.empty()) {
    log_new_extents(times.counts.new_kernels);
  } else {
    base::log(base::LogLevel::info,
                 std::string(options_.compiled ? "compiled " : "prepared eager ") + model_.name() + ": " +
                     std::to_string(stats_.dispatches_per_run) + " dispatches, " + std::to_string(stats_.kernels) +
                     " kernels (" + std::to_string(stats_.kernel_cache_misses) + " compiled, " +
                     std::to_string(stats_.kernel_cache_hits) + " from the disk cache) in " +
                     std::to_string(static_cast<int>(stats_.compile_ms)) + " ms");
  }
  start_background_tuning();
}

void Executor::log_new_extents(const std::vector<std::size_t>& new_kernels) const {
  const compiler::Plan& plan = *plan_;
  // The new kernels by why they are new (SetKernelUse), and by name.
  constexpr std::size_t kUses = 3;
  std::array<std::map<std::string, int>, kUses> by_use;
  for (const std::size_t i : new_kernels) {
    const compiler::SetKernelUse use =
        i < plan.set_kernel_use.size() ? plan.set_kernel_use[i] : compiler::SetKernelUse::specialised;
    ++by_use[static_cast<std::size_t>(use)][plan.rendered[i].source.name];
  }
  static const std::array<const char*, kUses> why = {
      "the set's, not loaded in this process before",
      "the set's with more of their constants made parameters, since these extents give them other values",
      "with a structure no kernel of the set has (these extents decide a bound check, a tail or a vector width)",
  };
  std::string new_text;
  for (std::size_t use = 0; use < kUses; ++use) {
    if (by_use[use].empty()) continue;
    std::string list;
    int total = 0;
    for (const auto& [name, count] : by_use[use]) {
      list += (list.empty() ? "" : ", ") + name + (count > 1 ? " x" + std::to_string(count) : "");
      total += count;
    }
    new_text += "; " + std::to_string(total) + " (" + list + ") " + why[use];
  }
  const int reused = stats_.kernels - static_cast<int>(new_kernels.size());
  const std::string planned =
      stats_.plan_from_cache ? "plan from the plan cache"
      : plan.set_kernel_use.empty()
          ? "planned again (" + std::to_string(stats_.graph_passes_run) + " graph passes, " +
                std::to_string(static_cast<int>(stats_.plan_ms)) + " ms)"
          : "planned again with the set's kernels, no probe (" + std::to_string(stats_.graph_passes_run) +
                " graph passes, " + std::to_string(static_cast<int>(stats_.plan_ms)) + " ms)";
  base::log(base::LogLevel::info,
               "compiled " + model_.name() + " at new extents of " + options_.extends + ": " + planned + "; " +
                   std::to_string(reused) + " of " + std::to_string(stats_.kernels) + " kernels reused" +
                   (new_kernels.empty() ? ""
                                        : "; new (" + std::to_string(stats_.kernel_cache_misses) + " compiled, " +
                                              std::to_string(stats_.kernel_cache_hits) +
                                              " from the disk cache): " + new_text.substr(2)) +
                   "; in " + std::to_string(static_cast<int>(stats_.compile_ms)) + " ms");
}

Executor::BindTimes Executor::bind_or_replan() {
  if (!stats_.plan_from_cache) return bind();
  try {
    return bind();
  } catch (const Error& e) {
    // A cached plan whose kernels do not build or load (a source altered
    // with its checksum recomputed) is the cache's fault, not the model's:
    // the entry goes and the model is planned again, as a damaged entry is.
    if (e.kind() == ErrorKind::OutOfMemory || e.kind() == ErrorKind::DeviceUnavailable) throw;
    artifact::PlanCache(options_.compile.cache_dir).remove_entry(plan_->read_from, e.what());
  }
  stats_.plan_from_cache = false;
  std::shared_ptr<const compiler::Plan> built = cached_or_built_plan();  // built and stored again
  {
    std::lock_guard lock(plan_mutex_);
    plan_ = std::move(built);
  }
  loaded_.clear();
  return bind();
}

void Executor::drop_binding() {
  segments_.clear();
  subgraphs_.reset();
  host_values_.clear();
  storage_.clear();
  buffers_.clear();
}

Executor::BindTimes Executor::bind() {
  // All or nothing: a binding that fails part way (a device out of memory,
  // lost) leaves none of itself behind, so the next call binds afresh.
  try {
    return bind_once();
  } catch (...) {
    drop_binding();
    throw;
  }
}

Executor::BindTimes Executor::bind_once() {
  const compiler::Plan& plan = *plan_;
  BindTimes times;
  // The weights upload (allocation, copies, the device's queue) and kernel
  // loading (compilers, pipeline creation) share nothing, so they overlap:
  // a warm start pays the longer of the two, not their sum.
  find_inputs_written_in_place();  // before storage: their storage is made when first needed
  std::future<double> storage_ms = std::async(std::launch::async, [this] {
    const auto storage_start = Clock::now();
    assign_storage();
    return ms_since(storage_start);
  });
  if (loaded_.empty()) {
    const auto kernels_start = Clock::now();
    times.counts = load_kernels();
    times.kernels_ms = ms_since(kernels_start);
    base::log(base::LogLevel::debug, model_.name() + ": " + std::to_string(plan.dispatch_count()) +
                                               " dispatches (" + std::to_string(plan.rendered.size()) +
                                               " distinct kernels) compiled and loaded in " +
                                               std::to_string(static_cast<int>(times.kernels_ms)) + " ms");
  }
  for (const compiler::Step& step : plan.steps) {
    if (step.host) {
      Segment& host = segments_.emplace_back();
      host.host = true;
      host.host_node = step.host_node;
      continue;
    }
    if (segments_.empty() || segments_.back().host) segments_.emplace_back();
    segments_.back().dispatches.push_back(&*step.dispatch);
  }
  times.upload_ms = storage_ms.get();
  base::log(base::LogLevel::debug, model_.name() + ": storage and constant upload in " +
                                             std::to_string(static_cast<int>(times.upload_ms)) +
                                             " ms, beside kernel loading (weights: " +
                                             std::to_string(constant_bytes_ >> 10) + " KiB uploaded, " +
                                             std::to_string(shared_constant_bytes_ >> 10) +
                                             " KiB already on the device)");

  // Replay records now, or at the first call where an input written in
  // place has no storage before then (load_inputs records).
  replay_ = options_.compiled && plan.settings.flag("replay");
  if (replay_ && std::ranges::none_of(written_inputs_, [](const auto& w) { return w.has_value(); })) record_segments();

  stats_.kernels = static_cast<int>(plan.rendered.size());
  stats_.dispatches_per_run = plan.dispatch_count();
  stats_.host_steps_per_run = static_cast<int>(plan.breaks.size());
  stats_.peak_device_bytes = plan.storage.memory_plan.arena_bytes + constant_bytes_ + io_bytes_;
  return times;
}

runtime::KernelCache::LoadCounts Executor::load_kernels() {
  // Distinct kernels compile (shaderc) and load concurrently. Other models
  // may load on this device at the same time: count only this model's.
  std::vector<const compiler::RenderedKernel*> kernels;
  kernels.reserve(plan_->rendered.size());
  for (const compiler::RenderedKernel& kernel : plan_->rendered) kernels.push_back(&kernel);
  runtime::KernelCache::LoadCounts counts;
  loaded_ = ctx_->kernels->get_all(kernels, 0, &counts);
  runtime::save_pipeline_cache(*ctx_);
  return counts;
}

// Constants at least this large are shared between models (SharedWeights).
constexpr std::uint64_t kSharedWeightBytes = 1 << 20;

void Executor::assign_storage() {
  const compiler::Plan& plan = *plan_;
  const compiler::StoragePlan& sp = plan.storage;
  const graph::Graph& g = *plan.graph;
  backend::Device& device = *ctx_->device;
  const std::size_t n = g.values().size();
  storage_.assign(n, Storage{});

  const std::uint64_t max_buffer = plan.target.max_buffer_bytes ? plan.target.max_buffer_bytes : UINT64_MAX;
  // Packs values one after another into as few buffers as the device's
  // largest buffer allows; returns the bytes allocated.
  //
  // Constants are uploaded there in blocks, each shared with any model on
  // this device whose block holds the same bytes at the same offsets
  // (SharedWeights). A block ends after a constant whose digest is 0 modulo
  // kBlockEnd, so where blocks end depends on the constants' own bytes, not
  // on what came before: two plans whose weights differ in a few constants
  // (a model's shape sets, where an anchor grid follows the extents) share
  // every block those few are not in.
  constexpr std::uint64_t kBlockEnd = 8;
  auto place_packed = [&](const std::vector<graph::ValueId>& ids, bool constants) -> std::uint64_t {
    std::vector<XXH128_hash_t> digests;
    if (constants)
      for (graph::ValueId id : ids) {
        const std::span<const std::byte> bytes = g.value(id).constant->bytes();
        digests.push_back(XXH3_128bits(bytes.data(), bytes.size()));
      }
    std::uint64_t allocated = 0;
    std::size_t begin = 0;
    while (begin < ids.size()) {
      std::uint64_t total = 0;
      std::size_t end = begin;
      for (; end < ids.size(); ++end) {
        const std::uint64_t bytes = compiler::value_bytes(g.value(ids[end]));
        KILN_CHECK(bytes <= max_buffer, ErrorKind::OutOfMemory,
                   "'" + g.value(ids[end]).name + "' needs " + std::to_string(bytes) +
                       " bytes, more than the largest buffer of " + plan.target.device_name + " (" +
                       std::to_string(max_buffer) + " bytes)");
        const std::uint64_t offset = (total + sp.alignment - 1) / sp.alignment * sp.alignment;
        if (end > begin && offset + bytes > max_buffer) break;
        storage_[ids[end]].offset = offset;
        storage_[ids[end]].bytes = bytes;
        total = offset + bytes;
        if (constants && digests[end].low64 % kBlockEnd == 0) {
          ++end;
          break;
        }
      }
      if (constants) {
        // The block's contents: each constant's place and digest.
        std::vector<std::uint64_t> contents;
        for (std::size_t i = begin; i < end; ++i)
          contents.insert(contents.end(),
                          {storage_[ids[i]].offset, storage_[ids[i]].bytes, digests[i].high64, digests[i].low64});
        const std::string digest =
            "packed " + base::hex_digest(XXH3_128bits(contents.data(), contents.size() * sizeof contents[0]));
        bool made = false;
        buffers_.push_back(ctx_->weights.find_or_make(device, digest, total, [&](backend::Buffer& buffer) {
          for (std::size_t i = begin; i < end; ++i) {
            const Tensor& constant = *g.value(ids[i]).constant;
            if (constant.nbytes() > 0) device.upload(buffer, storage_[ids[i]].offset, constant.bytes());
          }
        }, made));
        if (made) {
          for (std::size_t i = begin; i < end; ++i) stats_.uploaded_bytes += g.value(ids[i]).constant->nbytes();
          allocated += total;
        } else {
          shared_constant_bytes_ += total;
        }
      } else {
        buffers_.push_back(device.allocate(total));
        allocated += total;
      }
      for (std::size_t i = begin; i < end; ++i) storage_[ids[i]].buffer = buffers_.back().get();
      begin = end;
    }
    return allocated;
  };
  // Large weights get buffers of their own, shared with any model on this
  // device that has the same bytes (SharedWeights); the rest are packed.
  std::vector<graph::ValueId> packed_constants;
  constant_bytes_ = 0;
  shared_constant_bytes_ = 0;
  for (graph::ValueId id : sp.constants) {
    const Tensor& constant = *g.value(id).constant;
    if (constant.nbytes() < kSharedWeightBytes || constant.nbytes() > max_buffer) {
      packed_constants.push_back(id);  // (one too large is refused there, naming it)
      continue;
    }
    bool uploaded = false;
    buffers_.push_back(ctx_->weights.find_or_upload(device, constant.bytes(), uploaded));
    storage_[id] = {buffers_.back().get(), 0, constant.nbytes()};
    (uploaded ? constant_bytes_ : shared_constant_bytes_) += constant.nbytes();
  }
  constant_bytes_ += place_packed(packed_constants, true);
  // An input a kernel writes in place has no packed storage: a DeviceTensor
  // given for it is bound where it lies, and one of its own is allocated
  // only when a call gives anything else (load_inputs).
  std::vector<graph::ValueId> packed_inputs;
  for (graph::ValueId id : sp.inputs) {
    const auto at = std::ranges::find(g.inputs(), id) - g.inputs().begin();
    if (written_inputs_.at(static_cast<std::size_t>(at)))
      storage_[id].bytes = compiler::value_bytes(g.value(id));
    else
      packed_inputs.push_back(id);
  }
  io_bytes_ = place_packed(packed_inputs, false);

  if (sp.arenas) {
    std::vector<backend::Buffer*> arenas;
    for (std::uint64_t size : sp.memory_plan.arena_sizes) {
      buffers_.push_back(device.allocate(size));
      arenas.push_back(buffers_.back().get());
    }
    for (std::size_t i = 0; i < sp.intermediates.size(); ++i) {
      Storage& s = storage_[sp.intermediates[i]];
      s.buffer = arenas[sp.memory_plan.arena[i]];
      s.offset = sp.memory_plan.offsets[i];
      s.bytes = sp.lifetimes[i].bytes;
    }
  } else {
    // Eager: a buffer per tensor, kept between calls as a caching allocator would.
    for (graph::ValueId id : sp.intermediates) {
      Storage& s = storage_[id];
      s.bytes = compiler::value_bytes(g.value(id));
      buffers_.push_back(device.allocate(s.bytes));
      s.buffer = buffers_.back().get();
    }
  }
  for (std::size_t v = 0; v < n; ++v) {
    if (plan.root[v] == static_cast<graph::ValueId>(v) || g.values()[v].type.dynamic) continue;
    storage_[v] = storage_[plan.root[v]];
    storage_[v].bytes = compiler::value_bytes(g.value(static_cast<graph::ValueId>(v)));
  }
}

void Executor::find_inputs_written_in_place() {
  const compiler::Plan& plan = *plan_;
  const graph::Graph& g = *plan.graph;
  written_inputs_.assign(g.inputs().size(), std::nullopt);
  recorded_bindings_.assign(g.inputs().size(), nullptr);
  std::map<graph::ValueId, std::size_t> input_index;
  for (std::size_t i = 0; i < g.inputs().size(); ++i) input_index.emplace(g.inputs()[i], i);
  // A kernel writing a value stored in an input (views have no kernel).
  for (const compiler::Step& step : plan.steps)
    if (step.dispatch)
      for (graph::NodeId node : step.dispatch->nodes)
        for (graph::ValueId v : g.node(node).outputs)
          if (auto it = input_index.find(plan.root[v]); it != input_index.end() && !written_inputs_[it->second])
            written_inputs_[it->second].emplace();
  // The values stored there (the input, its views, the outputs written into it).
  for (std::size_t v = 0; v < g.values().size(); ++v)
    if (auto it = input_index.find(plan.root[v]);
        it != input_index.end() && written_inputs_[it->second] && !g.values()[v].type.dynamic)
      written_inputs_[it->second]->values.emplace_back(static_cast<graph::ValueId>(v),
                                                       compiler::value_bytes(g.values()[v]));
  // Outputs that are such an input as it is (same type): the DeviceTensor given for it comes back.
  output_written_input_.assign(g.outputs().size(), -1);
  for (std::size_t o = 0; o < g.outputs().size(); ++o) {
    const graph::ValueId v = g.outputs()[o];
    const auto it = input_index.find(plan.root[v]);
    if (it != input_index.end() && written_inputs_[it->second] && g.value(v).type == g.value(it->first).type)
      output_written_input_[o] = static_cast<int>(it->second);
  }
}

void Executor::bind_written_input(std::size_t i, backend::Buffer* buffer) {
  for (const auto& [value, bytes] : written_inputs_[i]->values) storage_[static_cast<std::size_t>(value)] = {buffer, 0, bytes};
}

void Executor::record_segments() {
  for (Segment& segment : segments_) {
    if (segment.host) continue;
    segment.recorded = ctx_->device->create_command_list();
    record(segment, *segment.recorded);
    segment.recorded->finish();
  }
}

void Executor::record(const Segment& segment, backend::CommandList& list) const {
  std::vector<backend::BufferBinding> bindings;
  for (const compiler::Dispatch* d : segment.dispatches) record_dispatch(*d, list, bindings);
}

void Executor::record_dispatch(const compiler::Dispatch& d, backend::CommandList& list,
                               std::vector<backend::BufferBinding>& bindings) const {
  bindings.clear();
  for (graph::ValueId v : d.values) {
    const Storage& s = storage_[v];
    bindings.push_back({s.buffer, s.offset, s.bytes});
  }
  list.dispatch(*loaded_[d.kernel], d.grid, bindings, d.params);
}

void Executor::run_host_node(const Segment& segment) {
  const graph::Graph& g = *plan_->graph;
  const graph::Node& node = g.node(segment.host_node);
  std::vector<Tensor> inputs;
  for (graph::ValueId v : node.inputs) inputs.push_back(v >= 0 ? read_value(v) : Tensor());
  const graph::OpSchema& op = graph::get_op(node.op);
  if (op.run_with_subgraphs && !subgraphs_) subgraphs_ = std::make_unique<runtime::SubgraphModels>(model_.name(), options_);
  std::vector<Tensor> outputs =
      op.run_with_subgraphs ? op.run_with_subgraphs(node, inputs, subgraphs_->runner(node)) : op.reference(node, inputs);
  KILN_ASSERT(outputs.size() == node.outputs.size());
  for (std::size_t i = 0; i < outputs.size(); ++i) {
    const graph::ValueId v = node.outputs[i];
    // A static type inferred from data-dependent inputs (by probing) holds
    // at run time, or buffers planned for it would be wrong.
    const graph::TensorType& planned = g.value(v).type;
    KILN_CHECK(graph::type_accepts(planned, {outputs[i].dtype(), outputs[i].shape()}), ErrorKind::Internal,
               "internal error: host step '" + node.name + "' (" + node.op + ") made " +
                   graph::type_str({outputs[i].dtype(), outputs[i].shape()}) + " for '" + g.value(v).name +
                   "', planned as " + graph::type_str(planned));
    // Only what a kernel reads goes to the device; the rest stays on the host.
    if (!g.value(v).type.dynamic && plan_->read_by_kernel[v]) upload(v, outputs[i]);
    host_values_[v] = std::move(outputs[i]);
  }
}

Tensor Executor::read_value(graph::ValueId id) {
  const graph::Value& v = plan_->graph->value(id);
  const graph::ValueId root = plan_->root[id];
  if (v.constant) return *v.constant;
  if (const auto& host = host_values_[root]) return root == id ? *host : host->reshaped(v.type.shape);
  KILN_ASSERT(!v.type.dynamic);
  return download(id);
}

void Executor::check_inputs(const std::vector<CallInput>& inputs) const {
  const graph::Graph& g = kiln::internal::graph(model_);
  KILN_CHECK(inputs.size() == g.inputs().size(), ErrorKind::ShapeMismatch,
             "model '" + model_.name() + "' takes " + std::to_string(g.inputs().size()) + " input(s) but " +
                 std::to_string(inputs.size()) + " were given");
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const graph::Value& v = g.value(g.inputs()[i]);
    const auto* device_input = std::get_if<DeviceTensor>(&inputs[i]);
    const graph::TensorType got =
        device_input ? graph::TensorType{device_input->dtype(), device_input->shape()}
                     : graph::TensorType{std::get<Tensor>(inputs[i]).dtype(), std::get<Tensor>(inputs[i]).shape()};
    KILN_CHECK(got == v.type, ErrorKind::ShapeMismatch,
               "input '" + v.name + "' of model '" + model_.name() + "' expects " + graph::type_str(v.type) +
                   " but got " + graph::type_str(got));
    if (device_input == nullptr) continue;
    const DeviceTensorData& data = DeviceTensorData::of(*device_input);
    // Pooled devices differ by cache folder too: each is its own VkDevice, whose buffers no other can bind.
    auto where = [](const runtime::DeviceContext& d) {
      return d.label() + " (kernel cache " + (d.cache_dir.empty() ? std::string("default") : "'" + d.cache_dir + "'") +
             ")";
    };
    KILN_CHECK(data.device == nullptr || data.device == ctx_, ErrorKind::InvalidArgument,
               "input '" + v.name + "' of model '" + model_.name() + "' is a DeviceTensor on " + where(*data.device) +
                   ", but the model runs on " + where(*ctx_) +
                   ": pass it through the host (to_host()) or make it on the model's device");
  }
}

Tensor Executor::download(graph::ValueId id) {
  const graph::Value& v = plan_->graph->value(id);
  Tensor t(v.type.dtype, v.type.shape);
  const Storage& s = storage_[id];
  if (t.nbytes() > 0) ctx_->device->download(*s.buffer, s.offset, t.bytes());
  stats_.downloaded_bytes += t.nbytes();
  return t;
}

void Executor::upload(graph::ValueId id, const Tensor& tensor) {
  const Storage& s = storage_[id];
  KILN_ASSERT(s.buffer != nullptr);
  if (tensor.nbytes() > 0) ctx_->device->upload(*s.buffer, s.offset, tensor.bytes());
  stats_.uploaded_bytes += tensor.nbytes();
}

void Executor::load_inputs(const std::vector<CallInput>& inputs) {
  // The graph after passes keeps the model's inputs and outputs in order.
  const graph::Graph& g = *plan_->graph;
  host_values_.assign(g.values().size(), std::nullopt);
  std::unique_ptr<backend::CommandList> copies;
  std::vector<std::shared_ptr<backend::Buffer>> bindings(inputs.size());  // of the inputs written in place
  for (std::size_t i = 0; i < inputs.size(); ++i) {
    const graph::ValueId id = g.inputs()[i];
    const Tensor* host = std::get_if<Tensor>(&inputs[i]);
    const bool written = i < written_inputs_.size() && written_inputs_[i];
    if (written) {
      WrittenInput& input = *written_inputs_[i];
      input.bound.reset();
      const auto* device = std::get_if<DeviceTensor>(&inputs[i]);
      const DeviceTensorData* data = device ? &DeviceTensorData::of(*device) : nullptr;
      // Bound where it lies, unless another input of this call is (each needs storage of its own).
      if (data && data->device && data->buffer && num_elements(data->shape) > 0 &&
          std::ranges::find(bindings, data->buffer) == bindings.end()) {
        bindings[i] = data->buffer;
        bind_written_input(i, data->buffer.get());
        input.bound = *device;
        continue;
      }
      // Anything else is copied into the input's own storage, made once.
      if (!input.own) {
        input.own = ctx_->device->allocate(storage_[id].bytes);
        io_bytes_ += storage_[id].bytes;
        stats_.peak_device_bytes += storage_[id].bytes;
      }
      bindings[i] = input.own;
      bind_written_input(i, input.own.get());
    }
    if (host == nullptr) {
      const DeviceTensorData& data = DeviceTensorData::of(std::get<DeviceTensor>(inputs[i]));
      if (data.device == nullptr) {
        host = &*data.host;
      } else {
        if (!copies) copies = ctx_->device->create_command_list();
        const Storage& s = storage_[id];
        copies->copy(*data.buffer, 0, *s.buffer, s.offset, s.bytes);
        continue;
      }
    }
    upload(id, *host);
    // Host steps read inputs without a download (but one a kernel writes changes).
    if (!written) host_values_[id] = *host;
  }
  if (copies) {
    copies->finish();
    copies->submit();
  }
  // Replayed recordings bind the storage they were recorded with.
  if (replay_ && bindings != recorded_bindings_) {
    record_segments();
    recorded_bindings_ = std::move(bindings);
  }
}

std::optional<double> Executor::run_segments() {
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
  return device_ms;
}

Clock::time_point Executor::run_steps(const std::vector<CallInput>& inputs) {
  check_inputs(inputs);
  if (!prepared_) plan_and_bind();  // this call is its own warm-up
  adopt_tuned_plan();
  const auto start = Clock::now();
  stats_.uploaded_bytes = stats_.downloaded_bytes = 0;
  load_inputs(inputs);
  stats_.last_device_ms = run_segments();
  return start;
}

std::vector<Tensor> Executor::run(const std::vector<Tensor>& inputs) {
  const std::vector<CallInput> arguments(inputs.begin(), inputs.end());
  std::lock_guard lock(mutex_);
  const auto start = run_steps(arguments);
  std::vector<Tensor> outputs;
  const graph::Graph& g = *plan_->graph;
  for (graph::ValueId v : g.outputs()) {
    // Never hand out the caller's input or a constant's storage.
    const bool borrowed = g.value(plan_->root[v]).producer == graph::kNoNode;
    Tensor t = read_value(v);
    outputs.push_back(borrowed ? t.clone() : t);
  }
  host_values_.clear();
  stats_.last_run_ms = ms_since(start);
  publish_stats();
  return outputs;
}

std::vector<DeviceTensor> Executor::device_outputs() {
  const graph::Graph& g = *plan_->graph;
  std::vector<DeviceTensor> outputs;
  std::unique_ptr<backend::CommandList> copies;
  for (std::size_t o = 0; o < g.outputs().size(); ++o) {
    const graph::ValueId v = g.outputs()[o];
    const graph::Value& value = g.value(v);
    const graph::ValueId root = plan_->root[v];
    // What a host step made (dynamic values, or static ones it computed)
    // and constants stay on the host; a copy, since the host step's tensor
    // or the constant is shared.
    if (host_values_[root] || value.constant || storage_[v].buffer == nullptr) {
      outputs.push_back(make_host_device_tensor(read_value(v).clone()));
      continue;
    }
    // Written into a DeviceTensor the caller gave: that tensor is the output.
    if (const int i = output_written_input_[o]; i >= 0 && written_inputs_[i]->bound) {
      outputs.push_back(*written_inputs_[i]->bound);
      continue;
    }
    auto data = std::make_shared<DeviceTensorData>();
    data->dtype = value.type.dtype;
    data->shape = value.type.shape;
    data->device = ctx_;
    const Storage& s = storage_[v];
    data->buffer = ctx_->device->allocate(s.bytes);
    if (!copies) copies = ctx_->device->create_command_list();
    copies->copy(*s.buffer, s.offset, *data->buffer, 0, s.bytes);
    outputs.push_back(DeviceTensorData::wrap(std::move(data)));
  }
  if (copies) {
    copies->finish();
    copies->submit();
  }
  return outputs;
}

std::vector<DeviceTensor> Executor::run_on_device(const std::vector<CallInput>& inputs) {
  std::lock_guard lock(mutex_);
  const auto start = run_steps(inputs);
  std::vector<DeviceTensor> outputs = device_outputs();
  host_values_.clear();
  stats_.last_run_ms = ms_since(start);
  publish_stats();
  return outputs;
}

PendingCall Executor::submit(std::vector<CallInput> inputs) {
  // Errors in the arguments belong to the caller, now, not to wait().
  check_inputs(inputs);
  // The caller may reuse its tensors as soon as submit() returns.
  for (CallInput& input : inputs)
    if (Tensor* host = std::get_if<Tensor>(&input)) *host = host->clone();
  auto result = std::make_shared<std::promise<std::vector<DeviceTensor>>>();
  PendingCall call(result->get_future().share());
  calls_.push([this, result, inputs = std::move(inputs)] {
    try {
      result->set_value(run_on_device(inputs));
    } catch (...) {
      result->set_exception(std::current_exception());
    }
  });
  return call;
}

DeviceTensor Executor::to_device(const Tensor& tensor) const { return make_device_tensor(ctx_, tensor); }

std::string Executor::ops_per_backend() const {
  const compiler::Plan& plan = prepared_plan();
  const graph::Graph& g = *plan.graph;
  // op -> (nodes as kernels or views, nodes on the host, the host reasons)
  struct Count {
    int device = 0;
    int host = 0;
    std::set<std::string> reasons;
  };
  std::map<std::string, Count> counts;
  std::vector<bool> on_host(g.nodes().size(), false);
  for (const GraphBreak& b : plan.breaks) {
    on_host[b.node] = true;
    Count& c = counts[b.op];
    ++c.host;
    c.reasons.insert(b.kind);
  }
  for (const graph::Node& node : g.nodes())
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
  std::lock_guard lock(mutex_);
  std::ostringstream out;
  const backend::TargetDesc& target = ctx_->device->target();
  out << "model " << model_.name() << ": "
      << (options_.compiled ? "compiled, mode " + std::string(mode_name(options_.settings.mode())) : std::string("eager"))
      << ", on " << options_.backend << ":" << ctx_->index << " (" << target.device_name << "; kernels for the "
      << compiler::device_class_name(target) << " class)\n";
  if (model_.has_symbolic_dims()) {
    out << "symbolic input dims (the model runs at the shapes below; other shapes compile again):\n";
    for (const TensorSpec& input : model_.inputs()) {
      std::string dims;
      for (std::size_t d = 0; d < input.shape.size(); ++d) {
        const bool symbolic = d < input.symbolic_dims.size() && !input.symbolic_dims[d].empty();
        dims += (d ? ", " : "") + (symbolic ? input.symbolic_dims[d] + "=" : std::string()) + std::to_string(input.shape[d]);
      }
      out << "  " << input.name << " [" << dims << "]\n";
    }
  }
  if (options_.compiled) {
    out << "settings (value, then where it came from):\n";
    std::istringstream lines(options_.settings.describe());
    for (std::string line; std::getline(lines, line);) out << "  " << line << "\n";
    out << precision_line(options_.settings, target) << "\n";
  }
  if (model_.import_pending()) {
    try {
      internal::ModelAccess::check_imported(model_);
    } catch (const Error& e) {
      out << "import: waits for the first call's input shapes (" << e.what() << ")\n";
    }
    return out.str();
  }
  if (!prepared_) {
    out << "  (not compiled yet: call it once or prepare())\n";
    return out.str();
  }
  const compiler::Plan& plan = *plan_;
  if (!plan.read_from.empty())
    out << "plan: read from " << plan.read_from << " (planned for " << plan.target.device_name
        << "): no graph pass ran here; " << stats_.kernels_from_file << " kernels loaded from its binaries, "
        << stats_.kernel_cache_hits << " from the kernel cache, " << stats_.kernel_cache_misses << " compiled\n";
  if (plan.dynamic_kernels >= 0)
    out << "dynamic dims: " << options_.dynamic_dims << ": " << plan.dynamic_kernels << " of " << plan.dispatch_count()
        << " dispatches take extents that depend on them as parameters\n";
  if (plan.settings.flag("f16_arithmetic")) {
    // By the rendered kernels' requirements: a plan read from a file or the cache has no kir kernels.
    const auto in_f16 = std::ranges::count_if(plan.rendered, [](const compiler::RenderedKernel& k) { return k.requirements.fp16; });
    const std::optional<std::string> unavailable =
        ctx_ ? compiler::f16_arithmetic_unavailable(*ctx_->backend, plan.target) : std::nullopt;
    out << "f16 arithmetic: on: "
        << (unavailable ? "no effect: " + *unavailable
                        : std::to_string(in_f16) + " of " + std::to_string(plan.rendered.size()) +
                              " kernels compute what they store in f16 (sums and statistics in f32)" +
                              (in_f16 == 0 ? "; it applies to kernels storing f16 tensors (--dtype f16)" : ""))
        << "\n";
  }
  out << "graph breaks: " << plan.breaks.size() << "\n";
  for (const GraphBreak& b : plan.breaks) out << "  " << graph_break_line(b) << "\n";
  out << ops_per_backend();
  if (options_.compiled) {
    out << "graph passes:\n";
    for (const auto& report : plan.pass_reports) {
      out << "  " << report.pass << ": " << report.changes << " change(s)\n";
      for (const auto& line : report.details) out << "      " << line << "\n";
    }
  }
  out << "nodes: " << kiln::internal::graph(model_).nodes().size() << " in the model, " << plan.graph->nodes().size()
      << " after passes\n";
  if (plan.autotune) {
    const tune::AutotuneResult& tuned = *plan.autotune;
    out << "autotune: " << tuned.decisions.size() << " tuning sites, database "
        << (tuned.database_path.empty() ? std::string("in memory (cache off)") : tuned.database_path) << ", "
        << static_cast<int>(tuned.tuning_s) << " s tuning now (budget " << plan.settings.entry("tune_budget").value
        << "):\n";
    std::istringstream lines(tune::describe(tuned));
    for (std::string line; std::getline(lines, line);) out << "  " << line << "\n";
  }
  out << fusion_groups();
  if (subgraphs_) out << "subgraph models (control flow, made as the nodes first ran):\n" << subgraphs_->describe();
  out << "memory: activations " << mib(plan.storage.memory_plan.arena_bytes);
  if (plan.storage.arenas)
    out << " (planned; " << mib(plan.storage.memory_plan.unshared_bytes) << " without buffer reuse)";
  out << ", weights " << mib(constant_bytes_) << ", inputs " << mib(io_bytes_) << "\n";
  return out.str();
}

std::string Executor::fusion_groups() const {
  const compiler::Plan& plan = prepared_plan();
  const graph::Graph& g = *plan.graph;
  std::ostringstream out;
  int fused_values = 0;
  for (bool fused : plan.fused_away) fused_values += fused ? 1 : 0;
  out << "fusion: " << plan.kernel_nodes << " kernel nodes -> " << plan.dispatch_count() << " dispatches ("
      << fused_values << " intermediate values fused away), " << plan.rendered.size() << " distinct kernels, "
      << plan.breaks.size() << " host steps\n";
  std::size_t next_break = 0;
  int index = 0;
  for (const compiler::Step& step : plan.steps) {
    if (step.host) {
      const GraphBreak& b = plan.breaks[next_break++];
      const bool control = !g.node(b.node).subgraphs.empty();
      out << "  [host] " << b.node_name << " (" << b.op << "): graph break, "
          << (control ? "its subgraphs run as models of their own (" : "run on the reference implementation (")
          << b.reason << ")\n";
      continue;
    }
    const compiler::Dispatch& d = *step.dispatch;
    const graph::Node& last = g.node(d.nodes.back());
    out << "  #" << index++ << " kernel " << d.kernel_name << " grid [" << d.grid[0] << ", " << d.grid[1] << ", "
        << d.grid[2] << "] -> " << graph::type_str(g.value(last.outputs[0]).type);
    // Storage and compute types, where they differ: 16-bit buffers, f32 (or f16) arithmetic.
    std::set<std::string> storage;
    for (graph::ValueId v : d.values)
      if (v >= 0 && (g.value(v).type.dtype == DType::f16 || g.value(v).type.dtype == DType::bf16))
        storage.insert(std::string(dtype_name(g.value(v).type.dtype)));
    if (!storage.empty()) {
      out << " (";
      for (const std::string& type : storage) out << type << " ";
      const bool f16_arithmetic = d.kernel < plan.rendered.size() && plan.rendered[d.kernel].requirements.fp16;
      out << "buffers, " << (f16_arithmetic ? "f16" : "f32") << " arithmetic)";
    }
    out << "\n";
    for (graph::NodeId id : d.nodes) {
      const graph::Node& node = g.node(id);
      out << "      " << node.name << " (" << node.op << ")\n";
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
  for (const compiler::Step& step : prepared_plan().steps)
    if (step.dispatch) out.push_back({step.dispatch->nodes, step.dispatch->kernel_name, step.dispatch->values});
  return out;
}

}  // namespace kiln
