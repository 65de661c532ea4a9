#include "src/lower/target_policy.h"

#include "shaders/heuristic.h"

#include <algorithm>

namespace kiln::lower {
namespace {

shaders::ConvProblem conv_problem(const graph::passes::ConvGeometry& g) {
  shaders::ConvProblem p;
  p.batch = g.batch;
  p.in_channels = g.in_channels;
  p.out_channels = g.out_channels;
  p.groups = g.groups;
  p.in_h = g.in_h;
  p.in_w = g.in_w;
  p.out_h = g.out_h;
  p.out_w = g.out_w;
  p.kernel_h = g.kernel_h;
  p.kernel_w = g.kernel_w;
  p.stride_h = g.stride_h;
  p.stride_w = g.stride_w;
  p.dilation_h = g.dilation_h;
  p.dilation_w = g.dilation_w;
  p.pad_top = g.pad_top;
  p.pad_left = g.pad_left;
  return p;
}

}  // namespace

graph::passes::PipelineOptions TargetPolicy::pass_options(const Settings& settings,
                                                          graph::passes::GraphChooser chooser) const {
  return {.cpu_device = cpu_device(),
          .max_binding_bytes = max_binding_bytes,
          .templates = templates,
          .winograd = winograd,
          .settings = settings,
          .chooser = std::move(chooser),
          .matrix_inputs = matrix_inputs()};
}

graph::passes::EagerPassOptions TargetPolicy::eager_pass_options(const Settings& settings) const {
  return {.winograd = winograd,
          .max_binding_bytes = max_binding_bytes,
          .f32_products = graph::passes::f32_product_options(settings, matrix_inputs())};
}

std::vector<std::string> TargetPolicy::matrix_inputs() const {
  std::vector<std::string> inputs;
  for (const MatrixUnit& unit : lower.matrix_units)
    if (std::find(inputs.begin(), inputs.end(), unit.inputs) == inputs.end()) inputs.push_back(unit.inputs);
  return inputs;
}

DeviceClass device_class(const backend::TargetDesc& target) {
  if (target.cpu_cores) return target.host_code ? DeviceClass::host_cpu : DeviceClass::emulated_gpu;
  return target.discrete_gpu ? DeviceClass::discrete_gpu : DeviceClass::integrated_gpu;
}

TargetPolicy target_policy(const backend::TargetDesc& target) {
  TargetPolicy policy;
  policy.device_class = device_class(target);
  policy.max_kernel_buffers = target.max_kernel_buffers;
  policy.max_binding_bytes = target.max_buffer_bytes;
  policy.max_kernel_param_bytes = target.max_kernel_param_bytes;

  LowerTarget& out = policy.lower;
  out.backend = target.backend;
  if (target.subgroup_size != 0) out.subgroup_size = target.subgroup_size;
  if (target.max_workgroup_invocations != 0) out.max_workgroup_invocations = target.max_workgroup_invocations;
  if (target.max_shared_memory_bytes != 0) out.max_shared_memory_bytes = target.max_shared_memory_bytes;
  out.device_class = policy.device_class;
  out.subgroup_broadcast = target.subgroup_basic && target.subgroup_broadcast && target.subgroup_size != 0;
  for (const backend::MatrixShape& shape : target.matrix_shapes)
    out.matrix_units.push_back({shape.inputs, shape.m, shape.n, shape.k, shape.lanes});
  if (target.texel_r32f && target.texel_rgba32f) {
    out.max_texel_buffer_elements = target.max_texel_buffer_elements;
    out.texel_16bit = target.texel_16bit;
  }

  policy.templates.conv_uses_direct_template = [lower = out](const graph::passes::ConvGeometry& g) {
    // As lowering will see the node: its matrix instructions' type decides whether it takes them.
    LowerTarget node = lower;
    if (g.matrix_inputs == "f16" || g.matrix_inputs == "bf16") node.storage16 = g.matrix_inputs;
    else node.f32_products = g.matrix_inputs;
    return shaders::choose_conv_plan(conv_problem(g), node).algorithm == shaders::ConvAlgorithm::direct;
  };
  // The thresholds were measured on the CPU class (the rule's defaults); the
  // GPU classes keep them until measured there.
  policy.winograd.column_multiple = shaders::gemm_column_multiple(out);
  if (policy.max_binding_bytes != 0)
    policy.winograd.max_weight_bytes =
        std::min<std::int64_t>(policy.winograd.max_weight_bytes, static_cast<std::int64_t>(policy.max_binding_bytes));
  return policy;
}

}  // namespace kiln::lower
