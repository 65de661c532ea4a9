// Internal to src/zoo: writes torchvision-style layers with kiln::Builder.
//
// Every constant is named by its torchvision state_dict key below the
// builder's scope, and drawn from its own seeded stream (init::tensor_seed of
// the writer's scope path), so weights do not depend on the order layers are
// written in.
#pragma once

#include <kiln/builder.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kiln::models {

// How a conv's weight is initialised.
struct ConvInit {
  // nullopt: torchvision's kaiming_normal_(mode="fan_out"); else N(0, std).
  std::optional<double> weight_std;
  // nullopt: no bias input; else the bias is drawn from N(0, std).
  std::optional<double> bias_std;
};

struct ConvSpec {
  std::int64_t in_channels = 0;
  std::int64_t out_channels = 0;
  std::int64_t kernel = 1;
  std::int64_t stride = 1;
  std::int64_t padding = 0;  // the same on all four sides
  std::int64_t dilation = 1;
  std::int64_t groups = 1;
  ConvInit init = {};
};

// How a linear layer's weight and bias are initialised.
struct LinearInit {
  enum class Kind {
    TorchDefault,   // nn.Linear's reset_parameters: U(-1/sqrt(in), 1/sqrt(in)) for weight and bias
    Normal,         // weight N(0, weight_scale), bias N(0, bias_scale)
    Uniform,        // weight U(-weight_scale, weight_scale), bias N(0, bias_scale)
    XavierUniform,  // weight U(+-sqrt(6 / (in + out))), bias N(0, bias_scale)
  };
  Kind kind = Kind::TorchDefault;
  double weight_scale = 0.0;
  double bias_scale = 0.0;
};

// [rows, cols] -> [cols, rows]: weights stored the way torch.onnx.export stores
// a Linear's weight for MatMul.
Tensor transposed_2d(const Tensor& matrix);

class LayerWriter {
 public:
  LayerWriter(Builder& builder, std::uint64_t seed) : b_(builder), seed_(seed) {}

  // Pushes a name on the builder's scope and on the writer's seed path.
  class Scope {
   public:
    Scope(LayerWriter& w, const std::string& name);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    LayerWriter& w_;
  };

  Builder& builder() { return b_; }
  // The seed of the tensor `local_name` in the current scope.
  std::uint64_t seed(const std::string& local_name) const;
  // A constant named `local_name` in the current scope.
  Builder::Value constant(const std::string& local_name, Tensor value);

  // A Conv node "<name>" with "<name>.weight" (and "<name>.bias").
  Builder::Value conv(const std::string& name, Builder::Value x, const ConvSpec& spec);
  // BatchNormalization "<name>" with randomised affine parameters and running
  // statistics (torchvision starts them at 1/0, which would hide folding bugs).
  Builder::Value batch_norm(const std::string& name, Builder::Value x, std::int64_t channels,
                            float epsilon = 1e-5f);
  // LayerNormalization over the last axis with randomised scale and bias.
  Builder::Value layer_norm(const std::string& name, Builder::Value x, std::int64_t features,
                            float epsilon = 1e-5f);
  // nn.Linear over the last axis: Gemm (transB) for rank 2, as torch.onnx.export
  // does; otherwise MatMul with the weight stored transposed [in, out] and Add.
  Builder::Value linear(const std::string& name, Builder::Value x, std::int64_t in_features,
                        std::int64_t out_features, const LinearInit& init = {});
  // x * Sigmoid(x): how torch.onnx.export writes nn.SiLU.
  Builder::Value silu(Builder::Value x);
  // A f32 scalar constant (shape [1]) for broadcasting arithmetic.
  Builder::Value scalar(const std::string& local_name, float value);

 private:
  Builder& b_;
  std::uint64_t seed_;
  std::vector<std::string> path_;
};

}  // namespace kiln::models
