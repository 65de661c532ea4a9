// What a kiln::DeviceTensor holds: a buffer of its own on a device from the
// pool (device_pool.h), or, for a value only the host has, a host tensor.
#pragma once

#include <kiln/kiln.h>

#include "backends/backend.h"
#include "src/runtime/device_pool.h"

#include <memory>
#include <optional>
#include <string>

namespace kiln {

struct DeviceTensorData {
  DType dtype = DType::f32;
  Shape shape{0};
  // On a device: the device and a buffer that holds exactly the tensor's bytes from offset 0.
  std::shared_ptr<runtime::DeviceContext> device;
  std::shared_ptr<backend::Buffer> buffer;
  // On the host only (device is null).
  std::optional<Tensor> host;

  static DeviceTensor wrap(std::shared_ptr<const DeviceTensorData> data);
  static const DeviceTensorData& of(const DeviceTensor& tensor) { return *tensor.data_; }
};

// A copy of `tensor` on `device`, in a buffer of its own.
DeviceTensor make_device_tensor(const std::shared_ptr<runtime::DeviceContext>& device, const Tensor& tensor);
// A DeviceTensor holding a host tensor (shared, not copied).
DeviceTensor make_host_device_tensor(Tensor tensor);

}  // namespace kiln
