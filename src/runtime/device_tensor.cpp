// kiln::DeviceTensor and kiln::PendingCall.
#include "src/runtime/device_tensor.h"

#include "src/base/check.h"

namespace kiln {

DeviceTensor DeviceTensorData::wrap(std::shared_ptr<const DeviceTensorData> data) {
  DeviceTensor tensor;
  tensor.data_ = std::move(data);
  return tensor;
}

DeviceTensor make_device_tensor(const std::shared_ptr<runtime::DeviceContext>& device, const Tensor& tensor) {
  auto data = std::make_shared<DeviceTensorData>();
  data->dtype = tensor.dtype();
  data->shape = tensor.shape();
  data->device = device;
  data->buffer = device->device->allocate(tensor.nbytes());
  if (tensor.nbytes() > 0) device->device->upload(*data->buffer, 0, tensor.bytes());
  return DeviceTensorData::wrap(std::move(data));
}

DeviceTensor make_host_device_tensor(Tensor tensor) {
  auto data = std::make_shared<DeviceTensorData>();
  data->dtype = tensor.dtype();
  data->shape = tensor.shape();
  data->host = std::move(tensor);
  return DeviceTensorData::wrap(std::move(data));
}

DeviceTensor::DeviceTensor() {
  static const std::shared_ptr<const DeviceTensorData> empty = [] {
    auto data = std::make_shared<DeviceTensorData>();
    data->host = Tensor();
    return data;
  }();
  data_ = empty;
}

DType DeviceTensor::dtype() const { return data_->dtype; }
const Shape& DeviceTensor::shape() const { return data_->shape; }
std::size_t DeviceTensor::nbytes() const { return static_cast<std::size_t>(num_elements(data_->shape)) * dtype_size(data_->dtype); }
bool DeviceTensor::on_device() const { return data_->device != nullptr; }
std::string DeviceTensor::device() const { return data_->device ? data_->device->label() : "host"; }

Tensor DeviceTensor::to_host() const {
  if (!data_->device) return data_->host->clone();
  Tensor tensor(data_->dtype, data_->shape);
  if (tensor.nbytes() > 0) data_->device->device->download(*data_->buffer, 0, tensor.bytes());
  return tensor;
}

std::vector<DeviceTensor> PendingCall::wait() const {
  KILN_CHECK(result_.valid(), ErrorKind::InvalidArgument, "wait() on a PendingCall that holds no call");
  return result_.get();
}

bool PendingCall::ready() const {
  KILN_CHECK(result_.valid(), ErrorKind::InvalidArgument, "ready() on a PendingCall that holds no call");
  return result_.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

}  // namespace kiln
