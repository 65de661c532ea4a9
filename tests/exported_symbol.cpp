#include "exported_symbol.h"

#include <cxxabi.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <cstdlib>
#include <memory>
#include <vector>

namespace exported_symbol {
namespace {

// Namespaces under kiln:: that are implementation, and the internal classes
// the public headers name in friend declarations.
constexpr std::array<std::string_view, 17> kInternalScopes{
    "graph",  "backend",  "runtime",  "tune",        "lower", "fuse",     "kir",      "render",           "shaders",
    "artifact", "compiler", "trace", "internal", "onnx_import", "tools", "Executor", "DeviceTensorData"};
// kiln::models is public, kiln::models::init (the zoo's weight fillers) is not.
constexpr std::string_view kInternalModelsScope = "init";
// Libraries kiln compiles in or links whose types must not reach libkiln's
// exports inside a standard-library template either.
constexpr std::array<std::string_view, 12> kForeignNamespaces{
    "glslang::", "spvtools::", "spv::",   "shaderc", "nlohmann::",        "CLI::",
    "fmt::",     "spdlog::",   "boost::", "onnx::",  "google::protobuf::", "XXH"};
constexpr std::array<std::string_view, 5> kHousekeeping{"_init", "_fini", "__bss_start", "_edata", "_end"};

std::string demangle(const std::string& mangled) {
  int status = 0;
  std::unique_ptr<char, decltype(&std::free)> text(abi::__cxa_demangle(mangled.c_str(), nullptr, nullptr, &status),
                                                   &std::free);
  return status == 0 && text ? std::string(text.get()) : mangled;
}

bool at_char(std::string_view text, std::size_t at, char c) { return at < text.size() && text[at] == c; }

// <number>: an optional 'n' (negative), then digits.
void skip_number(std::string_view text, std::size_t& at) {
  if (at_char(text, at, 'n')) ++at;
  while (at < text.size() && std::isdigit(static_cast<unsigned char>(text[at]))) ++at;
}

// <call-offset>: h <number> _ | v <number> _ <number> _ (a thunk's adjustment).
void skip_call_offset(std::string_view text, std::size_t& at) {
  const bool is_virtual = at_char(text, at, 'v');
  ++at;
  skip_number(text, at);
  if (at_char(text, at, '_')) ++at;
  if (is_virtual) {
    skip_number(text, at);
    if (at_char(text, at, '_')) ++at;
  }
}

// <source-name>: its length, then the identifier; empty (and `at` kept) if none.
std::string_view source_name(std::string_view text, std::size_t& at) {
  std::size_t length = 0;
  std::size_t end = at;
  while (end < text.size() && std::isdigit(static_cast<unsigned char>(text[end])))
    length = length * 10 + static_cast<std::size_t>(text[end++] - '0');
  if (end == at || length == 0 || end + length > text.size()) return {};
  at = end + length;
  return text.substr(end, length);
}

// std's own abbreviations: St (std::), Sa (std::allocator), Sb, Ss, Si, So, Sd.
bool is_std_abbreviation(std::string_view text, std::size_t at) {
  return at_char(text, at, 'S') && at + 1 < text.size() && std::string_view("tabsiod").find(text[at + 1]) != std::string_view::npos;
}

// The namespaces and classes a <name> starts with, outermost first: {"kiln",
// "graph", "Graph"}, {"std"}, {"ShCompile"}; empty for a builtin type.
std::vector<std::string_view> scope_of_name(std::string_view text, std::size_t at) {
  // A local entity (a function's static, its guard variable) is its function's.
  if (at_char(text, at, 'Z')) return scope_of_name(text, at + 1);
  const bool nested = at_char(text, at, 'N');
  if (nested) {
    ++at;
    while (at < text.size() && std::string_view("rVKRO").find(text[at]) != std::string_view::npos) ++at;  // cv, ref
  }
  if (is_std_abbreviation(text, at)) return {"std"};
  std::vector<std::string_view> scope;
  for (std::string_view name = source_name(text, at); !name.empty(); name = source_name(text, at)) {
    scope.push_back(name);
    if (!nested) break;
  }
  return scope;
}

// The same for a whole mangled name after "_Z", through the special names
// that are about another entity: typeinfo, vtables, thunks, guard variables.
std::vector<std::string_view> scope_of_encoding(std::string_view text, std::size_t at) {
  const std::string_view two = text.substr(at, 2);
  if (two == "TV" || two == "TT" || two == "TI" || two == "TS" || two == "TC" || two == "TH" || two == "TW" ||
      two == "GV" || two == "GR")
    return scope_of_name(text, at + 2);
  if (two == "Th" || two == "Tv") {
    at += 1;
    skip_call_offset(text, at);
    return scope_of_encoding(text, at);
  }
  if (two == "Tc") {  // a covariant thunk: two adjustments
    at += 2;
    skip_call_offset(text, at);
    skip_call_offset(text, at);
    return scope_of_encoding(text, at);
  }
  if (two == "GT") return scope_of_encoding(text, at + 3);  // transaction clones: GTt, GTn
  return scope_of_name(text, at);
}

bool mentions_any(std::string_view text, const std::vector<std::string>& parts) {
  return std::any_of(parts.begin(), parts.end(), [&](const std::string& part) { return text.find(part) != std::string_view::npos; });
}

const std::vector<std::string>& internal_scope_texts() {
  static const std::vector<std::string> texts = [] {
    std::vector<std::string> result;
    for (std::string_view scope : kInternalScopes) result.push_back("kiln::" + std::string(scope));
    result.push_back("kiln::models::" + std::string(kInternalModelsScope));
    for (std::string& text : result) text += "::";
    // A class itself, as a template argument: std::shared_ptr<kiln::Executor>.
    result.push_back("kiln::Executor");
    result.push_back("kiln::DeviceTensorData");
    return result;
  }();
  return texts;
}

}  // namespace

std::string_view owner_name(Owner owner) {
  switch (owner) {
    case Owner::kiln_public: return "kiln's public API";
    case Owner::kiln_internal: return "kiln's internals";
    case Owner::standard_library: return "the standard library";
    case Owner::elf_housekeeping: return "ELF housekeeping";
    case Owner::foreign: return "another library";
  }
  return "?";
}

Symbol classify(std::string_view mangled) {
  const std::string name(mangled.substr(0, mangled.find('@')));
  Symbol symbol{demangle(name), Owner::foreign};
  if (!name.starts_with("_Z")) {
    if (std::find(kHousekeeping.begin(), kHousekeeping.end(), name) != kHousekeeping.end())
      symbol.owner = Owner::elf_housekeeping;
    return symbol;
  }
  // A standard template, or the typeinfo of a type made of builtin ones
  // (`double (*)(double)`, a std::function's target type), is kiln's
  // internals, or another library's, when what it is made of is.
  const auto by_what_it_names = [&] {
    static const std::vector<std::string> foreign(kForeignNamespaces.begin(), kForeignNamespaces.end());
    if (mentions_any(symbol.demangled, internal_scope_texts())) return Owner::kiln_internal;
    if (mentions_any(symbol.demangled, foreign)) return Owner::foreign;
    return Owner::standard_library;
  };
  const std::vector<std::string_view> scope = scope_of_encoding(name, 2);
  const bool type_information = name.starts_with("_ZTI") || name.starts_with("_ZTS");
  if (scope.empty()) {
    if (type_information) symbol.owner = by_what_it_names();
    return symbol;
  }
  if (scope[0] == "kiln") {
    const bool internal =
        scope.size() >= 2 &&
        (std::find(kInternalScopes.begin(), kInternalScopes.end(), scope[1]) != kInternalScopes.end() ||
         (scope[1] == "models" && scope.size() >= 3 && scope[2] == kInternalModelsScope));
    // A public class's member may name an internal type in its parameters
    // (Model's private constructor takes the graph): it is the public
    // class's symbol, so only the scope counts.
    symbol.owner = internal ? Owner::kiln_internal : Owner::kiln_public;
  } else if (scope[0] == "std" || scope[0] == "__gnu_cxx") {
    symbol.owner = by_what_it_names();
  }
  return symbol;
}

}  // namespace exported_symbol
