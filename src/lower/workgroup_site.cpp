#include "src/lower/workgroup_site.h"

#include "src/base/check.h"
#include "src/lower/tuning_site.h"

#include <kiln/error.h>

#include <xxhash.h>

#include <algorithm>
#include <charconv>
#include <cstdio>

namespace kiln::lower {

namespace {

struct WorkgroupOp {
  std::string_view op;
  const char* template_name;
};

constexpr const char* kPointwise = "pointwise";
constexpr const char* kReduction = "reduction";

// Every op here was checked: its lowering (make_kernel) indexes only by the
// global index, one invocation per output element, row, window or tile, and
// declares no shared memory, barrier or subgroup operation, so any
// workgroup size computes the same result. Conv, Gemm, MatMul and Attention
// are templates with sites of their own; Reshape, Flatten, Identity,
// Squeeze, Unsqueeze and Cast are views; ArgMax, ArgMin, the comparisons,
// logic ops, Where and GatherElements run on the host. A lowering that
// starts cooperating within a workgroup must leave this table
// (build_tuned_workgroup refuses it).
constexpr WorkgroupOp kWorkgroupOps[] = {
    // lower_elementwise.cpp: broadcast binary ops, activations, BatchNormalization.
    {"Add", kPointwise}, {"Sub", kPointwise}, {"Mul", kPointwise}, {"Div", kPointwise},
    {"Relu", kPointwise}, {"Sigmoid", kPointwise}, {"Silu", kPointwise}, {"Tanh", kPointwise},
    {"Gelu", kPointwise}, {"Clip", kPointwise}, {"BatchNormalization", kPointwise},
    {"LeakyRelu", kPointwise}, {"Elu", kPointwise}, {"Selu", kPointwise}, {"Celu", kPointwise},
    {"ThresholdedRelu", kPointwise}, {"Softplus", kPointwise}, {"Softsign", kPointwise}, {"Mish", kPointwise},
    {"Shrink", kPointwise},
    // lower_math.cpp: unary math and n-ary broadcasts.
    {"Sqrt", kPointwise}, {"Exp", kPointwise}, {"Log", kPointwise}, {"Erf", kPointwise},
    {"Sin", kPointwise}, {"Cos", kPointwise}, {"Neg", kPointwise}, {"Abs", kPointwise},
    {"Reciprocal", kPointwise}, {"Floor", kPointwise}, {"Ceil", kPointwise}, {"Sign", kPointwise},
    {"Round", kPointwise}, {"Sinh", kPointwise}, {"Cosh", kPointwise}, {"Asinh", kPointwise},
    {"Acosh", kPointwise}, {"Atanh", kPointwise}, {"Tan", kPointwise}, {"Atan", kPointwise},
    {"Asin", kPointwise}, {"Acos", kPointwise},
    {"HardSigmoid", kPointwise}, {"HardSwish", kPointwise}, {"Pow", kPointwise}, {"Max", kPointwise},
    {"Min", kPointwise}, {"Sum", kPointwise}, {"Mean", kPointwise},
    // lower_shape_ops.cpp, lower_data.cpp: copies, one invocation per output
    // element (Split: per input element).
    {"Transpose", kPointwise}, {"Concat", kPointwise}, {"Slice", kPointwise}, {"Split", kPointwise},
    {"Gather", kPointwise}, {"Expand", kPointwise}, {"Tile", kPointwise}, {"Pad", kPointwise},
    {"Resize", kPointwise}, {"Trilu", kPointwise},
    // lower_winograd.cpp: one invocation per tile (input, output) or filter (weight).
    {"WinogradInput", kPointwise}, {"WinogradOutput", kPointwise}, {"WinogradWeight", kPointwise},
    // lower_math.cpp: one invocation per kept element, row or scan line.
    {"ReduceMean", kReduction}, {"ReduceSum", kReduction}, {"ReduceMax", kReduction},
    {"ReduceMin", kReduction}, {"ReduceProd", kReduction}, {"CumSum", kReduction},
    {"ReduceL1", kReduction}, {"ReduceL2", kReduction}, {"ReduceSumSquare", kReduction},
    {"ReduceLogSum", kReduction}, {"ReduceLogSumExp", kReduction},
    {"LogSoftmax", kReduction},
    // lower_normalization.cpp: one invocation per row.
    {"Softmax", kReduction}, {"LayerNormalization", kReduction},
    // lower_pooling.cpp: one invocation per output element (window) or channel.
    {"MaxPool", kReduction}, {"AveragePool", kReduction}, {"GlobalAveragePool", kReduction},
    // lower_conv_transpose.cpp: one invocation per output element.
    {"ConvTranspose", kReduction},
};

constexpr std::size_t kMaxAttributeText = 64;

std::string type_text(const graph::TensorType& type) {
  std::string text = std::string(dtype_name(type.dtype)) + "[";
  for (std::size_t d = 0; d < type.shape.size(); ++d) text += (d ? "," : "") + std::to_string(type.shape[d]);
  return text + "]";
}

// Shortest round-trip text, always with a '.' or an exponent so a float
// never reads as an int.
std::string float_text(double value) {
  char buffer[64];
  const auto [end, error] = std::to_chars(buffer, buffer + sizeof buffer, value);
  std::string text = error == std::errc() ? std::string(buffer, end) : std::to_string(value);
  if (text.find_first_of(".eEn") == std::string::npos) text += ".0";  // "n": nan, inf
  return text;
}

std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string attribute_text(const graph::Attribute& attribute) {
  return std::visit(
      [](const auto& value) -> std::string {
        using T = std::decay_t<decltype(value)>;
        if constexpr (std::is_same_v<T, std::int64_t>) {
          return std::to_string(value);
        } else if constexpr (std::is_same_v<T, double>) {
          return float_text(value);
        } else if constexpr (std::is_same_v<T, std::string>) {
          return quoted(value);
        } else {
          std::string text = "[";
          for (std::size_t i = 0; i < value.size(); ++i) {
            if (i) text += ",";
            if constexpr (std::is_same_v<T, std::vector<std::int64_t>>) text += std::to_string(value[i]);
            else text += float_text(value[i]);
          }
          return text + "]";
        }
      },
      attribute);
}

// Long values (an index list) as a digest, so the text stays one readable line.
std::string bounded(const std::string& text) {
  if (text.size() <= kMaxAttributeText) return text;
  char digest[24];
  std::snprintf(digest, sizeof digest, "#%016llx",
                static_cast<unsigned long long>(XXH3_64bits(text.data(), text.size())));
  return digest;
}

}  // namespace

const char* workgroup_template(std::string_view op) {
  for (const WorkgroupOp& entry : kWorkgroupOps)
    if (entry.op == op) return entry.template_name;
  return nullptr;
}

std::string workgroup_knob_text(std::uint32_t size) { return "wg" + std::to_string(size); }

std::uint32_t parse_workgroup_knobs(const std::string& text) {
  KILN_CHECK(text.starts_with("wg") && text.size() > 2, ErrorKind::InvalidArgument,
             "workgroup knobs '" + text + "': expected wg<workgroup_size> (wg64)");
  std::uint64_t size = 0;
  const char* first = text.data() + 2;
  const char* last = text.data() + text.size();
  const auto [end, error] = std::from_chars(first, last, size);
  KILN_CHECK(error == std::errc() && end == last && size >= 1 && size <= 65536, ErrorKind::InvalidArgument,
             "workgroup knobs '" + text + "': workgroup_size must be a whole number from 1 to 65536");
  return static_cast<std::uint32_t>(size);
}

std::optional<std::string> workgroup_unfit(std::uint32_t size, const LowerTarget& target) {
  if (size > target.max_workgroup_invocations)
    return "workgroup of " + std::to_string(size) + " invocations exceeds the target's " +
           std::to_string(target.max_workgroup_invocations);
  return std::nullopt;
}

std::vector<std::uint32_t> workgroup_size_space(const LowerTarget& target) {
  std::vector<std::uint32_t> sizes = {32, 64, 128, 256, 512, 1024};
  if (target.subgroup_size != 0) sizes.push_back(target.subgroup_size);
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  return sizes;
}

std::string workgroup_problem_text(std::string_view template_name, const graph::Node& node,
                                   std::span<const graph::TensorType* const> inputs,
                                   std::span<const graph::TensorType> outputs) {
  std::string text = std::string(template_name) + " " + node.op + " in=";
  for (std::size_t i = 0; i < inputs.size(); ++i) text += (i ? "," : "") + (inputs[i] ? type_text(*inputs[i]) : "-");
  text += " out=";
  for (std::size_t i = 0; i < outputs.size(); ++i) text += (i ? "," : "") + type_text(outputs[i]);
  for (const auto& [name, value] : node.attrs.all()) text += " " + name + "=" + bounded(attribute_text(value));
  return text;
}

void build_tuned_workgroup(kir::Kernel& kernel, const char* template_name, const std::string& problem,
                           const LowerTarget& target) {
  // Such a kernel's result would depend on its workgroup size: a bug in the table above.
  KILN_CHECK(kernel.shared.empty() && !kir::has_barrier(kernel) && kernel.subgroup_size == 0 &&
                 !kir::uses_subgroup_ops(kernel),
             ErrorKind::Internal,
             "kernel '" + kernel.name + "' cooperates within its workgroup; its op may not tune the workgroup size");
  std::uint32_t size = kernel.workgroup_size;
  bool overridden = false;
  if (const std::optional<std::string> wanted = knob_override(target, template_name, problem)) {
    try {
      const std::uint32_t parsed = parse_workgroup_knobs(*wanted);
      if (auto why = workgroup_unfit(parsed, target)) throw_error(ErrorKind::InvalidArgument, *why);
      size = parsed;
      overridden = is_users_override(target, problem);
    } catch (const Error& error) {
      warn_override_ignored(target, problem, *wanted, error.what());
    }
  }
  kernel.workgroup_size = size;
  if (overridden) kernel.name += "_" + workgroup_knob_text(size);
  kernel.tuning_site =
      kir::TuningSite{template_name, kWorkgroupTemplateVersion, problem, workgroup_knob_text(size), overridden};
}

}  // namespace kiln::lower
