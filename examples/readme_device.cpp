// The second C++ example of README.md ("Outputs that stay on the device"),
// verbatim: built and run by `meson test` (readme_device_example).
#include <kiln/kiln.h>
#include <iostream>

int main() {
  kiln::Builder t("trunk");
  auto x = t.input("x", kiln::DType::f32, {1, 3, 32, 32});
  auto w = t.constant("conv.weight", kiln::Tensor(kiln::DType::f32, {8, 3, 3, 3}));
  kiln::CompiledModel trunk = kiln::compile(t.build({t.relu(t.conv2d(x, w, std::nullopt, {.padding = {1, 1, 1, 1}}))}));
  kiln::Builder h("head");
  auto f = h.input("features", kiln::DType::f32, {1, 8, 32, 32});
  kiln::CompiledModel head = kiln::compile(h.build({h.global_avg_pool(f)}));

  kiln::PendingCall call = trunk.submit({kiln::Tensor(kiln::DType::f32, {1, 3, 32, 32})});  // returns at once
  // ... other work while the trunk runs on its own thread ...
  std::vector<kiln::DeviceTensor> features = call.wait();             // still on the device
  kiln::Tensor pooled = head.call_on_device({features[0]})[0].to_host();  // the one download
  std::cout << pooled.shape()[1] << " channels; the head uploaded " << head.stats().uploaded_bytes << " bytes\n";
}
