// The C++ example of README.md, verbatim: built and run by `meson test`
// (readme_example; the install suite builds it against an installed kiln).
#include <kiln/kiln.h>
#include <iostream>

int main() {
  // Write a model with the builder API (or take a built-in one).
  kiln::Builder b("tiny");
  auto x = b.input("x", kiln::DType::f32, {1, 3, 32, 32});
  auto w = b.constant("conv.weight", kiln::Tensor(kiln::DType::f32, {8, 3, 3, 3}));
  auto y = b.relu(b.conv2d(x, w, std::nullopt, {.padding = {1, 1, 1, 1}}));
  kiln::Model tiny = b.build({b.global_avg_pool(y)});

  kiln::Model resnet = kiln::models::resnet18({.image_size = 224});
  kiln::CompiledModel fast = kiln::compile(resnet, {.backend = "vulkan",
                                                    .mode = kiln::Mode::reduce_overhead,
                                                    .fullgraph = true});
  kiln::Tensor input(kiln::DType::f32, {1, 3, 224, 224});
  std::vector<kiln::Tensor> out = fast({input});  // first call compiles; later calls replay
  std::cout << out[0].shape()[1] << " logits, compiled in " << fast.stats().compile_ms << " ms\n";

  kiln::EagerModel slow = kiln::eager(tiny);        // op by op: the baseline
  std::cout << slow({kiln::Tensor(kiln::DType::f32, {1, 3, 32, 32})})[0].numel() << "\n";
}
