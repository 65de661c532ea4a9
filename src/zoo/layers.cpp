#include "src/zoo/layers.h"

#include <kiln/error.h>

#include "src/base/check.h"
#include "src/zoo/init.h"

#include <cmath>

namespace kiln::models {

namespace {
using Value = Builder::Value;
}  // namespace

Tensor transposed_2d(const Tensor& t) {
  KILN_ASSERT(t.rank() == 2 && t.dtype() == DType::f32);
  const std::int64_t rows = t.shape()[0];
  const std::int64_t cols = t.shape()[1];
  std::vector<float> out(static_cast<std::size_t>(rows * cols));
  std::span<const float> in = t.values<float>();
  for (std::int64_t r = 0; r < rows; ++r)
    for (std::int64_t c = 0; c < cols; ++c)
      out[static_cast<std::size_t>(c * rows + r)] = in[static_cast<std::size_t>(r * cols + c)];
  return Tensor::from_f32({cols, rows}, std::move(out));
}

LayerWriter::Scope::Scope(LayerWriter& w, const std::string& name) : w_(w) {
  w_.b_.push_scope(name);
  w_.path_.push_back(name);
}

LayerWriter::Scope::~Scope() {
  // A destructor must not throw: pop_scope only fails when the builder was
  // already finished, a misuse that build() itself has reported by then.
  try {
    w_.b_.pop_scope();
  } catch (const Error&) {
  }
  w_.path_.pop_back();
}

std::uint64_t LayerWriter::seed(const std::string& local_name) const {
  std::string full;
  for (const std::string& part : path_) full += part + ".";
  return init::tensor_seed(seed_, full + local_name);
}

Value LayerWriter::constant(const std::string& local_name, Tensor value) {
  return b_.constant(local_name, std::move(value));
}

Value LayerWriter::conv(const std::string& name, Value x, const ConvSpec& spec) {
  KILN_ASSERT(spec.groups >= 1 && spec.in_channels % spec.groups == 0);
  Scope scope(*this, name);
  const Shape weight_shape = {spec.out_channels, spec.in_channels / spec.groups, spec.kernel, spec.kernel};
  Tensor weight = spec.init.weight_std ? init::normal(weight_shape, 0.0, *spec.init.weight_std, seed("weight"))
                                       : init::kaiming_normal_fan_out(weight_shape, seed("weight"));
  Value w = constant("weight", std::move(weight));
  std::optional<Value> bias;
  if (spec.init.bias_std)
    bias = constant("bias", init::normal({spec.out_channels}, 0.0, *spec.init.bias_std, seed("bias")));
  const std::int64_t p = spec.padding;
  return b_.conv2d(x, w, bias,
                   {.stride = {spec.stride, spec.stride},
                    .padding = {p, p, p, p},
                    .dilation = {spec.dilation, spec.dilation},
                    .groups = spec.groups});
}

Value LayerWriter::batch_norm(const std::string& name, Value x, std::int64_t channels, float epsilon) {
  Scope scope(*this, name);
  Value weight = constant("weight", init::normal({channels}, 1.0, 0.1, seed("weight")));
  Value bias = constant("bias", init::normal({channels}, 0.0, 0.1, seed("bias")));
  Value mean = constant("running_mean", init::normal({channels}, 0.0, 0.1, seed("running_mean")));
  Value var = constant("running_var", init::uniform({channels}, 0.5, 1.5, seed("running_var")));
  return b_.batch_norm(x, weight, bias, mean, var, epsilon);
}

Value LayerWriter::layer_norm(const std::string& name, Value x, std::int64_t features, float epsilon) {
  Scope scope(*this, name);
  Value weight = constant("weight", init::normal({features}, 1.0, 0.1, seed("weight")));
  Value bias = constant("bias", init::normal({features}, 0.0, 0.1, seed("bias")));
  return b_.layer_norm(x, weight, bias, -1, epsilon);
}

Value LayerWriter::linear(const std::string& name, Value x, std::int64_t in_features, std::int64_t out_features,
                          const LinearInit& init) {
  Scope scope(*this, name);
  const Shape weight_shape = {out_features, in_features};
  Tensor weight;
  Tensor bias;
  switch (init.kind) {
    case LinearInit::Kind::TorchDefault: {
      const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
      weight = init::uniform(weight_shape, -bound, bound, seed("weight"));
      bias = init::uniform({out_features}, -bound, bound, seed("bias"));
      break;
    }
    case LinearInit::Kind::Normal:
      weight = init::normal(weight_shape, 0.0, init.weight_scale, seed("weight"));
      bias = init::normal({out_features}, 0.0, init.bias_scale, seed("bias"));
      break;
    case LinearInit::Kind::Uniform:
      weight = init::uniform(weight_shape, -init.weight_scale, init.weight_scale, seed("weight"));
      bias = init::normal({out_features}, 0.0, init.bias_scale, seed("bias"));
      break;
    case LinearInit::Kind::XavierUniform: {
      const double bound = std::sqrt(6.0 / static_cast<double>(in_features + out_features));
      weight = init::uniform(weight_shape, -bound, bound, seed("weight"));
      bias = init::normal({out_features}, 0.0, init.bias_scale, seed("bias"));
      break;
    }
  }
  if (b_.shape(x).size() == 2) {
    Value w = constant("weight", std::move(weight));
    Value c = constant("bias", std::move(bias));
    return b_.gemm(x, w, c, {.trans_b = true});
  }
  Value w = constant("weight", transposed_2d(weight));
  Value c = constant("bias", std::move(bias));
  return b_.add(b_.matmul(x, w), c);
}

Value LayerWriter::silu(Value x) { return b_.mul(x, b_.sigmoid(x)); }

Value LayerWriter::scalar(const std::string& local_name, float value) {
  return constant(local_name, Tensor::from_f32({1}, {value}));
}

}  // namespace kiln::models
