// load_onnx without ONNX support (meson -Donnx=disabled, or libonnx-dev missing).
#include <kiln/onnx.h>

namespace kiln {

namespace {
[[noreturn]] void no_onnx() {
  throw_error(ErrorKind::Unsupported, "kiln was built without ONNX support (install libonnx-dev and libprotobuf-dev, "
                                      "then reconfigure with -Donnx=enabled)");
}
}  // namespace

Model load_onnx(const std::string&, const OnnxOptions&) { no_onnx(); }
Model load_onnx_bytes(std::string_view, const std::string&, const std::string&, const OnnxOptions&) { no_onnx(); }
Tensor load_onnx_tensor(const std::string&) { no_onnx(); }
std::vector<std::string> onnx_supported_ops() { return {}; }

}  // namespace kiln
