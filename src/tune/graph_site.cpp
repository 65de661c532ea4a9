#include "src/tune/graph_site.h"

#include "src/base/check.h"
#include "src/lower/tuning_site.h"
#include "src/tune/measure.h"

#include <kiln/error.h>

#include <algorithm>
#include <array>
#include <memory>

namespace kiln::tune {

namespace {

constexpr std::array<const char*, 2> kGraphPasses = {"winograd", "pack_matmul_weights"};
constexpr const char* kChoices = " choices=";

std::string joined(const std::vector<std::string>& options) {
  std::string text;
  for (const std::string& option : options) text += (text.empty() ? "" : "|") + option;
  return text;
}

// The node's shapes as the kernel sites spell them: a Conv as lowering's
// conv problem, a MatMul with a 2-D B as the GEMM its rows fold into.
std::optional<std::string> node_problem(const Site& site) {
  std::vector<graph::TensorType> inputs;
  for (const std::optional<graph::TensorType>& type : site.inputs) inputs.push_back(type.value_or(graph::TensorType{}));
  if (site.node.op == "Conv") {
    try {
      return lower::with_storage(lower::conv_problem_text(lower::conv_problem_of(site.node, inputs, site.outputs)),
                                 lower::storage16_of(inputs, site.outputs),
                                 site.node.attrs.get_string("f32_products", ""));
    } catch (const Error&) {
      return std::nullopt;
    }
  }
  if (site.node.op == "MatMul" && inputs.size() == 2 && inputs[0].shape.size() >= 2 && inputs[1].shape.size() == 2) {
    const Shape& a = inputs[0].shape;
    std::int64_t rows = 1;
    for (std::size_t i = 0; i + 1 < a.size(); ++i) rows *= a[i];
    return lower::with_storage("gemm batch=1 m=" + std::to_string(rows) + " n=" + std::to_string(inputs[1].shape[1]) +
                                   " k=" + std::to_string(a.back()) + " a=row b=row",
                               lower::storage16_of(inputs, site.outputs), site.node.attrs.get_string("f32_products", ""));
  }
  return std::nullopt;
}

}  // namespace

bool is_graph_site(const Site& site) {
  return std::find(kGraphPasses.begin(), kGraphPasses.end(), site.id.template_name) != kGraphPasses.end();
}

std::optional<Site> graph_site_of(const graph::passes::GraphChoice& choice) {
  KILN_CHECK(choice.graph && choice.node, ErrorKind::Internal, "a graph choice without its graph or node");
  const graph::Graph& g = *choice.graph;
  const graph::Node& node = *choice.node;
  std::optional<Site> alone = node_alone(g, node);
  if (!alone) return std::nullopt;
  Site& site = *alone;
  const std::optional<std::string> problem = node_problem(site);
  if (!problem) return std::nullopt;
  site.id.template_name = choice.pass;
  site.id.template_version = kGraphChoiceVersion;
  site.id.problem = *problem + kChoices + joined(choice.options);
  site.id.knobs = choice.rule;
  return site;
}

std::vector<std::string> graph_site_options(const Site& site) {
  const std::size_t at = site.id.problem.rfind(kChoices);
  KILN_CHECK(at != std::string::npos, ErrorKind::Corrupt,
             "graph tuning site '" + site.id.problem + "' names no choices");
  std::vector<std::string> options;
  const std::string list = site.id.problem.substr(at + std::string(kChoices).size());
  for (std::size_t start = 0; start <= list.size();) {
    const std::size_t end = std::min(list.find('|', start), list.size());
    if (end > start) options.push_back(list.substr(start, end - start));
    start = end + 1;
  }
  return options;
}

std::vector<std::string> graph_site_candidates(const Site& site) {
  std::vector<std::string> options = graph_site_options(site);
  const auto rule = std::find(options.begin(), options.end(), site.id.knobs);
  KILN_CHECK(rule != options.end(), ErrorKind::Corrupt,
             "graph tuning site '" + site.id.problem + "': the rule's choice '" + site.id.knobs + "' is not an option");
  std::rotate(options.begin(), rule, rule + 1);
  return options;
}

graph::Graph graph_site_graph(const Site& site, std::uint64_t seed) {
  graph::Graph g;
  std::vector<graph::ValueId> inputs;
  for (std::size_t slot = 0; slot < site.inputs.size(); ++slot) {
    const std::optional<graph::TensorType>& type = site.inputs[slot];
    if (!type) {
      inputs.push_back(-1);
      continue;
    }
    if (slot == 0) {
      inputs.push_back(g.add_input("x", *type));
      continue;
    }
    KILN_CHECK(type->dtype == DType::f32 || type->dtype == DType::f16 || type->dtype == DType::bf16,
               ErrorKind::Unsupported, "graph tuning site '" + site.node.name + "': only float constants are made up");
    const Tensor values =
        Tensor::from_f32(type->shape, random_values(static_cast<std::size_t>(num_elements(type->shape)), seed + slot));
    inputs.push_back(g.add_constant(site.node.name + ".input" + std::to_string(slot),
                                    type->dtype == DType::f32 ? values : values.to(type->dtype)));
  }
  g.set_outputs(g.add_node(site.node.op, inputs, site.node.attrs, site.node.name));
  return g;
}

graph::passes::GraphChooser forcing_chooser(const Site& site, const std::string& option, bool* asked) {
  const std::string pass = site.id.template_name;
  return [pass, option, asked](const graph::passes::GraphChoice& choice) {
    if (choice.pass != pass) return choice.rule;
    if (asked) *asked = true;
    return option;
  };
}

std::vector<Site> option_kernel_sites(const Site& site, const std::string& option,
                                      graph::passes::PipelineOptions passes, const lower::LowerTarget& target) {
  passes.chooser = forcing_chooser(site, option);
  const graph::passes::PipelineResult after = graph::passes::run_compile_passes(graph_site_graph(site, 1), passes);
  std::vector<Site> out;
  for (Site& kernel_site : sites_of(after.graph, target))
    if (kernel_site.id.template_name == "gemm" || kernel_site.id.template_name == "conv" ||
        kernel_site.id.template_name == "attention")
      out.push_back(std::move(kernel_site));
  return out;
}

}  // namespace kiln::tune
