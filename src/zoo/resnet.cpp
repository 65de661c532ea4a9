// torchvision's ResNet-18, written with kiln::Builder. Node and constant names
// follow torchvision's state_dict keys ("layer2.0.downsample.0.weight").
#include <kiln/builder.h>
#include <kiln/models.h>

#include "src/base/check.h"
#include "src/zoo/init.h"

#include <cmath>

namespace kiln::models {

namespace {

using Value = Builder::Value;

// Writes the layers; keeps its own copy of the scope path so that every
// tensor's seed derives from its full name.
class ResNetWriter {
 public:
  ResNetWriter(Builder& builder, std::uint64_t seed) : b_(builder), seed_(seed) {}

  Value stem(Value x) {
    x = conv("conv1", x, 3, 64, 7, 2, 3);
    x = batch_norm("bn1", x, 64);
    x = b_.relu(x);
    Scope pool(*this, "maxpool");
    return b_.max_pool2d(x, {.kernel = {3, 3}, .stride = {2, 2}, .padding = {1, 1, 1, 1}});
  }

  // One stage of BasicBlocks; only the first block changes stride and width.
  Value layer(const std::string& name, Value x, std::int64_t in_channels, std::int64_t channels,
              std::int64_t stride, int blocks) {
    Scope scope(*this, name);
    for (int i = 0; i < blocks; ++i) {
      x = basic_block(std::to_string(i), x, i == 0 ? in_channels : channels, channels, i == 0 ? stride : 1);
    }
    return x;
  }

  Value head(Value x, std::int64_t num_classes) {
    {
      Scope pool(*this, "avgpool");
      x = b_.global_avg_pool(x);
    }
    x = b_.flatten(x, 1);
    Scope fc(*this, "fc");
    const std::int64_t in_features = b_.shape(x).back();
    const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
    Value weight = constant("weight", init::uniform({num_classes, in_features}, -bound, bound, seed("weight")));
    Value bias = constant("bias", init::uniform({num_classes}, -bound, bound, seed("bias")));
    return b_.gemm(x, weight, bias, {.trans_b = true});
  }

 private:
  // Pushes a scope on the builder and on the writer's own path.
  class Scope {
   public:
    Scope(ResNetWriter& w, const std::string& name) : w_(w) {
      w_.b_.push_scope(name);
      w_.path_.push_back(name);
    }
    ~Scope() {
      w_.b_.pop_scope();
      w_.path_.pop_back();
    }
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    ResNetWriter& w_;
  };

  std::uint64_t seed(const std::string& local_name) const {
    std::string full;
    for (const std::string& part : path_) full += part + ".";
    return init::tensor_seed(seed_, full + local_name);
  }

  Value constant(const std::string& name, Tensor value) { return b_.constant(name, std::move(value)); }

  Value conv(const std::string& name, Value x, std::int64_t in_channels, std::int64_t out_channels,
             std::int64_t kernel, std::int64_t stride, std::int64_t pad) {
    Scope scope(*this, name);
    Value weight = constant("weight", init::kaiming_normal_fan_out({out_channels, in_channels, kernel, kernel},
                                                                   seed("weight")));
    return b_.conv2d(x, weight, std::nullopt, {.stride = {stride, stride}, .padding = {pad, pad, pad, pad}});
  }

  // Non-trivial statistics, so that folding BatchNormalization is really tested.
  Value batch_norm(const std::string& name, Value x, std::int64_t channels) {
    Scope scope(*this, name);
    Value weight = constant("weight", init::normal({channels}, 1.0, 0.1, seed("weight")));
    Value bias = constant("bias", init::normal({channels}, 0.0, 0.1, seed("bias")));
    Value mean = constant("running_mean", init::normal({channels}, 0.0, 0.1, seed("running_mean")));
    Value var = constant("running_var", init::uniform({channels}, 0.5, 1.5, seed("running_var")));
    return b_.batch_norm(x, weight, bias, mean, var, 1e-5f);
  }

  Value basic_block(const std::string& name, Value x, std::int64_t in_channels, std::int64_t channels,
                    std::int64_t stride) {
    Scope scope(*this, name);
    Value y = conv("conv1", x, in_channels, channels, 3, stride, 1);
    y = batch_norm("bn1", y, channels);
    y = b_.relu(y);
    y = conv("conv2", y, channels, channels, 3, 1, 1);
    y = batch_norm("bn2", y, channels);
    Value identity = x;
    if (stride != 1 || in_channels != channels) {
      Scope downsample(*this, "downsample");
      identity = conv("0", x, in_channels, channels, 1, stride, 0);
      identity = batch_norm("1", identity, channels);
    }
    return b_.relu(b_.add(y, identity));
  }

  Builder& b_;
  std::uint64_t seed_;
  std::vector<std::string> path_;
};

}  // namespace

Model resnet18(const ModelOptions& options) {
  KILN_CHECK(options.batch >= 1, ErrorKind::InvalidArgument,
             "resnet18: batch must be >= 1, got " + std::to_string(options.batch));
  KILN_CHECK(options.image_size >= 1, ErrorKind::InvalidArgument,
             "resnet18: image_size must be >= 1, got " + std::to_string(options.image_size));
  const std::int64_t num_classes = options.num_classes == 0 ? 1000 : options.num_classes;
  KILN_CHECK(num_classes >= 1, ErrorKind::InvalidArgument,
             "resnet18: num_classes must be >= 1, got " + std::to_string(options.num_classes));

  Builder b("resnet18");
  ResNetWriter w(b, options.seed);
  Value x = b.input("input", DType::f32, {options.batch, 3, options.image_size, options.image_size});
  x = w.stem(x);
  x = w.layer("layer1", x, 64, 64, 1, 2);
  x = w.layer("layer2", x, 64, 128, 2, 2);
  x = w.layer("layer3", x, 128, 256, 2, 2);
  x = w.layer("layer4", x, 256, 512, 2, 2);
  Value logits = w.head(x, num_classes);
  b.set_name(logits, "logits");
  return b.build({logits}).with_task("classification");
}

}  // namespace kiln::models
