#include "src/tune/site.h"
#include "src/base/json_number.h"

#include "src/base/check.h"
#include "src/fuse/schedule.h"
#include "src/lower/lower.h"
#include "src/lower/workgroup_site.h"

#include <kiln/error.h>

#include <nlohmann/json.hpp>

#include <set>

namespace kiln::tune {

using nlohmann::json;

namespace {

// The types lower_node takes: one per slot (an omitted slot's is ignored).
std::vector<graph::TensorType> slot_types(const Site& site) {
  std::vector<graph::TensorType> types;
  for (const std::optional<graph::TensorType>& type : site.inputs) types.push_back(type.value_or(graph::TensorType{}));
  return types;
}

json type_json(const graph::TensorType& type) {
  return {{"dtype", std::string(dtype_name(type.dtype))}, {"shape", Shape(type.shape)}};
}

graph::TensorType type_from_json(const json& value) {
  graph::TensorType type;
  type.dtype = DType::f32;
  const std::string dtype = value.at("dtype").get<std::string>();
  bool known = false;
  for (DType candidate : {DType::f32, DType::f16, DType::bf16, DType::i32, DType::i64, DType::u8, DType::boolean})
    if (dtype_name(candidate) == dtype) {
      type.dtype = candidate;
      known = true;
    }
  KILN_CHECK(known, ErrorKind::Corrupt, "tuning site: unknown dtype '" + dtype + "'");
  type.shape = Shape(base::json_numbers<std::int64_t>(value.at("shape")));
  return type;
}

json attribute_json(const graph::Attribute& attribute) {
  return std::visit(
      [](const auto& value) -> json {
        using T = std::decay_t<decltype(value)>;
        if constexpr (std::is_same_v<T, std::int64_t>) return {{"int", value}};
        else if constexpr (std::is_same_v<T, double>) return {{"float", value}};
        else if constexpr (std::is_same_v<T, std::string>) return {{"string", value}};
        else if constexpr (std::is_same_v<T, std::vector<std::int64_t>>) return {{"ints", value}};
        else return {{"floats", value}};
      },
      attribute);
}

graph::Attribute attribute_from_json(const std::string& name, const json& value) {
  if (value.contains("int")) return base::json_number<std::int64_t>(value.at("int"));
  if (value.contains("float")) return base::json_number<double>(value.at("float"));
  if (value.contains("string")) return value.at("string").get<std::string>();
  if (value.contains("ints")) return base::json_numbers<std::int64_t>(value.at("ints"));
  if (value.contains("floats")) return base::json_numbers<double>(value.at("floats"));
  throw_error(ErrorKind::Corrupt, "tuning site: attribute '" + name + "' has no known type");
}

// The problems of the tuning sites that compiled mode's fused kernels keep:
// a pointwise op fused into another kernel's epilogue or prologue runs at
// that kernel's workgroup size, so its own site would tune nothing.
std::set<std::string> anchored_problems(const graph::Graph& graph, const lower::LowerTarget& target) {
  fuse::PlanOptions options;
  options.fuse = true;
  options.target = target;
  options.target.knob_overrides.reset();
  options.target.knob_pins.reset();
  options.target.node_pins.reset();
  std::set<std::string> problems;
  for (const fuse::PlanStep& step : fuse::plan_kernels(graph, options).steps)
    if (step.kernel && step.kernel->kernel.tuning_site) problems.insert(step.kernel->kernel.tuning_site->problem);
  return problems;
}

}  // namespace

kir::Kernel Site::lower(const lower::LowerTarget& target, const std::optional<std::string>& knobs) const {
  lower::LowerTarget with = target;
  with.knob_overrides.reset();
  with.knob_pins.reset();
  with.node_pins.reset();
  if (knobs) with.knob_overrides = std::make_shared<lower::KnobOverrides>(lower::KnobOverrides{{id.problem, *knobs}});
  const std::vector<graph::TensorType> inputs_by_slot = slot_types(*this);
  lower::LoweredNode lowered = lower::lower_node(node, inputs_by_slot, outputs, with);
  KILN_CHECK(lowered.kernel.has_value(), ErrorKind::Internal,
             "tuning site '" + node.name + "' (" + node.op + ") lowered to a view, not a kernel");
  return std::move(*lowered.kernel);
}

std::optional<Site> node_alone(const graph::Graph& graph, const graph::Node& node) {
  Site site;
  site.node.op = node.op;
  site.node.name = node.name;
  site.node.attrs = node.attrs;
  graph::ValueId next = 0;
  for (graph::ValueId id : node.inputs) {
    site.node.inputs.push_back(id < 0 ? -1 : next++);
    if (id < 0) {
      site.inputs.push_back(std::nullopt);
      continue;
    }
    const graph::TensorType& type = graph.value(id).type;
    if (type.dynamic) return std::nullopt;
    site.inputs.push_back(type);
  }
  for (graph::ValueId id : node.outputs) {
    site.node.outputs.push_back(next++);
    if (graph.value(id).type.dynamic) return std::nullopt;
    site.outputs.push_back(graph.value(id).type);
  }
  return site;
}

std::optional<Site> site_of(const graph::Graph& graph, const graph::Node& node, const lower::LowerTarget& target) {
  std::optional<Site> alone = node_alone(graph, node);
  if (!alone) return std::nullopt;
  Site& site = *alone;
  lower::LowerTarget plain = target;
  plain.knob_overrides.reset();
  plain.knob_pins.reset();
  plain.node_pins.reset();
  const std::vector<graph::TensorType> inputs_by_slot = slot_types(site);
  if (lower::unsupported_reason(node, inputs_by_slot, site.outputs, plain)) return std::nullopt;
  lower::LoweredNode lowered = lower::lower_node(site.node, inputs_by_slot, site.outputs, plain);
  if (!lowered.kernel || !lowered.kernel->tuning_site) return std::nullopt;  // a view, or no choices
  site.id = *lowered.kernel->tuning_site;
  return site;
}

std::vector<Site> sites_of(const graph::Graph& graph, const lower::LowerTarget& target) {
  std::vector<Site> sites;
  std::set<std::pair<std::string, std::string>> seen;
  std::optional<std::set<std::string>> anchored;  // planned only once a graph has a workgroup site
  for (const graph::Node& node : graph.nodes()) {
    std::optional<Site> site = site_of(graph, node, target);
    if (!site) continue;
    if (lower::workgroup_template(node.op)) {
      if (!anchored) anchored = anchored_problems(graph, target);
      if (!anchored->contains(site->id.problem)) continue;
    }
    if (seen.insert({site->id.template_name, site->id.problem}).second) sites.push_back(std::move(*site));
  }
  return sites;
}

std::string to_json(const Site& site) {
  json attrs = json::object();
  for (const auto& [name, value] : site.node.attrs.all()) attrs[name] = attribute_json(value);
  json inputs = json::array();
  for (const std::optional<graph::TensorType>& type : site.inputs) inputs.push_back(type ? type_json(*type) : json());
  json outputs = json::array();
  for (const graph::TensorType& type : site.outputs) outputs.push_back(type_json(type));
  const json document = {
      {"template", site.id.template_name}, {"version", site.id.template_version}, {"problem", site.id.problem},
      {"knobs", site.id.knobs},           {"op", site.node.op},                  {"name", site.node.name},
      {"attrs", attrs},                   {"inputs", inputs},                    {"outputs", outputs}};
  return document.dump();
}

Site site_from_json(const std::string& text) {
  try {
    const json document = json::parse(text);
    Site site;
    site.id.template_name = document.at("template").get<std::string>();
    site.id.template_version = base::json_number<int>(document.at("version"));
    site.id.problem = document.at("problem").get<std::string>();
    site.id.knobs = document.at("knobs").get<std::string>();
    site.node.op = document.at("op").get<std::string>();
    site.node.name = document.at("name").get<std::string>();
    for (const auto& [name, value] : document.at("attrs").items())
      site.node.attrs.set(name, attribute_from_json(name, value));
    graph::ValueId next = 0;
    for (const json& type : document.at("inputs")) {
      site.inputs.push_back(type.is_null() ? std::nullopt : std::optional(type_from_json(type)));
      site.node.inputs.push_back(type.is_null() ? -1 : next++);
    }
    for (const json& type : document.at("outputs")) {
      site.outputs.push_back(type_from_json(type));
      site.node.outputs.push_back(next++);
    }
    return site;
  } catch (const json::exception& error) {
    throw_error(ErrorKind::Corrupt, std::string("tuning site: malformed JSON: ") + error.what());
  }
}

}  // namespace kiln::tune
