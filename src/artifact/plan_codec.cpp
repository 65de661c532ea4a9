#include "src/artifact/plan_codec.h"
#include "src/base/json_number.h"

#include "src/artifact/graph_codec.h"
#include "src/base/check.h"

#include <kiln/error.h>

namespace kiln::artifact {
namespace {

using nlohmann::json;

json encode_settings(const Settings& settings) {
  json values = json::object();
  for (const Settings::Entry& e : settings.entries())
    if (e.source == SettingSource::environment || e.source == SettingSource::options)
      values[std::string(e.def->name)] = e.value;
  return {{"mode", std::string(mode_name(settings.mode()))}, {"values", std::move(values)}};
}

// The table's defaults and the mode's patch are this kiln's (the file's kiln
// version is checked first); what the environment or the options set then is
// restored as options.
Settings decode_settings(const json& j) {
  SettingOverrides overrides;
  for (const auto& [name, value] : j.at("values").items()) overrides.emplace_back(name, value.get<std::string>());
  try {
    return Settings::resolve(parse_mode(j.at("mode").get<std::string>()), overrides,
                             [](const char*) -> const char* { return nullptr; });
  } catch (const Error& e) {
    throw_error(ErrorKind::Corrupt, std::string("its settings: ") + e.what());
  }
}

const char* texel_element_name(backend::TexelElement element) {
  switch (element) {
    case backend::TexelElement::f32: return "f32";
    case backend::TexelElement::f16: return "f16";
    case backend::TexelElement::bf16: return "bf16";
  }
  return "f32";
}

backend::TexelElement texel_element_named(const std::string& name) {
  for (backend::TexelElement e : {backend::TexelElement::f32, backend::TexelElement::f16, backend::TexelElement::bf16})
    if (name == texel_element_name(e)) return e;
  throw_error(ErrorKind::Corrupt, "a kernel's texel buffer has unknown elements '" + name + "'");
}

json encode_requirements(const backend::KernelRequirements& r) {
  return {{"kernel_name", r.kernel_name},       {"workgroup_size", r.workgroup_size},
          {"shared_memory_bytes", r.shared_memory_bytes}, {"num_buffers", r.num_buffers},
          {"fp16", r.fp16},                     {"param_bytes", r.param_bytes},
          {"subgroup_size", r.subgroup_size},   {"subgroup_broadcast", r.subgroup_broadcast},
          {"texel_width_1", r.texel_width_1},   {"texel_width_4", r.texel_width_4},
          {"int64", r.int64},                   {"storage8", r.storage8},
          {"storage16", r.storage16},           {"texel_16bit", r.texel_16bit}};
}

backend::KernelRequirements decode_requirements(const json& j) {
  backend::KernelRequirements r;
  r.kernel_name = j.at("kernel_name").get<std::string>();
  r.workgroup_size = base::json_number<std::uint32_t>(j.at("workgroup_size"));
  r.shared_memory_bytes = base::json_number<std::uint64_t>(j.at("shared_memory_bytes"));
  r.num_buffers = base::json_number<std::uint32_t>(j.at("num_buffers"));
  r.fp16 = base::json_number<bool>(j.at("fp16"));
  r.param_bytes = base::json_number<std::uint32_t>(j.at("param_bytes"));
  r.subgroup_size = base::json_number<std::uint32_t>(j.at("subgroup_size"));
  r.subgroup_broadcast = base::json_number<bool>(j.at("subgroup_broadcast"));
  r.texel_width_1 = base::json_number<bool>(j.at("texel_width_1"));
  r.texel_width_4 = base::json_number<bool>(j.at("texel_width_4"));
  // Absent in plans from before i64 and bool kernels, none of which needed them.
  r.int64 = j.value("int64", false);
  r.storage8 = j.value("storage8", false);
  r.texel_16bit = j.value("texel_16bit", false);  // absent before 16-bit texel buffers
  r.storage16 = j.value("storage16", false);  // absent before 16-bit kernels
  return r;
}

json encode_dispatch(const compiler::Dispatch& d) {
  return {{"nodes", d.nodes},   {"kernel", d.kernel}, {"kernel_name", d.kernel_name},
          {"grid", d.grid},     {"values", d.values}, {"params", d.params}};
}

compiler::Dispatch decode_dispatch(const json& j) {
  compiler::Dispatch d;
  d.nodes = base::json_numbers<graph::NodeId>(j.at("nodes"));
  d.kernel = base::json_number<std::size_t>(j.at("kernel"));
  d.kernel_name = j.at("kernel_name").get<std::string>();
  d.grid = base::json_number_array<std::uint32_t, 3>(j.at("grid"));
  d.values = base::json_numbers<graph::ValueId>(j.at("values"));
  d.params = base::json_numbers<std::int32_t>(j.at("params"));
  return d;
}

json encode_storage(const compiler::StoragePlan& s) {
  json lifetimes = json::array();
  for (const compiler::Lifetime& l : s.lifetimes) lifetimes.push_back({l.bytes, l.first, l.last});
  const compiler::MemoryPlan& m = s.memory_plan;
  return {{"alignment", s.alignment},
          {"constants", s.constants},
          {"inputs", s.inputs},
          {"intermediates", s.intermediates},
          {"arenas", s.arenas},
          {"lifetimes", std::move(lifetimes)},
          {"memory_plan",
           {{"arena", m.arena},
            {"offsets", m.offsets},
            {"arena_sizes", m.arena_sizes},
            {"arena_bytes", m.arena_bytes},
            {"unshared_bytes", m.unshared_bytes}}}};
}

compiler::StoragePlan decode_storage(const json& j) {
  compiler::StoragePlan s;
  s.alignment = base::json_number<std::uint64_t>(j.at("alignment"));
  s.constants = base::json_numbers<graph::ValueId>(j.at("constants"));
  s.inputs = base::json_numbers<graph::ValueId>(j.at("inputs"));
  s.intermediates = base::json_numbers<graph::ValueId>(j.at("intermediates"));
  s.arenas = base::json_number<bool>(j.at("arenas"));
  for (const json& l : j.at("lifetimes"))
    s.lifetimes.push_back({base::json_number<std::uint64_t>(l.at(0)), base::json_number<int>(l.at(1)), base::json_number<int>(l.at(2))});
  const json& m = j.at("memory_plan");
  s.memory_plan.arena = base::json_numbers<int>(m.at("arena"));
  s.memory_plan.offsets = base::json_numbers<std::uint64_t>(m.at("offsets"));
  s.memory_plan.arena_sizes = base::json_numbers<std::uint64_t>(m.at("arena_sizes"));
  s.memory_plan.arena_bytes = base::json_number<std::uint64_t>(m.at("arena_bytes"));
  s.memory_plan.unshared_bytes = base::json_number<std::uint64_t>(m.at("unshared_bytes"));
  return s;
}

// Every index of `plan` in range, and every dispatch matching its kernel's
// interface; throws Corrupt with what is wrong.
void check_plan(const compiler::Plan& plan) {
  const graph::Graph& g = *plan.graph;
  const auto values = static_cast<graph::ValueId>(g.values().size());
  const auto nodes = static_cast<graph::NodeId>(g.nodes().size());
  auto fail = [](const std::string& what) { throw_error(ErrorKind::Corrupt, "its plan: " + what); };
  auto value_ok = [&](graph::ValueId v) { return v >= 0 && v < values; };
  if (plan.root.size() != g.values().size() || plan.fused_away.size() != g.values().size() ||
      plan.read_by_kernel.size() != g.values().size())
    fail("the per-value tables do not match the graph's " + std::to_string(values) + " values");
  for (graph::ValueId r : plan.root)
    if (!value_ok(r)) fail("a view of value " + std::to_string(r) + ", which does not exist");
  for (const compiler::Step& step : plan.steps) {
    if (step.host) {
      if (step.host_node < 0 || step.host_node >= nodes || step.dispatch) fail("a malformed host step");
      continue;
    }
    if (!step.dispatch) fail("a device step without a dispatch");
    const compiler::Dispatch& d = *step.dispatch;
    if (d.kernel >= plan.rendered.size()) fail("dispatch '" + d.kernel_name + "' of a kernel that does not exist");
    const backend::KernelSource& source = plan.rendered[d.kernel].source;
    if (d.values.size() != source.num_buffers || d.params.size() != source.num_params)
      fail("dispatch '" + d.kernel_name + "' does not match kernel '" + source.name + "'");
    if (d.nodes.empty()) fail("dispatch '" + d.kernel_name + "' runs no node");
    for (graph::NodeId n : d.nodes)
      if (n < 0 || n >= nodes) fail("dispatch '" + d.kernel_name + "' runs a node that does not exist");
    for (graph::ValueId v : d.values)
      if (!value_ok(v) || plan.fused_away[v] || g.value(v).type.dynamic)
        fail("dispatch '" + d.kernel_name + "' binds a value without device storage");
  }
  for (const compiler::GraphBreak& b : plan.breaks)
    if (b.node < 0 || b.node >= nodes) fail("a graph break at a node that does not exist");
  const compiler::StoragePlan& s = plan.storage;
  if (s.alignment == 0 || (s.alignment & (s.alignment - 1)) != 0) fail("a storage alignment that is not a power of two");
  for (const auto* ids : {&s.constants, &s.inputs, &s.intermediates})
    for (graph::ValueId v : *ids)
      if (!value_ok(v) || plan.root[v] != v) fail("storage for a value that does not exist or is a view");
  for (graph::ValueId v : s.constants)
    if (!g.value(v).constant) fail("constant storage for '" + g.value(v).name + "', which is not a constant");
  if (s.arenas) {
    const compiler::MemoryPlan& m = s.memory_plan;
    if (s.lifetimes.size() != s.intermediates.size() || m.arena.size() != s.lifetimes.size() ||
        m.offsets.size() != s.lifetimes.size())
      fail("the memory plan does not match the intermediates");
    for (std::size_t i = 0; i < s.lifetimes.size(); ++i) {
      const int arena = m.arena[i];
      if (arena < 0 || static_cast<std::size_t>(arena) >= m.arena_sizes.size()) fail("a tensor in no arena");
      if (s.lifetimes[i].bytes < compiler::value_bytes(g.value(s.intermediates[i])) ||
          m.offsets[i] > m.arena_sizes[static_cast<std::size_t>(arena)] ||
          s.lifetimes[i].bytes > m.arena_sizes[static_cast<std::size_t>(arena)] - m.offsets[i])
        fail("a tensor past the end of its arena");
    }
    try {
      compiler::check_memory_plan(s.lifetimes, m, s.alignment);
    } catch (const Error& e) {
      fail(e.what());
    }
  }
}

}  // namespace

json encode_source(const backend::KernelSource& s) {
  json elements = json::array();
  for (backend::TexelElement e : s.texel_elements) elements.push_back(texel_element_name(e));
  return {{"name", s.name},
          {"language", s.language},
          {"text", s.text},
          {"workgroup_size", s.workgroup_size},
          {"num_buffers", s.num_buffers},
          {"num_params", s.num_params},
          {"texel_widths", s.texel_widths},
          {"texel_elements", elements},
          {"dynamic_shared_bytes", s.dynamic_shared_bytes}};
}

backend::KernelSource decode_source(const json& j) {
  backend::KernelSource s;
  s.name = j.at("name").get<std::string>();
  s.language = j.at("language").get<std::string>();
  s.text = j.at("text").get<std::string>();
  s.workgroup_size = base::json_number<std::uint32_t>(j.at("workgroup_size"));
  s.num_buffers = base::json_number<std::uint32_t>(j.at("num_buffers"));
  s.num_params = base::json_number<std::uint32_t>(j.at("num_params"));
  s.texel_widths = base::json_numbers<std::uint32_t>(j.at("texel_widths"));
  // Absent in plans from before 16-bit texel buffers, whose texels were all f32.
  for (const std::string& name : j.value("texel_elements", std::vector<std::string>{}))
    s.texel_elements.push_back(texel_element_named(name));
  // Absent in plans from before dynamic shared memory, which had none.
  if (j.contains("dynamic_shared_bytes"))
    s.dynamic_shared_bytes = base::json_number<std::uint32_t>(j.at("dynamic_shared_bytes"));
  return s;
}


namespace {

json encode_matrix_shapes(const std::vector<backend::MatrixShape>& shapes) {
  json out = json::array();
  for (const backend::MatrixShape& s : shapes)
    out.push_back({{"inputs", s.inputs}, {"m", s.m}, {"n", s.n}, {"k", s.k}, {"lanes", s.lanes}});
  return out;
}

// Absent before matrix instructions; every field checked (a forged file
// must not name a shape no renderer has).
std::vector<backend::MatrixShape> decode_matrix_shapes(const json& j) {
  std::vector<backend::MatrixShape> shapes;
  if (!j.contains("matrix_shapes")) return shapes;
  const json& list = j.at("matrix_shapes");
  if (!list.is_array() || list.size() > 64) throw_error(ErrorKind::Corrupt, "its target: matrix_shapes is not a short list");
  for (const json& entry : list) {
    backend::MatrixShape s;
    entry.at("inputs").get_to(s.inputs);
    base::json_number_into(entry.at("m"), s.m);
    base::json_number_into(entry.at("n"), s.n);
    base::json_number_into(entry.at("k"), s.k);
    base::json_number_into(entry.at("lanes"), s.lanes);
    const bool known = s.inputs == "tf32" || s.inputs == "f16" || s.inputs == "bf16";
    auto dim = [](std::uint32_t v) { return v >= 1 && v <= 64; };
    if (!known || !dim(s.m) || !dim(s.n) || !dim(s.k) || s.lanes < 1 || s.lanes > 128)
      throw_error(ErrorKind::Corrupt, "its target: a matrix shape that no target has");
    shapes.push_back(std::move(s));
  }
  return shapes;
}

}  // namespace

json encode_target(const backend::TargetDesc& t) {
  return {{"backend", t.backend},
          {"device_name", t.device_name},
          {"device_type", t.device_type},
          {"offline", t.offline},
          {"tf32", t.tf32},
          {"cpu_cores", t.cpu_cores},
          {"host_code", t.host_code},
          {"discrete_gpu", t.discrete_gpu},
          {"driver", t.driver},
          {"api_version", t.api_version},
          {"arch", t.arch},
          {"subgroup_size", t.subgroup_size},
          {"max_workgroup_size", t.max_workgroup_size},
          {"max_workgroup_invocations", t.max_workgroup_invocations},
          {"max_workgroup_count", t.max_workgroup_count},
          {"max_shared_memory_bytes", t.max_shared_memory_bytes},
          {"max_buffer_bytes", t.max_buffer_bytes},
          {"device_memory_bytes", t.device_memory_bytes},
          {"min_buffer_offset_alignment", t.min_buffer_offset_alignment},
          {"max_kernel_buffers", t.max_kernel_buffers},
          {"max_kernel_param_bytes", t.max_kernel_param_bytes},
          {"fp16", t.fp16},
          {"int64", t.int64},
          {"storage8", t.storage8},
          {"storage16", t.storage16},
          {"f16_conversion", std::string(backend::f16_conversion_name(t.f16_conversion))},
          {"timestamps", t.timestamps},
          {"subgroup_basic", t.subgroup_basic},
          {"subgroup_broadcast", t.subgroup_broadcast},
          {"subgroup_partitions", t.subgroup_partitions},
          {"texel_r32f", t.texel_r32f},
          {"texel_rgba32f", t.texel_rgba32f},
          {"max_texel_buffer_elements", t.max_texel_buffer_elements},
          {"texel_16bit", t.texel_16bit},
          {"matrix_shapes", encode_matrix_shapes(t.matrix_shapes)},
          {"limits_profile", t.limits_profile}};
}

backend::TargetDesc decode_target(const json& j) {
  backend::TargetDesc t;
  j.at("backend").get_to(t.backend);
  j.at("device_name").get_to(t.device_name);
  j.at("device_type").get_to(t.device_type);
  base::json_number_into(j.at("offline"), t.offline);
  t.tf32 = j.value("tf32", false);
  base::json_number_into(j.at("cpu_cores"), t.cpu_cores);
  // Absent in plans from before device classes: integrated, the class that fits every GPU.
  if (j.contains("host_code")) base::json_number_into(j.at("host_code"), t.host_code);
  if (j.contains("discrete_gpu")) base::json_number_into(j.at("discrete_gpu"), t.discrete_gpu);
  j.at("driver").get_to(t.driver);
  j.at("api_version").get_to(t.api_version);
  j.at("arch").get_to(t.arch);
  base::json_number_into(j.at("subgroup_size"), t.subgroup_size);
  t.max_workgroup_size = base::json_number_array<std::uint32_t, 3>(j.at("max_workgroup_size"));
  base::json_number_into(j.at("max_workgroup_invocations"), t.max_workgroup_invocations);
  t.max_workgroup_count = base::json_number_array<std::uint32_t, 3>(j.at("max_workgroup_count"));
  base::json_number_into(j.at("max_shared_memory_bytes"), t.max_shared_memory_bytes);
  base::json_number_into(j.at("max_buffer_bytes"), t.max_buffer_bytes);
  base::json_number_into(j.at("device_memory_bytes"), t.device_memory_bytes);
  base::json_number_into(j.at("min_buffer_offset_alignment"), t.min_buffer_offset_alignment);
  base::json_number_into(j.at("max_kernel_buffers"), t.max_kernel_buffers);
  base::json_number_into(j.at("max_kernel_param_bytes"), t.max_kernel_param_bytes);
  base::json_number_into(j.at("fp16"), t.fp16);
  base::json_number_into(j.at("int64"), t.int64);
  t.storage8 = j.value("storage8", false);  // absent before bool kernels
  t.storage16 = j.value("storage16", false);  // absent before 16-bit kernels
  try {
    // Absent before native f16 conversions.
    t.f16_conversion = backend::parse_f16_conversion(j.value("f16_conversion", std::string("integer")));
  } catch (const Error& e) {
    throw_error(ErrorKind::Corrupt, std::string("its target: ") + e.what());
  }
  base::json_number_into(j.at("timestamps"), t.timestamps);
  base::json_number_into(j.at("subgroup_basic"), t.subgroup_basic);
  base::json_number_into(j.at("subgroup_broadcast"), t.subgroup_broadcast);
  base::json_number_into(j.at("subgroup_partitions"), t.subgroup_partitions);
  base::json_number_into(j.at("texel_r32f"), t.texel_r32f);
  base::json_number_into(j.at("texel_rgba32f"), t.texel_rgba32f);
  base::json_number_into(j.at("max_texel_buffer_elements"), t.max_texel_buffer_elements);
  t.texel_16bit = j.value("texel_16bit", false);  // absent before 16-bit texel buffers
  t.matrix_shapes = decode_matrix_shapes(j);
  t.limits_profile = j.value("limits_profile", std::string());  // absent in files written before profiles
  return t;
}

// What explain prints of a plan's autotuning: each site's decision (its
// Site keeps only the template and problem) and the database's path.
json encode_autotune(const tune::AutotuneResult& tuned) {
  json decisions = json::array();
  for (const tune::SiteDecision& d : tuned.decisions)
    decisions.push_back({{"template", d.site.id.template_name},
                         {"template_version", d.site.id.template_version},
                         {"problem", d.site.id.problem},
                         {"node", d.node_name},
                         {"lookup", static_cast<int>(d.lookup)},
                         {"reason", d.reason},
                         {"source", static_cast<int>(d.source)},
                         {"knobs", d.knobs},
                         {"speedup", d.speedup}});
  return {{"database", tuned.database_path}, {"decisions", std::move(decisions)}};
}

// A decision read back was tuned in an earlier process at most: "tuned now"
// becomes "database", and no time was spent tuning.
tune::AutotuneResult decode_autotune(const json& j) {
  tune::AutotuneResult tuned;
  j.at("database").get_to(tuned.database_path);
  for (const json& d : j.at("decisions")) {
    tune::SiteDecision& decision = tuned.decisions.emplace_back();
    d.at("template").get_to(decision.site.id.template_name);
    base::json_number_into(d.at("template_version"), decision.site.id.template_version);
    d.at("problem").get_to(decision.site.id.problem);
    d.at("node").get_to(decision.node_name);
    const int lookup = base::json_number<int>(d.at("lookup"));
    const int source = base::json_number<int>(d.at("source"));
    KILN_CHECK(lookup >= 0 && lookup <= static_cast<int>(tune::Applicability::stale_template) && source >= 0 &&
                   source <= static_cast<int>(tune::ChoiceSource::tuned_now),
               ErrorKind::Corrupt, "an autotune decision with lookup " + std::to_string(lookup) + " and source " +
                                       std::to_string(source));
    decision.lookup = static_cast<tune::Applicability>(lookup);
    decision.source = static_cast<tune::ChoiceSource>(source);
    if (decision.source == tune::ChoiceSource::tuned_now) decision.source = tune::ChoiceSource::database;
    d.at("reason").get_to(decision.reason);
    d.at("knobs").get_to(decision.knobs);
    base::json_number_into(d.at("speedup"), decision.speedup);
    decision.site.id.knobs = decision.knobs;
  }
  return tuned;
}

json encode_plan(const compiler::Plan& plan, BlobWriter& blobs) {
  json reports = json::array();
  for (const graph::passes::PassReport& r : plan.pass_reports)
    reports.push_back({{"pass", r.pass}, {"changes", r.changes}, {"details", r.details}});
  json steps = json::array();
  for (const compiler::Step& step : plan.steps)
    steps.push_back(step.host ? json{{"host_node", step.host_node}} : json{{"dispatch", encode_dispatch(*step.dispatch)}});
  json kernels = json::array();
  for (const compiler::RenderedKernel& k : plan.rendered) {
    json binaries = json::array();
    for (const backend::KernelBinary& b : k.binaries) binaries.push_back({{"format", b.format}, {"blob", blobs.add(b.data)}});
    kernels.push_back({{"source", encode_source(k.source)},
                       {"requirements", encode_requirements(k.requirements)},
                       {"binaries", std::move(binaries)}});
  }
  json breaks = json::array();
  for (const compiler::GraphBreak& b : plan.breaks)
    breaks.push_back({{"node", b.node}, {"op", b.op}, {"node_name", b.node_name}, {"reason", b.reason}, {"kind", b.kind}});
  std::vector<int> fused_away(plan.fused_away.begin(), plan.fused_away.end());
  std::vector<int> read_by_kernel(plan.read_by_kernel.begin(), plan.read_by_kernel.end());
  json encoded = {{"model_name", plan.model_name},
          {"compiled", plan.compiled},
          {"settings", encode_settings(plan.settings)},
          {"backend", plan.backend},
          {"target", encode_target(plan.target)},
          {"graph", encode_graph(*plan.graph, blobs)},
          {"pass_reports", std::move(reports)},
          {"steps", std::move(steps)},
          {"kernels", std::move(kernels)},
          {"root", plan.root},
          {"fused_away", fused_away},
          {"read_by_kernel", read_by_kernel},
          {"kernel_nodes", plan.kernel_nodes},
          {"breaks", std::move(breaks)},
          {"storage", encode_storage(plan.storage)}};
  if (plan.autotune) encoded["autotune"] = encode_autotune(*plan.autotune);
  json sites = json::array();
  for (const compiler::SiteKnobs& site : plan.site_knobs) sites.push_back({site.template_name, site.knobs, site.nodes});
  encoded["site_knobs"] = std::move(sites);
  json choices = json::array();
  for (const compiler::GraphChoiceMade& made : plan.graph_choices) choices.push_back({made.pass, made.node, made.choice});
  encoded["graph_choices"] = std::move(choices);
  encoded["dynamic_kernels"] = plan.dynamic_kernels;
  return encoded;
}

std::shared_ptr<const compiler::Plan> decode_plan(const json& j, const Container& file) {
  return decoding(file, [&] {
    auto plan = std::make_shared<compiler::Plan>();
    plan->read_from = file.path();
    try {
      j.at("model_name").get_to(plan->model_name);
      base::json_number_into(j.at("compiled"), plan->compiled);
      plan->settings = decode_settings(j.at("settings"));
      j.at("backend").get_to(plan->backend);
      plan->target = decode_target(j.at("target"));
      plan->graph = decode_graph(j.at("graph"), file);
      for (const json& r : j.at("pass_reports"))
        plan->pass_reports.push_back({r.at("pass").get<std::string>(), base::json_number<int>(r.at("changes")),
                                      r.at("details").get<std::vector<std::string>>()});
      for (const json& s : j.at("steps")) {
        if (s.contains("host_node"))
          plan->steps.push_back({.host = true, .host_node = base::json_number<graph::NodeId>(s.at("host_node")), .dispatch = {}});
        else
          plan->steps.push_back({.host = false, .host_node = graph::kNoNode, .dispatch = decode_dispatch(s.at("dispatch"))});
      }
      for (const json& k : j.at("kernels")) {
        compiler::RenderedKernel& kernel = plan->rendered.emplace_back();
        kernel.source = decode_source(k.at("source"));
        kernel.requirements = decode_requirements(k.at("requirements"));
        for (const json& b : k.at("binaries")) {
          const std::span<const std::byte> data = file.blob(base::json_number<std::uint64_t>(b.at("blob")), "a kernel binary");
          kernel.binaries.push_back({b.at("format").get<std::string>(), {data.begin(), data.end()}, ""});
        }
      }
      plan->root = base::json_numbers<graph::ValueId>(j.at("root"));
      for (int f : base::json_numbers<int>(j.at("fused_away"))) plan->fused_away.push_back(f != 0);
      for (int r : base::json_numbers<int>(j.at("read_by_kernel"))) plan->read_by_kernel.push_back(r != 0);
      plan->kernel_nodes = base::json_number<int>(j.at("kernel_nodes"));
      for (const json& b : j.at("breaks"))
        plan->breaks.push_back({base::json_number<graph::NodeId>(b.at("node")), b.at("op").get<std::string>(),
                                b.at("node_name").get<std::string>(), b.at("reason").get<std::string>(),
                                b.at("kind").get<std::string>()});
      plan->storage = decode_storage(j.at("storage"));
      if (j.contains("autotune")) plan->autotune = decode_autotune(j.at("autotune"));
      // Absent in plans from before dynamic dims.
      if (j.contains("site_knobs"))
        for (const json& site : j.at("site_knobs"))  // the nodes absent in plans from before they were kept
          plan->site_knobs.push_back({site.at(0).get<std::string>(), site.at(1).get<std::string>(),
                                      site.size() > 2 ? site.at(2).get<std::vector<std::string>>()
                                                      : std::vector<std::string>{}});
      if (j.contains("graph_choices"))
        for (const json& made : j.at("graph_choices"))
          plan->graph_choices.push_back(
              {made.at(0).get<std::string>(), made.at(1).get<std::string>(), made.at(2).get<std::string>()});
      plan->dynamic_kernels = j.value("dynamic_kernels", -1);
      check_plan(*plan);
    } catch (const Error& e) {
      if (e.kind() != ErrorKind::Corrupt || std::string_view(e.what()).starts_with("'")) throw;
      throw_error(ErrorKind::Corrupt, "'" + file.path() + "': " + e.what());
    }
    return std::shared_ptr<const compiler::Plan>(std::move(plan));
  });
}

}  // namespace kiln::artifact
