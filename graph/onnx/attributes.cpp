#include "graph/onnx/attributes.h"

#include "graph/onnx/limits.h"
#include "src/base/check.h"

namespace kiln::onnx_import {

graph::Attributes convert_attributes(const onnx::NodeProto& node, const std::string& what) {
  graph::Attributes attrs;
  for (const onnx::AttributeProto& a : node.attribute()) {
    check_string(a.name(), what);
    const std::string name_what = what + "attribute '" + a.name() + "': ";
    KILN_CHECK(a.ref_attr_name().empty(), ErrorKind::Unsupported,
               name_what + "references to function attributes are not supported");
    switch (a.type()) {
      case onnx::AttributeProto_AttributeType_INT: attrs.set(a.name(), std::int64_t{a.i()}); break;
      case onnx::AttributeProto_AttributeType_FLOAT: attrs.set(a.name(), static_cast<double>(a.f())); break;
      case onnx::AttributeProto_AttributeType_STRING:
        check_string(a.s(), name_what);
        attrs.set(a.name(), a.s());
        break;
      case onnx::AttributeProto_AttributeType_INTS:
        attrs.set(a.name(), std::vector<std::int64_t>(a.ints().begin(), a.ints().end()));
        break;
      case onnx::AttributeProto_AttributeType_FLOATS: {
        std::vector<double> values(a.floats().begin(), a.floats().end());
        attrs.set(a.name(), std::move(values));
        break;
      }
      case onnx::AttributeProto_AttributeType_STRINGS:
        // Only the recurrent layers' activations, which their rule reads from the node.
        KILN_CHECK(node.op_type() == "LSTM" || node.op_type() == "GRU" || node.op_type() == "RNN",
                   ErrorKind::Unsupported, name_what + "attributes of type STRINGS are not supported");
        for (const std::string& s : a.strings()) check_string(s, name_what);
        break;
      case onnx::AttributeProto_AttributeType_TENSOR: break;  // read by the rules that take one
      case onnx::AttributeProto_AttributeType_GRAPH: break;   // If's branches, read by its rule
      default:
        throw_error(ErrorKind::Unsupported, name_what + "attributes of type " +
                                                onnx::AttributeProto_AttributeType_Name(a.type()) +
                                                " are not supported");
    }
  }
  return attrs;
}

const onnx::TensorProto* tensor_attribute(const onnx::NodeProto& node, const std::string& name) {
  for (const onnx::AttributeProto& a : node.attribute())
    if (a.name() == name && a.type() == onnx::AttributeProto_AttributeType_TENSOR) return &a.t();
  return nullptr;
}

}  // namespace kiln::onnx_import
