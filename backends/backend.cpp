// The small shared part of the backend interface: target fingerprints and the
// default capability check.
#include "backends/backend.h"

#include "src/base/check.h"

#include <algorithm>
#include <sstream>
#include <string>

namespace kiln::backend {
namespace {

std::string target_label(const TargetDesc& target) {
  return target.backend + " target '" + target.device_name + "' (" + target.arch + ")";
}

}  // namespace

std::string numbered_source(std::string_view text) {
  std::ostringstream out;
  std::istringstream lines{std::string(text)};
  std::string line;
  for (int number = 1; std::getline(lines, line); ++number) {
    const std::string label = std::to_string(number);
    out << std::string(label.size() < 4 ? 4 - label.size() : 0, ' ') << label << " | " << line << '\n';
  }
  return out.str();
}

std::string trim_log(std::string log) {
  while (!log.empty() && (log.back() == '\0' || log.back() == '\n' || log.back() == ' ')) log.pop_back();
  return log;
}

std::string_view f16_conversion_name(F16Conversion conversion) {
  switch (conversion) {
    case F16Conversion::integer: return "integer";
    case F16Conversion::native: return "native";
    case F16Conversion::native_rte: return "native-rte";
  }
  return "integer";
}

F16Conversion parse_f16_conversion(std::string_view name) {
  for (F16Conversion c : {F16Conversion::integer, F16Conversion::native, F16Conversion::native_rte})
    if (name == f16_conversion_name(c)) return c;
  throw Error(ErrorKind::InvalidArgument,
              "unknown f16 conversion '" + std::string(name) + "' (integer, native or native-rte)");
}

std::string matrix_shape_name(const MatrixShape& shape) {
  return shape.inputs + " " + std::to_string(shape.m) + "x" + std::to_string(shape.n) + "x" + std::to_string(shape.k) +
         " in " + std::to_string(shape.lanes) + " lanes";
}

std::string TargetDesc::fingerprint() const {
  // Fields joined with a separator no device or driver name uses.
  std::string own = backend + "|" + device_name + "|" + driver + "|" + api_version + "|" + arch;
  // Chosen by kiln (or a test), not implied by the device: kernels differ.
  if (f16_conversion != F16Conversion::integer) own += "|f16 " + std::string(f16_conversion_name(f16_conversion));
  return limits_profile.empty() ? own : own + "|profile " + limits_profile;
}

void check_dispatch(const std::string& kernel, std::uint32_t num_buffers, std::uint32_t num_params,
                    std::array<std::uint32_t, 3> groups, std::span<const BufferBinding> bindings,
                    std::span<const std::int32_t> params, const TargetDesc& target, std::uint64_t alignment) {
  KILN_CHECK(bindings.size() == num_buffers, ErrorKind::InvalidArgument,
             "kernel '" + kernel + "' takes " + std::to_string(num_buffers) + " buffers, got " +
                 std::to_string(bindings.size()));
  KILN_CHECK(params.size() == num_params, ErrorKind::InvalidArgument,
             "kernel '" + kernel + "' takes " + std::to_string(num_params) + " parameters, got " +
                 std::to_string(params.size()));
  for (std::size_t i = 0; i < 3; ++i)
    KILN_CHECK(groups[i] >= 1 && groups[i] <= target.max_workgroup_count[i], ErrorKind::InvalidArgument,
               "kernel '" + kernel + "': " + std::to_string(groups[i]) + " workgroups in dimension " +
                   std::to_string(i) + ", the device takes 1 to " + std::to_string(target.max_workgroup_count[i]));
  for (std::size_t i = 0; i < bindings.size(); ++i) {
    const BufferBinding& b = bindings[i];
    KILN_CHECK(b.offset % alignment == 0, ErrorKind::InvalidArgument,
               "kernel '" + kernel + "': binding " + std::to_string(i) + " starts at " + std::to_string(b.offset) +
                   ", not a multiple of " + std::to_string(alignment));
    KILN_CHECK(b.offset + b.size <= b.buffer->size(), ErrorKind::InvalidArgument,
               "kernel '" + kernel + "': binding " + std::to_string(i) + " (" + std::to_string(b.size) +
                   " bytes at " + std::to_string(b.offset) + ") would exceed its buffer of " +
                   std::to_string(b.buffer->size()) + " bytes");
  }
}

void set_pointer_style_capabilities(TargetDesc& target) {
  target.subgroup_basic = target.subgroup_size != 0;
  target.subgroup_broadcast = target.subgroup_size != 0;
  target.subgroup_partitions = true;
  target.texel_r32f = true;
  target.texel_rgba32f = true;
  target.max_texel_buffer_elements = target.max_buffer_bytes / sizeof(float);
}

std::vector<TargetDesc> Backend::binary_targets(const TargetDesc& target) const { return {target}; }

std::optional<std::string> Backend::foreign_plan_refusal(const TargetDesc&, const TargetDesc&,
                                                         const std::set<std::string>&) const {
  return std::nullopt;
}

std::optional<std::string> Backend::supports(const KernelRequirements& kernel, const TargetDesc& target) const {
  const std::string who = "kernel '" + kernel.kernel_name + "'";
  if (kernel.workgroup_size == 0) return who + " has a workgroup size of 0";
  if (kernel.workgroup_size > target.max_workgroup_invocations)
    return who + " needs " + std::to_string(kernel.workgroup_size) + " invocations per workgroup; " +
           target_label(target) + " allows at most " + std::to_string(target.max_workgroup_invocations);
  if (kernel.workgroup_size > target.max_workgroup_size[0])
    return who + " needs a workgroup size of " + std::to_string(kernel.workgroup_size) + " in x; " +
           target_label(target) + " allows at most " + std::to_string(target.max_workgroup_size[0]);
  if (kernel.shared_memory_bytes > target.max_shared_memory_bytes)
    return who + " needs " + std::to_string(kernel.shared_memory_bytes) + " bytes of shared memory; " +
           target_label(target) + " has " + std::to_string(target.max_shared_memory_bytes);
  if (target.max_kernel_buffers != 0 && kernel.num_buffers > target.max_kernel_buffers)
    return who + " binds " + std::to_string(kernel.num_buffers) + " buffers; " + target_label(target) +
           " allows at most " + std::to_string(target.max_kernel_buffers);
  if (target.max_kernel_param_bytes != 0 && kernel.param_bytes > target.max_kernel_param_bytes)
    return who + " takes " + std::to_string(kernel.param_bytes) + " bytes of parameters; " + target_label(target) +
           " allows at most " + std::to_string(target.max_kernel_param_bytes);
  if (kernel.fp16 && !target.fp16) return who + " needs fp16 arithmetic, which " + target_label(target) + " lacks";
  if (kernel.int64 && !target.int64)
    return who + " computes with 64-bit integers, which " + target_label(target) + " lacks (shaderInt64)";
  if (kernel.storage8 && !target.storage8)
    return who + " reads or writes 8-bit buffer elements (bool tensors), which " + target_label(target) +
           " lacks (storageBuffer8BitAccess)";
  if (kernel.storage16 && !target.storage16)
    return who + " reads or writes 16-bit buffer elements (f16 or bf16 tensors), which " + target_label(target) +
           " lacks (storageBuffer16BitAccess)";
  if (kernel.subgroup_size != 0) {
    const std::uint32_t lanes = target.subgroup_size;
    if (!target.subgroup_basic || (kernel.subgroup_broadcast && !target.subgroup_broadcast))
      return who + " uses subgroup " + (kernel.subgroup_broadcast ? "broadcasts" : "ids") + ", which " +
             target_label(target) + " does not support in compute";
    const bool fits = target.subgroup_partitions ? lanes != 0 && lanes % kernel.subgroup_size == 0
                                                 : lanes == kernel.subgroup_size;
    if (!fits)
      return who + " is written for subgroups of " + std::to_string(kernel.subgroup_size) + " lanes; " +
             target_label(target) + " has " + std::to_string(lanes);
    // Partitioned shuffles name the whole hardware subgroup: blocks are whole ones.
    if (target.subgroup_partitions && kernel.workgroup_size % lanes != 0)
      return who + " has a workgroup of " + std::to_string(kernel.workgroup_size) +
             " invocations, not whole subgroups of " + std::to_string(lanes) + " on " + target_label(target);
  }
  for (const MatrixShape& shape : kernel.matrix_shapes)
    if (std::find(target.matrix_shapes.begin(), target.matrix_shapes.end(), shape) == target.matrix_shapes.end()) {
      std::string has;
      for (const MatrixShape& s : target.matrix_shapes) has += (has.empty() ? "" : ", ") + matrix_shape_name(s);
      return who + " multiplies " + matrix_shape_name(shape) + " matrix fragments, which " + target_label(target) +
             " has no instruction for (" + (has.empty() ? "it has no matrix units kiln uses" : "it has " + has) + ")";
    }
  if ((kernel.texel_width_1 && !target.texel_r32f) || (kernel.texel_width_4 && !target.texel_rgba32f) ||
      ((kernel.texel_width_1 || kernel.texel_width_4) && target.max_texel_buffer_elements == 0))
    return who + " reads " + (kernel.texel_width_4 ? "RGBA32" : "R32") + " float texel buffers, which " +
           target_label(target) + " does not support";
  if (kernel.texel_16bit && !target.texel_16bit)
    return who + " reads 16-bit (R16 / RGBA16) texel buffers, which " + target_label(target) + " does not support";
  return std::nullopt;
}

}  // namespace kiln::backend
