// The C-style renderer core. Operators, statements and the guard are C syntax
// shared by every target; everything else comes from the LanguageTable.
#include "src/render/cstyle.h"

#include "src/base/check.h"
#include "src/kernel/f16_arithmetic.h"

#include <kiln/error.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <limits>
#include <set>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln::render {
namespace {

using backend::LanguageTable;
using kir::BinaryOp;
using kir::Expr;
using kir::ExprKind;
using kir::ExprNode;
using kir::ScalarType;
using kir::Stmt;
using kir::StmtKind;
using kir::UnaryOp;

struct Placeholder {
  std::string_view key;
  std::string_view value;
};

// Names the renderer gives IR names (see cstyle.h).
std::string buffer_identifier(const std::string& name) { return "b_" + name; }
std::string var_identifier(const std::string& name) { return "v_" + name; }
std::string shared_identifier(const std::string& name) { return "s_" + name; }
// A buffer's vector view of width w (GLSL declares it as a second block).
std::string vector_view_identifier(const std::string& name, std::size_t width) {
  return "kiln_v" + std::to_string(width) + "_" + name;
}
// Component names of GLSL and CUDA/HIP vector types alike.
constexpr const char* kVectorComponents[] = {".x", ".y", ".z", ".w"};
constexpr std::string_view kLinearIndex = "kiln_linear";
constexpr std::string_view kGlobalIndex = "kiln_gid";
constexpr std::string_view kLocalIndex = "kiln_lid";
constexpr std::string_view kWorkgroupIndex = "kiln_group";

bool uses(const Expr& e, ExprKind kind) {
  if (e->kind == kind) return true;
  for (const Expr& arg : e->args)
    if (uses(arg, kind)) return true;
  return false;
}

bool uses(const std::vector<Stmt>& stmts, ExprKind kind) {
  for (const Stmt& s : stmts) {
    for (const Expr* e : {&s.value, &s.index, &s.begin, &s.end})
      if (*e && uses(*e, kind)) return true;
    for (const Expr& e : s.values)
      if (uses(e, kind)) return true;
    if (uses(s.body, kind) || uses(s.else_body, kind)) return true;
  }
  return false;
}

bool has_type(const Expr& e, ScalarType type) {
  if (e->type == type) return true;
  for (const Expr& arg : e->args)
    if (has_type(arg, type)) return true;
  return false;
}

bool has_type(const std::vector<Stmt>& stmts, ScalarType type) {
  for (const Stmt& s : stmts) {
    if ((s.kind == StmtKind::declare || s.kind == StmtKind::load_vector) && s.type == type) return true;
    for (const Expr* e : {&s.value, &s.index, &s.begin, &s.end})
      if (*e && has_type(*e, type)) return true;
    for (const Expr& e : s.values)
      if (has_type(e, type)) return true;
    if (has_type(s.body, type) || has_type(s.else_body, type)) return true;
  }
  return false;
}

// Whether any buffer, variable or expression of `kernel` has type `type`.
bool uses_type(const kir::Kernel& kernel, ScalarType type) {
  for (const kir::BufferParam& b : kernel.buffers)
    if (b.type == type) return true;
  return has_type(kernel.body, type);
}

bool has_bool_buffer(const kir::Kernel& kernel) {
  return std::any_of(kernel.buffers.begin(), kernel.buffers.end(),
                     [](const kir::BufferParam& b) { return b.type == ScalarType::boolean; });
}

// Whether a storage buffer (not a texel view) holds 16-bit elements.
bool has_16bit_buffer(const kir::Kernel& kernel) {
  return std::any_of(kernel.buffers.begin(), kernel.buffers.end(),
                     [](const kir::BufferParam& b) { return kir::is_storage_only(b.type) && b.texel_width == 0; });
}

// Whether a fragment's multiply inputs are f16 or bf16: emulating it rounds
// through the language's 16-bit conversions, so it needs them as a 16-bit
// buffer does.
bool has_16bit_fragment(const kir::Kernel& kernel) {
  return std::any_of(kernel.fragments.begin(), kernel.fragments.end(), [](const kir::Fragment& f) {
    return f.role != kir::FragmentRole::accumulator && f.precision != kir::MatrixPrecision::tf32;
  });
}

bool needs_storage16(const kir::Kernel& kernel) { return has_16bit_buffer(kernel) || has_16bit_fragment(kernel); }

// (buffer, width) of every vector load and store in `stmts`.
void collect_vector_views(const std::vector<Stmt>& stmts, std::set<std::pair<int, std::size_t>>& views) {
  for (const Stmt& s : stmts) {
    if (s.kind == StmtKind::load_vector) views.insert({s.buffer, s.vars.size()});
    if (s.kind == StmtKind::store_vector) views.insert({s.buffer, s.values.size()});
    collect_vector_views(s.body, views);
    collect_vector_views(s.else_body, views);
  }
}

class Renderer {
 public:
  Renderer(const kir::Kernel& kernel, const LanguageTable& language) : kernel_(kernel), lang_(language) {}

  std::string run() {
    const bool subgroups = kir::uses_subgroup_ops(kernel_);
    std::string out = lang_.version_directive;
    if (subgroups) out += lang_.subgroup_directives;
    if (uses_type(kernel_, ScalarType::i64)) out += lang_.int64_directives;
    if (has_bool_buffer(kernel_)) out += lang_.storage8_directives;
    const bool storage16 = needs_storage16(kernel_);
    if (storage16) out += lang_.storage16_directives;
    const bool f16_values = kir::uses_f16_arithmetic(kernel_);
    if (f16_values && native_f16_arithmetic()) out += lang_.f16_arithmetic_directives;
    out += lang_.prelude;
    if (!out.empty() && out.back() != '\n') out += '\n';
    if (uses_type(kernel_, ScalarType::i64)) out += lang_.int64_helpers;
    // Emulated f16 arithmetic rounds with f16_round, which the helpers define.
    if (storage16 || (f16_values && !native_f16_arithmetic())) out += lang_.storage16_helpers;
    for (const backend::MatrixInstruction* instruction : instructions_used()) out += instruction->helpers;
    // A parameterised kernel's source is shared by every instance: nothing
    // instance-specific (the global size) may appear in it.
    const std::string global_size = kernel_.global_size_param ? "from its parameters"
                                                              : std::to_string(kernel_.global_size);
    out += "// kiln kernel " + kernel_.name + ": global_size " + global_size + ", workgroup_size " +
           std::to_string(kernel_.workgroup_size) +
           (kernel_.subgroup_size ? ", subgroup_size " + std::to_string(kernel_.subgroup_size) : "") + "\n";
    // 16-bit texel buffers are named in the text, which identifies a kernel
    // (caches key on it): an f16 one may be spelled as an f32 one, its view not.
    for (const kir::BufferParam& b : kernel_.buffers)
      if (b.texel_width != 0 && b.type != ScalarType::f32)
        out += "// texel buffer " + buffer_identifier(b.name) + ": " + kir::scalar_type_name(b.type) + "\n";

    std::string params;
    auto add_param = [&](const std::string& p) {
      if (p.empty()) return;
      if (!params.empty()) params += ", ";
      params += p;
    };
    std::set<std::pair<int, std::size_t>> vector_views;
    collect_vector_views(kernel_.body, vector_views);
    for (std::size_t i = 0; i < kernel_.buffers.size(); ++i) {
      const kir::BufferParam& b = kernel_.buffers[i];
      const std::string binding = std::to_string(i);
      const std::string name = buffer_identifier(b.name);
      const std::string& type = storage_type_name(b.type);
      const std::string readonly = readonly_text(static_cast<int>(i));
      if (b.texel_width != 0) {
        const std::string width = std::to_string(b.texel_width);
        const std::initializer_list<Placeholder> texel = {{"binding", binding}, {"name", name}, {"width", width}};
        if (texel_bf16(b))
          out += format(lang_.texel_bf16_global_decl, "texel_bf16_global_decl", texel) + "\n";
        else if (!lang_.texel_buffer_global_decl.empty())
          out += format(lang_.texel_buffer_global_decl, "texel_buffer_global_decl", texel) + "\n";
        else
          add_param(format(lang_.texel_buffer_param_decl, "texel_buffer_param_decl", texel));
        continue;
      }
      const std::initializer_list<Placeholder> fields = {
          {"binding", binding}, {"name", name}, {"type", type}, {"readonly", readonly}};
      if (!lang_.buffer_global_decl.empty())
        out += format(lang_.buffer_global_decl, "buffer_global_decl", fields) + "\n";
      if (!lang_.buffer_param_decl.empty()) add_param(format(lang_.buffer_param_decl, "buffer_param_decl", fields));
      if (lang_.buffer_vector_global_decl.empty() || lang_.vector_f32.empty()) continue;
      if (kir::is_storage_only(b.type) && lang_.vector_u16.empty()) continue;
      for (const auto& [buffer, width] : vector_views) {
        if (buffer != static_cast<int>(i)) continue;
        const std::string w = std::to_string(width);
        out += format(lang_.buffer_vector_global_decl, "buffer_vector_global_decl",
                      {{"binding", binding},
                       {"view", vector_view_identifier(b.name, width)},
                       {"vector_type", storage_vector_type_name(b.type, width)},
                       {"readonly", readonly},
                       {"width", w}}) +
               "\n";
      }
    }
    if (!kernel_.params.empty()) {
      std::string members;
      for (std::size_t i = 0; i < kernel_.params.size(); ++i)
        members += (i ? " " : "") + type_name(ScalarType::i32) + " p" + std::to_string(i) + ";";
      if (!lang_.params_global_decl.empty())
        out += format(lang_.params_global_decl, "params_global_decl", {{"members", members}}) + "\n";
      if (!lang_.params_param_decl.empty()) add_param(format(lang_.params_param_decl, "params_param_decl", {}));
    }
    for (const kir::SharedArray& a : kernel_.shared) {
      const std::string count = std::to_string(a.count);
      const std::string name = shared_identifier(a.name);
      const std::initializer_list<Placeholder> fields = {{"type", type_name(a.type)}, {"name", name}, {"count", count}};
      if (!lang_.shared_global_decl.empty())
        out += format(lang_.shared_global_decl, "shared_global_decl", fields) + "\n";
      else if (!lang_.shared_param_decl.empty())
        add_param(format(lang_.shared_param_decl, "shared_param_decl", fields));
      else if (lang_.shared_local_decl.empty())
        table_error("the language table has no spelling for shared arrays");
    }
    const bool barriers = kir::has_barrier(kernel_);
    if (barriers && !lang_.barrier_global_decl.empty()) out += lang_.barrier_global_decl + "\n";
    auto has_texel4 = [&](bool bf16) {
      return std::any_of(kernel_.buffers.begin(), kernel_.buffers.end(),
                         [&](const kir::BufferParam& b) { return b.texel_width == 4 && texel_bf16(b) == bf16; });
    };
    if (has_texel4(false) && !lang_.texel_global_helpers.empty()) out += lang_.texel_global_helpers + "\n";
    if (has_texel4(true) && !lang_.texel_bf16_global_helpers.empty()) out += lang_.texel_bf16_global_helpers + "\n";
    // Subgroup operations need whole subgroups, so such kernels run whole
    // workgroups and guard as kernels with barriers do.
    const bool whole_groups = barriers || subgroups || !kernel_.fragments.empty();
    add_param(lang_.extra_params);

    const std::string wg = std::to_string(kernel_.workgroup_size);
    out += format(lang_.kernel_header, "kernel_header", {{"name", kernel_.name}, {"params", params}, {"wg", wg}});
    out += " {\n";
    const std::vector<std::uint64_t> dynamic_offsets = dynamic_shared(kernel_, lang_).offsets;
    if (!dynamic_offsets.empty()) {
      out += "  " + lang_.shared_dynamic_decl + "\n";
      for (std::size_t i = 0; i < kernel_.shared.size(); ++i) {
        const kir::SharedArray& a = kernel_.shared[i];
        out += "  " +
               format(lang_.shared_dynamic_view, "shared_dynamic_view",
                      {{"type", type_name(a.type)}, {"name", shared_identifier(a.name)},
                       {"offset", std::to_string(dynamic_offsets[i])}}) +
               "\n";
      }
    } else if (lang_.shared_global_decl.empty() && lang_.shared_param_decl.empty()) {
      for (const kir::SharedArray& a : kernel_.shared)
        out += "  " +
               format(lang_.shared_local_decl, "shared_local_decl",
                      {{"type", type_name(a.type)}, {"name", shared_identifier(a.name)},
                       {"count", std::to_string(a.count)}}) +
               "\n";
    }
    out += "  " + type_name(ScalarType::u32) + " " + std::string(kLinearIndex) + " = " +
           format(lang_.global_index_expr, "global_index_expr", {{"wg", wg}}) + ";\n";
    const bool group_used = whole_groups || uses(kernel_.body, ExprKind::workgroup_index);
    if (group_used)
      out += "  " + type_name(ScalarType::i32) + " " + std::string(kWorkgroupIndex) + " = " +
             format(lang_.workgroup_index_expr, "workgroup_index_expr", {{"wg", wg}}) + ";\n";
    if (whole_groups) {
      // verify() made global_size a multiple of the workgroup size, so the
      // guard leaves whole workgroups (the 2-D grid's spare ones): a return
      // that is uniform across the group, before any barrier.
      const std::string groups =
          kernel_.global_size_param
              ? "(" + param_text(*kernel_.global_size_param) + " / " + wg + ")"
              : std::to_string(kernel_.global_size / static_cast<std::int64_t>(kernel_.workgroup_size));
      out += "  if (" + std::string(kWorkgroupIndex) + " >= " + groups + ") return;\n";
    } else {
      const std::string guard = kernel_.global_size_param
                                    ? cast_text(ScalarType::u32, param_text(*kernel_.global_size_param))
                                    : std::to_string(kernel_.global_size) + "u";
      out += "  if (" + std::string(kLinearIndex) + " >= " + guard + ") return;\n";
    }
    if (uses(kernel_.body, ExprKind::global_index)) {
      out += "  " + type_name(ScalarType::i32) + " " + std::string(kGlobalIndex) + " = " +
             cast_text(ScalarType::i32, std::string(kLinearIndex)) + ";\n";
    }
    if (uses(kernel_.body, ExprKind::local_index))
      out += "  " + type_name(ScalarType::i32) + " " + std::string(kLocalIndex) + " = " +
             format(lang_.local_index_expr, "local_index_expr", {{"wg", wg}}) + ";\n";
    declare_fragments(out);
    block(kernel_.body, 1, out);
    out += "}\n";
    return out;
  }

 private:
  [[noreturn]] void table_error(const std::string& problem) const {
    throw_error(ErrorKind::Internal, "rendering kernel '" + kernel_.name + "' as " + lang_.name + ": " + problem);
  }

  // Substitutes {key} placeholders; "{{" and "}}" stand for literal braces.
  std::string format(std::string_view pattern, const char* field, std::initializer_list<Placeholder> values) const {
    if (pattern.empty()) table_error(std::string("the language table has no '") + field + "' spelling");
    std::string out;
    out.reserve(pattern.size() + 32);
    for (std::size_t i = 0; i < pattern.size(); ++i) {
      const char c = pattern[i];
      if ((c == '{' || c == '}') && i + 1 < pattern.size() && pattern[i + 1] == c) {
        out += c;
        ++i;
      } else if (c == '{') {
        const std::size_t close = pattern.find('}', i);
        if (close == std::string_view::npos) table_error(std::string("unclosed '{' in table field '") + field + "'");
        const std::string_view key = pattern.substr(i + 1, close - i - 1);
        const Placeholder* found = nullptr;
        for (const Placeholder& p : values)
          if (p.key == key) found = &p;
        if (!found)
          table_error(std::string("table field '") + field + "' uses unknown placeholder {" + std::string(key) + "}");
        out += found->value;
        i = close;
      } else {
        out += c;
      }
    }
    return out;
  }

  const std::string& type_name(ScalarType type) const {
    switch (type) {
      case ScalarType::f32: return lang_.type_f32;
      case ScalarType::i32: return lang_.type_i32;
      case ScalarType::u32: return lang_.type_u32;
      case ScalarType::boolean: return lang_.type_bool;
      case ScalarType::i64: return lang_.type_i64;
      case ScalarType::f16: return native_f16_arithmetic() ? lang_.type_f16 : lang_.type_f32;
      case ScalarType::bf16: break;
    }
    table_error("no value of storage type " + std::string(kir::scalar_type_name(type)));
  }

  // f16 arithmetic (kir's f16 values): in the language's 16-bit float type,
  // or, where it has none, in f32 values rounded to f16 after every op
  // (f16_round), which computes what kir defines.
  bool native_f16_arithmetic() const { return !lang_.type_f16.empty(); }

  // An f32 value `a` as an f16 value, and back.
  std::string f16_value(const std::string& a) const {
    return native_f16_arithmetic() ? cast_text(ScalarType::f16, a) : call(lang_.f16_round, "f16_round", a);
  }
  std::string f32_value_of_f16(const std::string& a) const {
    return native_f16_arithmetic() ? cast_text(ScalarType::f32, a) : a;
  }

  // How a buffer declares its elements of `type`.
  const std::string& storage_type_name(ScalarType type) const {
    switch (type) {
      case ScalarType::boolean: return lang_.bool_storage;
      case ScalarType::f16: return lang_.f16_storage;
      case ScalarType::bf16: return lang_.bf16_storage;
      default: return type_name(type);
    }
  }

  // A loaded element `element` of a buffer of `type` as a value.
  std::string from_storage(ScalarType type, const std::string& element) const {
    switch (type) {
      case ScalarType::boolean: return call(lang_.bool_from_storage, "bool_from_storage", element);
      case ScalarType::f16: return call(lang_.f16_from_storage, "f16_from_storage", element);
      case ScalarType::bf16: return call(lang_.bf16_from_storage, "bf16_from_storage", element);
      default: return element;
    }
  }

  // A value to store into a buffer of `type`.
  std::string to_storage(ScalarType type, const std::string& value) const {
    switch (type) {
      case ScalarType::boolean: return call(lang_.bool_to_storage, "bool_to_storage", value);
      case ScalarType::f16: return call(lang_.f16_to_storage, "f16_to_storage", value);
      case ScalarType::bf16: return call(lang_.bf16_to_storage, "bf16_to_storage", value);
      default: return value;
    }
  }

  // A float rounded to a 16-bit type's bits (a component of vector_u16_value).
  std::string to_bits(ScalarType type, const std::string& value) const {
    if (type == ScalarType::f16) return call(lang_.f16_to_bits, "f16_to_bits", value);
    return call(lang_.bf16_to_bits, "bf16_to_bits", value);
  }

  ScalarType buffer_type(int buffer) const { return kernel_.buffers[static_cast<std::size_t>(buffer)].type; }
  // What a load fetches before from_storage: a texel buffer's loads give f32
  // whatever its elements (the view or its spelling widens them).
  ScalarType loaded_type(int buffer) const {
    const kir::BufferParam& b = kernel_.buffers[static_cast<std::size_t>(buffer)];
    return b.texel_width != 0 ? ScalarType::f32 : b.type;
  }

  std::string readonly_text(int buffer) const {
    return kernel_.buffers[static_cast<std::size_t>(buffer)].access == kir::Access::read ? lang_.readonly_qualifier
                                                                                          : std::string();
  }

  // The vector type a buffer of `type` is read through: 16-bit buffers'
  // vectors hold their elements' bits (vector_u16), f16 ones the language's
  // f16 vectors where it has them (vector_f16).
  std::string storage_vector_type_name(ScalarType type, std::size_t width) const {
    if (type == ScalarType::f16 && native_f16_vectors())
      return format(lang_.vector_f16, "vector_f16", {{"width", std::to_string(width)}});
    if (kir::is_storage_only(type))
      return format(lang_.vector_u16, "vector_u16", {{"width", std::to_string(width)}});
    return vector_type_name(type, width);
  }

  bool native_f16_vectors() const { return !lang_.vector_f16.empty(); }

  std::string vector_type_name(ScalarType type, std::size_t width) const {
    const std::string w = std::to_string(width);
    switch (type) {
      case ScalarType::f32: return format(lang_.vector_f32, "vector_f32", {{"width", w}});
      case ScalarType::i32: return format(lang_.vector_i32, "vector_i32", {{"width", w}});
      case ScalarType::u32: return format(lang_.vector_u32, "vector_u32", {{"width", w}});
      case ScalarType::boolean:
      case ScalarType::i64:
      case ScalarType::f16:
      case ScalarType::bf16: break;
    }
    table_error("vector of unsupported type " + std::string(kir::scalar_type_name(type)));
  }

  // Element c of vector s.index (width elements each) of s.buffer, for a
  // language without vector types.
  std::string vector_element(const Stmt& s, std::size_t width, std::size_t c) const {
    auto constant = [&](std::size_t v) {
      const auto n = static_cast<std::int64_t>(v);
      return s.index.type() == ScalarType::u32 ? kir::u32(n) : kir::i32(n);
    };
    return buffer_element(s.buffer, s.index * constant(width) + constant(c));
  }

  // Vector s.index of s.buffer through its vector view (or its texel).
  std::string vector_access(const Stmt& s, const std::string& vector_type, std::size_t width) const {
    const kir::BufferParam& b = kernel_.buffers[static_cast<std::size_t>(s.buffer)];
    if (b.texel_width != 0)
      return format(texel_bf16(b) ? lang_.texel_bf16_vector_load : lang_.texel_vector_load, "texel_vector_load",
                    {{"name", buffer_identifier(b.name)}, {"vector_type", vector_type}, {"index", expr(s.index)}});
    return format(lang_.buffer_vector_access, "buffer_vector_access",
                  {{"name", buffer_identifier(b.name)},
                   {"view", vector_view_identifier(b.name, width)},
                   {"vector_type", vector_type},
                   {"readonly", readonly_text(s.buffer)},
                   {"index", expr(s.index)}});
  }

  // One vector load into a temporary, then a scalar per component; or, in a
  // language without vector types, one scalar load per component.
  void load_vector(const Stmt& s, const std::string& indent, std::string& out) const {
    const std::size_t width = s.vars.size();
    const ScalarType stored = loaded_type(s.buffer);
    if (lang_.vector_f32.empty() || (kir::is_storage_only(stored) && lang_.vector_u16.empty())) {
      for (std::size_t c = 0; c < width; ++c)
        out += indent + type_name(s.type) + " " + var_identifier(s.vars[c]) + " = " +
               from_storage(stored, vector_element(s, width, c)) + ";\n";
      return;
    }
    const std::string vector_type = storage_vector_type_name(stored, width);
    const std::string temp = "kiln_vec" + std::to_string(next_temporary_++);
    if (stored == ScalarType::f16 && native_f16_vectors()) {
      const std::string value_type = format(lang_.vector_f16_value, "vector_f16_value", {{"width", std::to_string(width)}});
      out += indent + value_type + " " + temp + " = " + value_type + "(" + vector_access(s, vector_type, width) + ");\n";
      for (std::size_t c = 0; c < width; ++c)
        out += indent + type_name(s.type) + " " + var_identifier(s.vars[c]) + " = " + temp + kVectorComponents[c] + ";\n";
      return;
    }
    if (kir::is_storage_only(stored)) {
      const std::string value_type = format(lang_.vector_u16_value, "vector_u16_value", {{"width", std::to_string(width)}});
      out += indent + value_type + " " + temp + " = " + value_type + "(" + vector_access(s, vector_type, width) + ");\n";
    } else {
      out += indent + vector_type + " " + temp + " = " + vector_access(s, vector_type, width) + ";\n";
    }
    for (std::size_t c = 0; c < width; ++c)
      out += indent + type_name(s.type) + " " + var_identifier(s.vars[c]) + " = " +
             from_storage(stored, temp + kVectorComponents[c]) + ";\n";
  }

  // One vector store of the values; or, in a language without vector types
  // (or without a way to build one), one scalar store per component.
  void store_vector(const Stmt& s, const std::string& indent, std::string& out) const {
    const std::size_t width = s.values.size();
    const ScalarType stored = buffer_type(s.buffer);
    const bool f16_vector = stored == ScalarType::f16 && native_f16_vectors();
    const bool bits_vector =
        kir::is_storage_only(stored) && !f16_vector && !lang_.vector_u16.empty() && !lang_.vector_u16_store.empty();
    if (lang_.vector_f32.empty() || lang_.vector_construct.empty() ||
        (kir::is_storage_only(stored) && !f16_vector && !bits_vector)) {
      for (std::size_t c = 0; c < width; ++c)
        out += indent + vector_element(s, width, c) + " = " + to_storage(stored, expr(s.values[c])) + ";\n";
      return;
    }
    const std::string w = std::to_string(width);
    // f32 values, or (bits_vector) their 16-bit bits, built into a vector.
    const std::string vector_type =
        bits_vector ? format(lang_.vector_u16_value, "vector_u16_value", {{"width", w}}) : vector_type_name(s.type, width);
    std::string components;
    for (std::size_t c = 0; c < width; ++c)
      components += (c ? ", " : "") + (bits_vector ? to_bits(stored, expr(s.values[c])) : expr(s.values[c]));
    std::string value =
        format(lang_.vector_construct, "vector_construct", {{"vector_type", vector_type}, {"components", components}});
    if (f16_vector) value = format(lang_.vector_f16_store, "vector_f16_store", {{"width", w}, {"a", value}});
    if (bits_vector) value = format(lang_.vector_u16_store, "vector_u16_store", {{"width", w}, {"a", value}});
    out += indent + vector_access(s, storage_vector_type_name(stored, width), width) + " = " + value + ";\n";
  }

  // ---- matrix fragments ---------------------------------------------------
  // A kernel whose subgroups are one lane holds each fragment in a local
  // array of its invocation and runs every fragment statement as loops
  // (the cpu backend's matrix units, and the reference for every target).
  // In subgroups of more lanes each lane holds its part of every tile, as
  // the language's matrix instruction for the fragment's shape lays it out,
  // and the multiply-add is that instruction.

  const kir::Fragment& fragment_of(const std::string& name) const {
    for (const kir::Fragment& f : kernel_.fragments)
      if (f.name == name) return f;
    table_error("undeclared fragment '" + name + "'");
  }

  static std::string fragment_array(const std::string& name) { return "kiln_frag_" + name; }

  bool emulated_fragments() const { return kernel_.subgroup_size == 1; }

  // The instruction that runs `f` (a multiply input: its precision and
  // shape; an accumulator: the first of its shape, as every instruction of
  // a shape lays accumulators out alike).
  const backend::MatrixInstruction& instruction_for(const kir::Fragment& f) const {
    const bool accumulator = f.role == kir::FragmentRole::accumulator;
    for (const backend::MatrixInstruction& ins : lang_.matrix_instructions)
      if (ins.shape.m == f.shape.m && ins.shape.n == f.shape.n && ins.shape.k == f.shape.k &&
          ins.shape.lanes == kernel_.subgroup_size &&
          (accumulator || ins.shape.inputs == kir::matrix_precision_name(f.precision)))
        return ins;
    std::string known;
    for (const backend::MatrixInstruction& ins : lang_.matrix_instructions)
      known += (known.empty() ? "" : ", ") + backend::matrix_shape_name(ins.shape);
    table_error("fragment '" + f.name + "' (" + (accumulator ? "accumulator" : kir::matrix_precision_name(f.precision)) +
                " " + std::to_string(f.shape.m) + "x" + std::to_string(f.shape.n) + "x" + std::to_string(f.shape.k) +
                " in subgroups of " + std::to_string(kernel_.subgroup_size) + " lanes): " + lang_.name +
                " has no matrix instruction for it (" + (known.empty() ? "it has none" : "it has " + known) +
                "; one-lane subgroups are emulated)");
  }

  // The instructions the kernel's multiply inputs use, each once, in declaration order.
  std::vector<const backend::MatrixInstruction*> instructions_used() const {
    std::vector<const backend::MatrixInstruction*> used;
    if (emulated_fragments()) return used;
    for (const kir::Fragment& f : kernel_.fragments) {
      if (f.role == kir::FragmentRole::accumulator) continue;
      const backend::MatrixInstruction* ins = &instruction_for(f);
      if (std::find(used.begin(), used.end(), ins) == used.end()) used.push_back(ins);
    }
    return used;
  }

  const backend::FragmentLayout& layout_of(const kir::Fragment& f) const {
    const backend::MatrixInstruction& ins = instruction_for(f);
    switch (f.role) {
      case kir::FragmentRole::a: return ins.a;
      case kir::FragmentRole::b: return ins.b;
      case kir::FragmentRole::accumulator: return ins.accumulator;
    }
    table_error("unknown fragment role");
  }

  // Elements of `f` each invocation holds.
  std::size_t fragment_elements(const kir::Fragment& f) const {
    if (emulated_fragments()) return static_cast<std::size_t>(kir::fragment_rows(f)) * kir::fragment_cols(f);
    return layout_of(f).row.size();
  }

  void declare_fragments(std::string& out) const {
    if (kernel_.fragments.empty()) return;
    for (const kir::Fragment& f : kernel_.fragments)
      out += "  " + type_name(ScalarType::f32) + " " + fragment_array(f.name) + "[" +
             std::to_string(fragment_elements(f)) + "];\n";
  }

  // `value` (an f32 lvalue, read more than once) rounded to `precision`.
  std::string rounded_input(const std::string& value, kir::MatrixPrecision precision) const {
    switch (precision) {
      case kir::MatrixPrecision::f16: return call(lang_.f16_round, "f16_round", value);
      case kir::MatrixPrecision::bf16: return call(lang_.bf16_round, "bf16_round", value);
      case kir::MatrixPrecision::tf32: {
        // Half of the dropped bits' unit added to the magnitude: ties away
        // from zero; a NaN is kept as it is.
        const std::string bits = call(lang_.float_to_bits, "float_to_bits", value);
        return "(((" + bits + " & 0x7fffffffu) > 0x7f800000u) ? " + value + " : " +
               call(lang_.bits_to_float, "bits_to_float", "((" + bits + " + 0x1000u) & 0xffffe000u)") + ")";
      }
    }
    return value;
  }

  // Element `index` (text) of the buffer or shared array a tile statement reads or writes.
  std::string tile_element(const Stmt& s, const std::string& index) const {
    if (s.shared_memory)
      return format(lang_.shared_access, "shared_access",
                    {{"name", shared_identifier(kernel_.shared[static_cast<std::size_t>(s.buffer)].name)}, {"index", index}});
    return format(lang_.buffer_access, "buffer_access",
                  {{"name", buffer_identifier(kernel_.buffers[static_cast<std::size_t>(s.buffer)].name)}, {"index", index}});
  }

  // The operands of a tile load or store, declared once per statement:
  // kiln_fx (index), kiln_fs (stride), kiln_fm and kiln_fn (rows and
  // columns in bounds).
  std::string tile_operands(const Stmt& s, const std::string& indent) const {
    return indent + type_name(ScalarType::i32) + " kiln_fx = " + expr(s.index) + ", kiln_fs = " + expr(s.values[0]) +
           ", kiln_fm = " + expr(s.values[1]) + ", kiln_fn = " + expr(s.values[2]) + ";\n";
  }

  // One element of a tile load or store, with kiln_fr and kiln_fc (its row
  // and column) in scope: stored where in bounds, or loaded (zero past the
  // bounds) and, for a multiply input, rounded to its precision.
  std::string tile_element_move(const Stmt& s, const kir::Fragment& f, const std::string& element,
                                const std::string& indent) const {
    const std::string at = s.column_major ? "kiln_fx + kiln_fc * kiln_fs + kiln_fr" : "kiln_fx + kiln_fr * kiln_fs + kiln_fc";
    const ScalarType stored = s.shared_memory ? ScalarType::f32 : buffer_type(s.buffer);
    const std::string in_tile = "kiln_fr < kiln_fm && kiln_fc < kiln_fn";
    if (s.kind == StmtKind::fragment_store)
      return indent + "if (" + in_tile + ") " + tile_element(s, at) + " = " + to_storage(stored, element) + ";\n";
    std::string text = indent + element + " = (" + in_tile + ") ? " + from_storage(stored, tile_element(s, at)) +
                       " : 0.0" + lang_.float_suffix + ";\n";
    if (f.role != kir::FragmentRole::accumulator)
      text += indent + element + " = " + rounded_input(element, f.precision) + ";\n";
    return text;
  }

  void emulated_fragment(const Stmt& s, const std::string& indent, std::string& out) const {
    const std::string i32 = type_name(ScalarType::i32);
    const kir::Fragment& f = fragment_of(s.var);
    const std::string rows = std::to_string(kir::fragment_rows(f)), cols = std::to_string(kir::fragment_cols(f));
    const std::string array = fragment_array(f.name);
    auto for_each = [&](const char* var, const std::string& count) {
      return "for (" + i32 + " " + var + " = 0; " + var + " < " + count + "; " + var + " += 1) ";
    };
    const std::string element = array + "[kiln_fr * " + cols + " + kiln_fc]";
    switch (s.kind) {
      case StmtKind::fragment_fill:
        out += indent + "{\n" + indent + "  " + type_name(ScalarType::f32) + " kiln_fv = " + expr(s.value) + ";\n";
        out += indent + "  " + for_each("kiln_fi", std::to_string(kir::fragment_rows(f) * kir::fragment_cols(f))) +
               array + "[kiln_fi] = kiln_fv;\n" + indent + "}\n";
        return;
      case StmtKind::fragment_load:
      case StmtKind::fragment_store:
        out += indent + "{\n" + tile_operands(s, indent + "  ");
        out += indent + "  " + for_each("kiln_fr", rows) + for_each("kiln_fc", cols) + "{\n";
        out += tile_element_move(s, f, element, indent + "    ");
        out += indent + "  }\n" + indent + "}\n";
        return;
      case StmtKind::fragment_mma: {
        // d may be c: each element of d reads only its own element of c first.
        const kir::Fragment& a = fragment_of(s.vars[0]);
        const std::string k = std::to_string(a.shape.k);
        const std::string n = std::to_string(a.shape.n);
        out += indent + for_each("kiln_fr", std::to_string(a.shape.m)) + for_each("kiln_fc", n) + "{\n";
        out += indent + "  " + type_name(ScalarType::f32) + " kiln_fsum = " + fragment_array(s.vars[2]) +
               "[kiln_fr * " + n + " + kiln_fc];\n";
        out += indent + "  " + for_each("kiln_fp", k) + "kiln_fsum += " + fragment_array(s.vars[0]) + "[kiln_fr * " + k +
               " + kiln_fp] * " + fragment_array(s.vars[1]) + "[kiln_fp * " + n + " + kiln_fc];\n";
        out += indent + "  " + array + "[kiln_fr * " + n + " + kiln_fc] = kiln_fsum;\n" + indent + "}\n";
        return;
      }
      default: table_error("not a fragment statement");
    }
  }

  // hi * kiln_fhi + lo * kiln_flo + offset, without zero terms: one coordinate of a layout.
  static std::string layout_coordinate(std::uint32_t hi, std::uint32_t lo, std::uint32_t offset) {
    std::string text;
    auto term = [&](std::uint32_t c, const char* name) {
      if (c == 0) return;
      if (!text.empty()) text += " + ";
      text += c == 1 ? std::string(name) : std::string(name) + " * " + std::to_string(c);
    };
    term(hi, "kiln_fhi");
    term(lo, "kiln_flo");
    if (offset != 0 || text.empty()) text += (text.empty() ? "" : " + ") + std::to_string(offset);
    return text;
  }

  // A fragment statement in subgroups of more lanes: each lane reads or
  // writes its own elements, where the instruction's layout puts them.
  void lane_fragment(const Stmt& s, const std::string& indent, std::string& out) const {
    const std::string i32 = type_name(ScalarType::i32);
    const kir::Fragment& f = fragment_of(s.var);
    const std::string array = fragment_array(f.name);
    switch (s.kind) {
      case StmtKind::fragment_fill:
        out += indent + "{\n" + indent + "  " + type_name(ScalarType::f32) + " kiln_fv = " + expr(s.value) + ";\n";
        for (std::size_t e = 0; e < fragment_elements(f); ++e)
          out += indent + "  " + array + "[" + std::to_string(e) + "] = kiln_fv;\n";
        out += indent + "}\n";
        return;
      case StmtKind::fragment_load:
      case StmtKind::fragment_store: {
        const backend::FragmentLayout& layout = layout_of(f);
        const std::uint32_t lane_bits = instruction_for(f).lane_bits;
        const std::string lane = subgroup_text(lang_.subgroup_lane_expr, "subgroup_lane_expr", {});
        out += indent + "{\n" + tile_operands(s, indent + "  ");
        out += indent + "  " + i32 + " kiln_flo = " + lane + " & " + std::to_string((1u << lane_bits) - 1) +
               ", kiln_fhi = " + lane + " >> " + std::to_string(lane_bits) + ";\n";
        for (std::size_t e = 0; e < layout.row.size(); ++e) {
          out += indent + "  {\n" + indent + "    " + i32 + " kiln_fr = " +
                 layout_coordinate(layout.row_hi, layout.row_lo, layout.row[e]) +
                 ", kiln_fc = " + layout_coordinate(layout.col_hi, layout.col_lo, layout.col[e]) + ";\n";
          out += tile_element_move(s, f, array + "[" + std::to_string(e) + "]", indent + "    ");
          out += indent + "  }\n";
        }
        out += indent + "}\n";
        return;
      }
      case StmtKind::fragment_mma: {
        const backend::MatrixInstruction& ins = instruction_for(fragment_of(s.vars[0]));
        out += indent + format(ins.call, "matrix instruction call",
                               {{"d", array},
                                {"a", fragment_array(s.vars[0])},
                                {"b", fragment_array(s.vars[1])},
                                {"c", fragment_array(s.vars[2])}}) +
               "\n";
        return;
      }
      default: table_error("not a fragment statement");
    }
  }

  std::string param_text(int index) const {
    return format(lang_.param_access, "param_access", {{"index", std::to_string(index)}});
  }

  std::string cast_text(ScalarType type, const std::string& a) const {
    return format(lang_.cast, "cast", {{"type", type_name(type)}, {"a", a}});
  }

  std::string call(const std::string& pattern, const char* field, const std::string& a,
                   const std::string& b = {}) const {
    return format(pattern, field, {{"a", a}, {"b", b}});
  }

  // Literals round-trip exactly; negative ones are parenthesised so that
  // "-" never meets another operator ("x - -1" or "--1").
  std::string literal(const ExprNode& n) const {
    switch (n.type) {
      case ScalarType::f32: {
        const float v = static_cast<float>(n.fvalue);
        if (std::isnan(v)) return lang_.float_nan;
        if (std::isinf(v)) return v > 0 ? lang_.float_inf : "(-" + lang_.float_inf + ")";
        char buf[32];
        auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);
        KILN_ASSERT(ec == std::errc());
        std::string text(buf, end);
        if (text.find_first_of(".e") == std::string::npos) text += ".0";
        text += lang_.float_suffix;
        return std::signbit(v) ? "(" + text + ")" : text;
      }
      case ScalarType::i32:
        // -2^31 has no literal: 2147483648 does not fit an int.
        if (n.ivalue == std::numeric_limits<std::int32_t>::min()) return "(-2147483647 - 1)";
        return n.ivalue < 0 ? "(" + std::to_string(n.ivalue) + ")" : std::to_string(n.ivalue);
      case ScalarType::u32: return std::to_string(n.ivalue) + "u";
      case ScalarType::boolean: return n.ivalue ? "true" : "false";
      case ScalarType::i64:
        // As for i32: -2^63 has no literal.
        if (n.ivalue == std::numeric_limits<std::int64_t>::min())
          return "(-9223372036854775807" + lang_.i64_suffix + " - 1" + lang_.i64_suffix + ")";
        return n.ivalue < 0 ? "(" + std::to_string(n.ivalue) + lang_.i64_suffix + ")"
                            : std::to_string(n.ivalue) + lang_.i64_suffix;
      case ScalarType::f16:
      case ScalarType::bf16: break;  // storage types: verify() rejects 16-bit values
    }
    table_error("constant of unknown type");
  }

  std::string expr(const Expr& e) const {
    const ExprNode& n = *e;
    switch (n.kind) {
      case ExprKind::constant: return literal(n);
      case ExprKind::var: return var_identifier(n.name);
      case ExprKind::global_index: return std::string(kGlobalIndex);
      case ExprKind::param: return param_text(n.param);
      case ExprKind::local_index: return std::string(kLocalIndex);
      case ExprKind::workgroup_index: return std::string(kWorkgroupIndex);
      case ExprKind::subgroup_lane: return subgroup_text(lang_.subgroup_lane_expr, "subgroup_lane_expr", {});
      case ExprKind::subgroup_id: return subgroup_text(lang_.subgroup_id_expr, "subgroup_id_expr", {});
      case ExprKind::subgroup_broadcast:
        return subgroup_text(lang_.subgroup_broadcast, "subgroup_broadcast", expr(n.args[0]), n.ivalue);
      case ExprKind::load: return from_storage(loaded_type(n.buffer), buffer_element(n.buffer, n.args[0]));
      case ExprKind::shared_load: return shared_element(n.buffer, n.args[0]);
      case ExprKind::unary: return unary(n);
      case ExprKind::binary: return binary(n);
      case ExprKind::select: return "(" + expr(n.args[0]) + " ? " + expr(n.args[1]) + " : " + expr(n.args[2]) + ")";
      case ExprKind::cast:
        if (n.type == ScalarType::f16 && n.args[0].type() == ScalarType::f32) return f16_value(expr(n.args[0]));
        if (n.type == ScalarType::f32 && n.args[0].type() == ScalarType::f16)
          return f32_value_of_f16(expr(n.args[0]));
        return cast_text(n.type, expr(n.args[0]));
    }
    table_error("unknown expression kind");
  }

  std::string subgroup_text(const std::string& pattern, const char* field, const std::string& a,
                            std::int64_t lane = 0) const {
    return format(pattern, field,
                  {{"a", a},
                   {"lane", std::to_string(lane)},
                   {"sg", std::to_string(kernel_.subgroup_size)},
                   {"wg", std::to_string(kernel_.workgroup_size)}});
  }

  // Whether texel buffer `b` is read with the bf16 spellings (an f16 one is
  // read with the f32 ones, where the language's f16 views give floats).
  bool texel_bf16(const kir::BufferParam& b) const {
    if (b.type == ScalarType::f16 && !lang_.texel_f16_as_f32)
      table_error("the language table has no f16 texel buffers (texel buffer '" + b.name + "')");
    return b.type == ScalarType::bf16;
  }

  std::string buffer_element(int buffer, const Expr& index) const {
    const kir::BufferParam& b = kernel_.buffers[static_cast<std::size_t>(buffer)];
    const std::string name = buffer_identifier(b.name);
    const bool bf16 = b.texel_width != 0 && texel_bf16(b);
    if (b.texel_width == 1)
      return format(bf16 ? lang_.texel_bf16_load : lang_.texel_load, "texel_load",
                    {{"name", name}, {"index", expr(index)}});
    if (b.texel_width == 4)
      return format(bf16 ? lang_.texel_bf16_component_load : lang_.texel_component_load, "texel_component_load",
                    {{"name", name}, {"index", expr(index)}});
    return format(lang_.buffer_access, "buffer_access", {{"name", name}, {"index", expr(index)}});
  }

  std::string shared_element(int array, const Expr& index) const {
    const std::string name = shared_identifier(kernel_.shared[static_cast<std::size_t>(array)].name);
    return format(lang_.shared_access, "shared_access", {{"name", name}, {"index", expr(index)}});
  }

  std::string unary(const ExprNode& n) const {
    const std::string a = expr(n.args[0]);
    // f16: negation is exact in any spelling; the functions run in f32 and
    // round once, as kir defines them, in every language.
    if (n.type == ScalarType::f16 && n.unary != UnaryOp::neg) {
      ExprNode wide = n;
      wide.type = ScalarType::f32;
      return f16_value(unary_text(wide, f32_value_of_f16(a)));
    }
    return unary_text(n, a);
  }

  std::string unary_text(const ExprNode& n, const std::string& a) const {
    switch (n.unary) {
      case UnaryOp::neg: return "(-" + a + ")";
      case UnaryOp::logical_not: return "(!" + a + ")";
      case UnaryOp::exp: return call(lang_.exp, "exp", a);
      case UnaryOp::log: return call(lang_.log, "log", a);
      case UnaryOp::sqrt: return call(lang_.sqrt, "sqrt", a);
      case UnaryOp::rsqrt: return call(lang_.rsqrt, "rsqrt", a);
      case UnaryOp::tanh: return call(lang_.tanh, "tanh", a);
      case UnaryOp::erf: return call(lang_.erf, "erf", a);
      case UnaryOp::floor: return call(lang_.floor, "floor", a);
      case UnaryOp::ceil: return call(lang_.ceil, "ceil", a);
      case UnaryOp::abs:
        if (n.type == ScalarType::i64) return call(lang_.labs, "labs", a);
        return n.type == ScalarType::f32 ? call(lang_.abs, "abs", a) : call(lang_.iabs, "iabs", a);
    }
    table_error(std::string("unary op '") + kir::unary_op_name(n.unary) + "' has no rendering");
  }

  std::string binary(const ExprNode& n) const {
    const std::string a = expr(n.args[0]);
    const std::string b = expr(n.args[1]);
    const ScalarType t = n.args[0].type();
    if (t == ScalarType::f16) {
      const char* op = kir::infix_symbol(n.binary);
      // Comparisons are exact in any spelling; + - * / are the language's
      // own where it has f16 arithmetic; the rest (min, max) and emulated
      // arithmetic compute in f32 and round once.
      if (op && (n.type == ScalarType::boolean || native_f16_arithmetic())) return "(" + a + " " + op + " " + b + ")";
      ExprNode wide = n;
      wide.type = ScalarType::f32;
      wide.args = {kir::cast(ScalarType::f32, n.args[0]), kir::cast(ScalarType::f32, n.args[1])};
      return f16_value(binary_text(wide, f32_value_of_f16(a), f32_value_of_f16(b)));
    }
    return binary_text(n, a, b);
  }

  std::string binary_text(const ExprNode& n, const std::string& a, const std::string& b) const {
    if (const char* op = kir::infix_symbol(n.binary)) return "(" + a + " " + op + " " + b + ")";
    const ScalarType t = n.args[0].type();
    switch (n.binary) {
      case BinaryOp::pow: return call(lang_.pow, "pow", a, b);
      case BinaryOp::min:
        if (t == ScalarType::f32) return call(lang_.fmin, "fmin", a, b);
        if (t == ScalarType::i32) return call(lang_.imin, "imin", a, b);
        if (t == ScalarType::i64) return call(lang_.lmin, "lmin", a, b);
        return call(lang_.umin, "umin", a, b);
      case BinaryOp::max:
        if (t == ScalarType::f32) return call(lang_.fmax, "fmax", a, b);
        if (t == ScalarType::i32) return call(lang_.imax, "imax", a, b);
        if (t == ScalarType::i64) return call(lang_.lmax, "lmax", a, b);
        return call(lang_.umax, "umax", a, b);
      default: break;
    }
    table_error(std::string("binary op '") + kir::binary_op_name(n.binary) + "' has no rendering");
  }

  void block(const std::vector<Stmt>& stmts, int depth, std::string& out) const {
    for (const Stmt& s : stmts) statement(s, depth, out);
  }

  void statement(const Stmt& s, int depth, std::string& out) const {
    const std::string indent(static_cast<std::size_t>(depth) * 2, ' ');
    switch (s.kind) {
      case StmtKind::declare:
        out += indent + type_name(s.type) + " " + var_identifier(s.var) + " = " + expr(s.value) + ";\n";
        return;
      case StmtKind::assign: out += indent + var_identifier(s.var) + " = " + expr(s.value) + ";\n"; return;
      case StmtKind::store:
        out += indent + buffer_element(s.buffer, s.index) + " = " + to_storage(buffer_type(s.buffer), expr(s.value)) +
               ";\n";
        return;
      case StmtKind::loop: {
        const std::string v = var_identifier(s.var);
        out += indent + "for (" + type_name(ScalarType::i32) + " " + v + " = " + expr(s.begin) + "; " + v + " < " +
               expr(s.end) + "; " + v + " += " + std::to_string(s.step) + ") {\n";
        block(s.body, depth + 1, out);
        out += indent + "}\n";
        return;
      }
      case StmtKind::load_vector: load_vector(s, indent, out); return;
      case StmtKind::store_vector: store_vector(s, indent, out); return;
      case StmtKind::shared_store:
        out += indent + shared_element(s.buffer, s.index) + " = " + expr(s.value) + ";\n";
        return;
      case StmtKind::barrier: out += indent + format(lang_.barrier, "barrier", {}) + "\n"; return;
      case StmtKind::fragment_fill:
      case StmtKind::fragment_load:
      case StmtKind::fragment_mma:
      case StmtKind::fragment_store:
        if (emulated_fragments())
          emulated_fragment(s, indent, out);
        else
          lane_fragment(s, indent, out);
        return;
      case StmtKind::branch:
        out += indent + "if (" + expr(s.value) + ") {\n";
        block(s.body, depth + 1, out);
        if (!s.else_body.empty()) {
          out += indent + "} else {\n";
          block(s.else_body, depth + 1, out);
        }
        out += indent + "}\n";
        return;
    }
    table_error("unknown statement kind");
  }

  const kir::Kernel& kernel_;
  const LanguageTable& lang_;
  mutable int next_temporary_ = 0;  // names kiln_vec<n> uniquely
};

}  // namespace

DynamicShared dynamic_shared(const kir::Kernel& kernel, const backend::LanguageTable& language) {
  DynamicShared out;
  if (language.max_static_shared_bytes == 0 || kir::shared_memory_bytes(kernel) <= language.max_static_shared_bytes)
    return out;
  constexpr std::uint64_t kAlignment = 16;  // vector views of a shared array stay aligned
  std::uint64_t end = 0;
  for (const kir::SharedArray& a : kernel.shared) {
    out.offsets.push_back((end + kAlignment - 1) / kAlignment * kAlignment);
    end = out.offsets.back() + static_cast<std::uint64_t>(std::max<std::int64_t>(a.count, 0)) * 4;  // 4-byte elements
  }
  out.bytes = static_cast<std::uint32_t>(end);
  return out;
}

std::string render(const kir::Kernel& kernel, const backend::LanguageTable& language) {
  kir::verify(kernel);
  return Renderer(kernel, language).run();
}

backend::KernelSource make_kernel_source(const kir::Kernel& kernel, const backend::LanguageTable& language) {
  backend::KernelSource source;
  source.name = kernel.name;
  source.language = language.name;
  source.text = render(kernel, language);
  source.workgroup_size = kernel.workgroup_size;
  source.num_buffers = static_cast<std::uint32_t>(kernel.buffers.size());
  source.num_params = static_cast<std::uint32_t>(kernel.params.size());
  source.dynamic_shared_bytes = dynamic_shared(kernel, language).bytes;
  for (const kir::BufferParam& b : kernel.buffers)
    if (b.texel_width != 0) source.texel_widths.resize(kernel.buffers.size(), 0);
  for (std::size_t i = 0; i < source.texel_widths.size(); ++i) source.texel_widths[i] = kernel.buffers[i].texel_width;
  for (const kir::BufferParam& b : kernel.buffers)
    if (b.texel_width != 0 && b.type != ScalarType::f32) source.texel_elements.resize(kernel.buffers.size());
  for (std::size_t i = 0; i < source.texel_elements.size(); ++i)
    source.texel_elements[i] = kernel.buffers[i].type == ScalarType::bf16  ? backend::TexelElement::bf16
                               : kernel.buffers[i].type == ScalarType::f16 ? backend::TexelElement::f16
                                                                           : backend::TexelElement::f32;
  return source;
}

backend::KernelRequirements kernel_requirements(const kir::Kernel& kernel) {
  backend::KernelRequirements needs;
  needs.kernel_name = kernel.name;
  needs.workgroup_size = kernel.workgroup_size;
  needs.num_buffers = static_cast<std::uint32_t>(kernel.buffers.size());
  needs.shared_memory_bytes = kir::shared_memory_bytes(kernel);
  needs.param_bytes = static_cast<std::uint32_t>(kernel.params.size() * sizeof(std::int32_t));
  // A broadcast is a subgroup op: most kernels, with none, are walked once for both.
  if (kir::uses_subgroup_ops(kernel)) {
    needs.subgroup_size = kernel.subgroup_size;
    needs.subgroup_broadcast = kir::uses_subgroup_broadcast(kernel);
  }
  // Fragments in subgroups of more lanes need the target's matrix
  // instructions (one-lane subgroups emulate them anywhere).
  if (!kernel.fragments.empty() && kernel.subgroup_size > 1) {
    needs.subgroup_size = kernel.subgroup_size;
    for (const kir::Fragment& f : kernel.fragments) {
      if (f.role == kir::FragmentRole::accumulator) continue;
      const backend::MatrixShape shape{kir::matrix_precision_name(f.precision), f.shape.m, f.shape.n, f.shape.k,
                                       kernel.subgroup_size};
      if (std::find(needs.matrix_shapes.begin(), needs.matrix_shapes.end(), shape) == needs.matrix_shapes.end())
        needs.matrix_shapes.push_back(shape);
    }
  }
  needs.int64 = uses_type(kernel, ScalarType::i64);
  needs.storage8 = has_bool_buffer(kernel);
  needs.storage16 = needs_storage16(kernel);
  needs.fp16 = kir::uses_f16_arithmetic(kernel);
  for (const kir::BufferParam& b : kernel.buffers) {
    needs.texel_width_1 = needs.texel_width_1 || b.texel_width == 1;
    needs.texel_width_4 = needs.texel_width_4 || b.texel_width == 4;
    needs.texel_16bit = needs.texel_16bit || (b.texel_width != 0 && kir::is_storage_only(b.type));
  }
  return needs;
}

}  // namespace kiln::render
