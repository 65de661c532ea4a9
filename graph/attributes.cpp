// kiln::Attributes (include/kiln/attributes.h): typed reads.
#include <kiln/attributes.h>

#include <kiln/error.h>

#include <string_view>

namespace kiln {

namespace {

std::string_view attribute_type_name(const Attribute& value) {
  switch (value.index()) {
    case 0:
      return "int";
    case 1:
      return "float";
    case 2:
      return "string";
    case 3:
      return "ints";
    case 4:
      return "floats";
  }
  return "?";
}

[[noreturn]] void throw_wrong_type(const std::string& name, const Attribute& value, std::string_view wanted) {
  throw_error(ErrorKind::InvalidArgument, "attribute '" + name + "' is " + std::string(attribute_type_name(value)) +
                                              ", expected " + std::string(wanted));
}

}  // namespace

std::int64_t Attributes::get_int(const std::string& name, std::int64_t fallback) const {
  auto it = map_.find(name);
  if (it == map_.end()) return fallback;
  if (const auto* v = std::get_if<std::int64_t>(&it->second)) return *v;
  throw_wrong_type(name, it->second, "int");
}

double Attributes::get_float(const std::string& name, double fallback) const {
  auto it = map_.find(name);
  if (it == map_.end()) return fallback;
  if (const auto* v = std::get_if<double>(&it->second)) return *v;
  // An int literal (alpha=1) is a float attribute written carelessly, not an error.
  if (const auto* v = std::get_if<std::int64_t>(&it->second)) return static_cast<double>(*v);
  throw_wrong_type(name, it->second, "float");
}

std::string Attributes::get_string(const std::string& name, const std::string& fallback) const {
  auto it = map_.find(name);
  if (it == map_.end()) return fallback;
  if (const auto* v = std::get_if<std::string>(&it->second)) return *v;
  throw_wrong_type(name, it->second, "string");
}

std::vector<std::int64_t> Attributes::get_ints(const std::string& name, std::vector<std::int64_t> fallback) const {
  auto it = map_.find(name);
  if (it == map_.end()) return fallback;
  if (const auto* v = std::get_if<std::vector<std::int64_t>>(&it->second)) return *v;
  throw_wrong_type(name, it->second, "ints");
}

}  // namespace kiln
