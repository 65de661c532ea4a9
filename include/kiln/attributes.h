// kiln::Attributes: an op's ONNX-style attributes (ints, floats, strings and
// lists of ints or floats), for Builder::op and kiln::op (trace.h), which
// take any registered op by its ONNX name.
//
//   kiln::Attributes attrs;
//   attrs.set("axes", std::vector<std::int64_t>{1});
//   attrs.set("keepdims", std::int64_t{0});
//   kiln::Builder::Value mean = b.op("ReduceMean", {x}, attrs)[0];
//
// Inputs that ONNX gives some ops as tensors but that must be constants for
// static compilation (Reshape's shape, Slice's starts, Resize's sizes, ...)
// are attributes here; docs/architecture.md lists them.
#pragma once

#include <kiln/export.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <variant>
#include <vector>

namespace kiln {

using Attribute = std::variant<std::int64_t, double, std::string, std::vector<std::int64_t>, std::vector<double>>;

class KILN_API Attributes {
 public:
  void set(const std::string& name, Attribute value) { map_[name] = std::move(value); }
  bool has(const std::string& name) const { return map_.count(name) != 0; }
  // Getters throw InvalidArgument naming the attribute if it has another type.
  std::int64_t get_int(const std::string& name, std::int64_t fallback) const;
  double get_float(const std::string& name, double fallback) const;
  std::string get_string(const std::string& name, const std::string& fallback) const;
  std::vector<std::int64_t> get_ints(const std::string& name, std::vector<std::int64_t> fallback) const;
  const std::map<std::string, Attribute>& all() const { return map_; }
  bool operator==(const Attributes&) const = default;

 private:
  std::map<std::string, Attribute> map_;
};

}  // namespace kiln
