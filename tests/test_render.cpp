#define BOOST_TEST_MODULE render
#include <boost/test/unit_test.hpp>

// The C-style renderer with every built-in language table: the structure of
// the text (read back through each table's own spellings, so this file has no
// per-language branch either), spellings that must not leak between
// languages, compilation with each backend's compiler, and rendered kernels
// run on the Vulkan device against the interpreter.

#include <kiln/error.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "backends/registry.h"
#include "backends/vulkan/glsl_prelude.h"
#include "src/kernel/interpreter.h"
#include "src/kernel/ir.h"
#include "src/render/cstyle.h"

using namespace kiln::kir;
namespace kb = kiln::backend;
using kiln::Error;
using kiln::ErrorKind;

namespace {

constexpr ScalarType F = ScalarType::f32;
constexpr ScalarType I = ScalarType::i32;
constexpr ScalarType U = ScalarType::u32;

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

std::string replace_all(std::string text, const std::string& from, const std::string& to) {
  for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size()))
    text.replace(at, from.size(), to);
  return text;
}

// A table spelling with its placeholders filled, e.g. "expf({a})" -> "expf(X)".
std::string spell(const std::string& pattern, const std::vector<std::pair<std::string, std::string>>& values) {
  std::string text = replace_all(replace_all(pattern, "{{", "\x01"), "}}", "\x02");
  for (const auto& [key, value] : values) text = replace_all(text, "{" + key + "}", value);
  return replace_all(replace_all(text, "\x01", "{"), "\x02", "}");
}

// The text of a spelling before its first operand: "expf(" for "expf({a})".
std::string call_prefix(const std::string& pattern) { return pattern.substr(0, pattern.find("{a}")); }

std::vector<const kb::LanguageTable*> languages() {
  std::vector<const kb::LanguageTable*> tables;
  for (const kb::Backend* backend : kb::all_backends()) tables.push_back(&backend->language());
  return tables;
}

// Every op, type, statement and literal form the IR has.
Kernel kitchen_sink() {
  Kernel k("kitchen_sink");
  Buf x = k.add_buffer("x", F, Access::read);
  Buf n = k.add_buffer("n", I, Access::read);
  Buf u = k.add_buffer("u", U, Access::read_write);
  Buf y = k.add_buffer("y", F, Access::write);
  Buf flags = k.add_buffer("flags", I, Access::write);
  Buf quads = k.add_buffer("quads", F, Access::write);
  k.global_size = 100;
  k.workgroup_size = 64;
  const Expr i = global_index();
  const Expr v = var("v", F), acc = var("acc", F), kk = var("k", I), j = var("j", I);
  const Expr a = abs(v) + f32(1);
  const float inf = std::numeric_limits<float>::infinity();
  k.body = {
      declare("v", F, load(x, i, F)),
      declare("acc", F, f32(0.1)),
      // vector loads: f32 x4 at an i32 index, i32 x2 at a u32 index
      load_vector({"x0", "x1", "x2", "x3"}, x, i / i32(4), F),
      load_vector({"n0", "n1"}, n, cast(U, i) / u32(2), I),
      assign("acc", acc + var("x0", F) * f32(2) + var("x3", F) - var("x1", F) * var("x2", F)),
      loop("k", i32(0), i32(3),
           {
               loop("j", kk, i32(3), {assign("acc", acc + cast(F, j) * f32(0.5))}, 2),
               branch(eq(kk % i32(2), i32(0)) && unary(UnaryOp::logical_not, v > f32(inf)),
                      {assign("acc", acc + exp(-abs(v)) + log(a) + sqrt(a) + rsqrt(a) + tanh(v) + erf(v) + floor(v) +
                                         ceil(v) + pow(a, f32(0.5)) + min(v, f32(1e20)) + max(v, f32(-0.0)) - v / a)},
                      {assign("acc", select(v < f32(-inf) || v <= f32(0), -acc, acc))}),
           }),
      store(y, i, acc),
      // a vector store: f32 x4 at an i32 index
      store_vector(quads, i, {acc, v, acc * f32(2), cast(F, i)}),
      store(flags, i,
            select(ne(v, v) || v >= f32(-inf), min(load(n, i, I), i32(-2147483647 - 1 + 5)),
                   max(abs(load(n, i, I)), i32(-3))) +
                cast(I, v > f32(0)) * i32(1000) + (i / i32(7)) % i32(3) - i32(-4) + (var("n1", I) - var("n0", I))),
      store(u, cast(U, i),
            max(load(u, cast(U, i), U), u32(7)) + min(u32(4000000000u), load(u, cast(U, i), U)) / u32(3) % u32(5) -
                cast(U, i32(2)) * u32(1) + cast(U, cast(ScalarType::boolean, v))),
  };
  return k;
}

// Subgroup operations of each type and texel buffers of both widths, in
// whole workgroups of four subgroups of 8 (lavapipe's subgroup size).
Kernel subgroup_texel_sink() {
  Kernel k("subgroup_texel_sink");
  Buf t1 = k.add_texel_buffer("t1", 1);
  Buf t4 = k.add_texel_buffer("t4", 4);
  Buf y = k.add_buffer("y", F, Access::write);
  Buf ids = k.add_buffer("ids", I, Access::write);
  k.global_size = 128;
  k.workgroup_size = 32;
  k.subgroup_size = 8;
  const Expr i = global_index();
  const Expr w = var("w", F);
  k.body = {
      load_vector({"q0", "q1", "q2", "q3"}, t4, i, F),
      declare("v", F, load(t1, i, F) + var("q0", F) * f32(2) + var("q3", F) - load(t4, i * i32(4) + i32(1), F)),
      declare("w", F, subgroup_broadcast(var("v", F), 3) + subgroup_broadcast(cast(F, subgroup_lane()), 7)),
      loop("r", i32(0), i32(2), {assign("w", w + subgroup_broadcast(w * f32(0.5) + cast(F, var("r", I)), 1))}),
      branch(workgroup_index() < i32(3), {assign("w", w - subgroup_broadcast(w, 6))}),
      store(y, i, w),
      store(ids, i,
            subgroup_id() * i32(100) + subgroup_lane() + subgroup_broadcast(subgroup_lane() * i32(1000), 5) +
                cast(I, subgroup_broadcast(cast(U, i), 2) % u32(3)) * i32(10000)),
  };
  return k;
}

// A kernel that never reads the global index (its store uses constant 0).
Kernel no_index_kernel() {
  Kernel k("first_only");
  Buf y = k.add_buffer("y", F, Access::write);
  k.global_size = 1;
  k.workgroup_size = 1;
  k.body = {store(y, i32(0), f32(std::numeric_limits<float>::quiet_NaN()))};
  return k;
}

Kernel relu_kernel(std::int64_t size, std::uint32_t workgroup_size) {
  Kernel k("relu");
  Buf x = k.add_buffer("x", F, Access::read);
  Buf y = k.add_buffer("y", F, Access::write);
  k.global_size = size;
  k.workgroup_size = workgroup_size;
  k.body = {store(y, global_index(), max(load(x, global_index(), F), f32(0)))};
  return k;
}

}  // namespace

BOOST_AUTO_TEST_SUITE(structure)

BOOST_AUTO_TEST_CASE(every_language_is_registered) {
  std::set<std::string> names;
  for (const kb::LanguageTable* lang : languages()) names.insert(lang->name);
  BOOST_TEST(names.count("c99") == 1u);  // the null backend is always built
  for (const kb::Backend* backend : kb::all_backends())
    BOOST_TEST_MESSAGE(backend->name() << ": " << backend->language().name);
}

BOOST_AUTO_TEST_CASE(declarations_entry_index_and_guard) {
  const Kernel k = kitchen_sink();
  for (const kb::LanguageTable* lang : languages()) {
    BOOST_TEST_CONTEXT("language " << lang->name) {
      const std::string text = kiln::render::render(k, *lang);
      const std::string opening = lang->version_directive + lang->prelude;
      BOOST_TEST(text.rfind(opening, 0) == 0u);  // starts with the version line and the prelude

      std::string params;
      for (std::size_t b = 0; b < k.buffers.size(); ++b) {
        const BufferParam& param = k.buffers[b];
        const std::string type = param.type == F ? lang->type_f32 : param.type == I ? lang->type_i32 : lang->type_u32;
        const std::vector<std::pair<std::string, std::string>> fields = {
            {"binding", std::to_string(b)},
            {"name", "b_" + param.name},
            {"type", type},
            {"readonly", param.access == Access::read ? lang->readonly_qualifier : ""}};
        if (!lang->buffer_global_decl.empty())
          BOOST_TEST(contains(text, spell(lang->buffer_global_decl, fields) + "\n"), "declaration of " << param.name);
        if (!lang->buffer_param_decl.empty())
          params += (params.empty() ? "" : ", ") + spell(lang->buffer_param_decl, fields);
      }
      if (!lang->extra_params.empty()) params += (params.empty() ? "" : ", ") + lang->extra_params;

      const std::string header =
          spell(lang->kernel_header, {{"name", "kitchen_sink"}, {"params", params}, {"wg", "64"}});
      const std::string index =
          lang->type_u32 + " kiln_linear = " + spell(lang->global_index_expr, {{"wg", "64"}}) + ";";
      const std::string guard = "if (kiln_linear >= 100u) return;";
      const std::string gid =
          lang->type_i32 + " kiln_gid = " + spell(lang->cast, {{"type", lang->type_i32}, {"a", "kiln_linear"}}) + ";";
      const std::string first_statement = "  " + lang->type_f32 + " v_v = ";
      BOOST_TEST(contains(text, header + " {\n  " + index + "\n  " + guard + "\n  " + gid + "\n" + first_statement));
      BOOST_TEST(text.substr(text.size() - 2) == "}\n");

      // Every opened bracket closes.
      int braces = 0, parens = 0, brackets = 0;
      bool closed_before_opened = false;
      for (char c : text.substr(opening.size())) {
        braces += c == '{' ? 1 : c == '}' ? -1 : 0;
        parens += c == '(' ? 1 : c == ')' ? -1 : 0;
        brackets += c == '[' ? 1 : c == ']' ? -1 : 0;
        closed_before_opened = closed_before_opened || braces < 0 || parens < 0 || brackets < 0;
      }
      BOOST_TEST(!closed_before_opened);
      BOOST_TEST(braces == 0);
      BOOST_TEST(parens == 0);
      BOOST_TEST(brackets == 0);
    }
  }
}

BOOST_AUTO_TEST_CASE(statements_and_names) {
  const Kernel k = kitchen_sink();
  for (const kb::LanguageTable* lang : languages()) {
    BOOST_TEST_CONTEXT("language " << lang->name) {
      const std::string text = kiln::render::render(k, *lang);
      const std::string& int_type = lang->type_i32;
      BOOST_TEST(contains(text, "\n  for (" + int_type + " v_k = 0; v_k < 3; v_k += 1) {\n"));
      BOOST_TEST(contains(text, "\n    for (" + int_type + " v_j = v_k; v_j < 3; v_j += 2) {\n"));
      BOOST_TEST(contains(text, "\n      v_acc = (v_acc + (" +
                                    spell(lang->cast, {{"type", lang->type_f32}, {"a", "v_j"}}) + " * 0.5" +
                                    lang->float_suffix + "));\n"));
      BOOST_TEST(contains(text, "\n    if ((((v_k % 2) == 0) && (!(v_v > " + lang->float_inf + ")))) {\n"));
      BOOST_TEST(contains(text, "\n    } else {\n"));
      BOOST_TEST(contains(
          text, "\n  " + spell(lang->buffer_access, {{"name", "b_y"}, {"index", "kiln_gid"}}) + " = v_acc;\n"));
      BOOST_TEST(contains(text, "\n  " + lang->type_f32 + " v_acc = 0.1" + lang->float_suffix + ";\n"));
      // select, short-circuit operators and the u32 index cast
      BOOST_TEST(contains(
          text, "(((v_v < (-" + lang->float_inf + ")) || (v_v <= 0.0" + lang->float_suffix + ")) ? (-v_acc) : v_acc)"));
      BOOST_TEST(contains(
          text, spell(lang->buffer_access,
                      {{"name", "b_u"}, {"index", spell(lang->cast, {{"type", lang->type_u32}, {"a", "kiln_gid"}})}})));
      // IR names never appear unprefixed as declarations.
      BOOST_TEST(!contains(text, " acc ="));
      BOOST_TEST(!contains(text, " v ="));
    }
  }
}

BOOST_AUTO_TEST_CASE(vector_loads_are_one_load_of_a_vector_view) {
  const Kernel k = kitchen_sink();
  for (const kb::LanguageTable* lang : languages()) {
    BOOST_TEST_CONTEXT("language " << lang->name) {
      const std::string text = kiln::render::render(k, *lang);
      if (lang->vector_f32.empty()) {
        // No vector types: one scalar load per component.
        BOOST_TEST(contains(
            text, "v_x3 = " + spell(lang->buffer_access, {{"name", "b_x"}, {"index", "(((kiln_gid / 4) * 4) + 3)"}}) + ";"));
        continue;
      }
      const std::string vec4 = spell(lang->vector_f32, {{"width", "4"}});
      const std::string ivec2 = spell(lang->vector_i32, {{"width", "2"}});
      const std::string x_load = spell(lang->buffer_vector_access, {{"name", "b_x"},
                                                                    {"view", "kiln_v4_x"},
                                                                    {"vector_type", vec4},
                                                                    {"readonly", lang->readonly_qualifier},
                                                                    {"index", "(kiln_gid / 4)"}});
      BOOST_TEST(contains(text, "\n  " + vec4 + " kiln_vec0 = " + x_load + ";\n"));
      BOOST_TEST(contains(text, "\n  " + lang->type_f32 + " v_x0 = kiln_vec0.x;\n"));
      BOOST_TEST(contains(text, "\n  " + lang->type_f32 + " v_x3 = kiln_vec0.w;\n"));
      BOOST_TEST(contains(text, "\n  " + ivec2 + " kiln_vec1 = "));
      BOOST_TEST(contains(text, "\n  " + lang->type_i32 + " v_n1 = kiln_vec1.y;\n"));
      if (!lang->buffer_vector_global_decl.empty()) {
        // One view per (buffer, width), on the buffer's own binding.
        BOOST_TEST(contains(text, spell(lang->buffer_vector_global_decl, {{"binding", "0"},
                                                                          {"view", "kiln_v4_x"},
                                                                          {"vector_type", vec4},
                                                                          {"readonly", lang->readonly_qualifier},
                                                                          {"width", "4"}})));
        BOOST_TEST(contains(text, "kiln_v2_n"));
        BOOST_TEST(!contains(text, "kiln_v4_n"));
        BOOST_TEST(!contains(text, "kiln_v4_y"));
      }
    }
  }
}

BOOST_AUTO_TEST_CASE(vector_stores_are_one_store_to_a_vector_view) {
  const Kernel k = kitchen_sink();
  for (const kb::LanguageTable* lang : languages()) {
    BOOST_TEST_CONTEXT("language " << lang->name) {
      const std::string text = kiln::render::render(k, *lang);
      if (lang->vector_f32.empty()) {
        // No vector types: one scalar store per component.
        BOOST_TEST(contains(text, spell(lang->buffer_access, {{"name", "b_quads"}, {"index", "((kiln_gid * 4) + 3)"}}) +
                                      " = "));
        BOOST_TEST(contains(text, spell(lang->buffer_access, {{"name", "b_quads"}, {"index", "((kiln_gid * 4) + 0)"}}) +
                                      " = v_acc;"));
        continue;
      }
      const std::string vec4 = spell(lang->vector_f32, {{"width", "4"}});
      const std::string access = spell(lang->buffer_vector_access, {{"name", "b_quads"},
                                                                    {"view", "kiln_v4_quads"},
                                                                    {"vector_type", vec4},
                                                                    {"readonly", ""},
                                                                    {"index", "kiln_gid"}});
      const std::string constructed = spell(lang->vector_construct, {{"vector_type", vec4}, {"components", "@"}});
      const std::string value = constructed.substr(0, constructed.find('@')) + "v_acc, v_v, ";
      BOOST_TEST(contains(text, "\n  " + access + " = " + value));
      if (!lang->buffer_vector_global_decl.empty())
        // A writable view on the buffer's own binding.
        BOOST_TEST(contains(text, spell(lang->buffer_vector_global_decl, {{"binding", "5"},
                                                                          {"view", "kiln_v4_quads"},
                                                                          {"vector_type", vec4},
                                                                          {"readonly", ""},
                                                                          {"width", "4"}})));
    }
  }
}

BOOST_AUTO_TEST_CASE(math_spellings_come_from_the_table) {
  const Kernel k = kitchen_sink();
  for (const kb::LanguageTable* lang : languages()) {
    BOOST_TEST_CONTEXT("language " << lang->name) {
      const std::string text = kiln::render::render(k, *lang);
      for (const std::string* field : {&lang->exp, &lang->log, &lang->sqrt, &lang->rsqrt, &lang->tanh, &lang->erf,
                                       &lang->abs, &lang->iabs, &lang->floor, &lang->ceil, &lang->pow, &lang->fmin,
                                       &lang->fmax, &lang->imin, &lang->imax, &lang->umin, &lang->umax})
        BOOST_TEST(contains(text.substr(lang->version_directive.size() + lang->prelude.size()), call_prefix(*field)), "spelling " << *field);
      BOOST_TEST(contains(text, spell(lang->exp, {{"a", "(-" + spell(lang->abs, {{"a", "v_v"}}) + ")"}})));
      BOOST_TEST(
          contains(text, spell(lang->imin, {{"a", spell(lang->buffer_access, {{"name", "b_n"}, {"index", "kiln_gid"}})},
                                            {"b", "(-2147483643)"}})));
      BOOST_TEST(contains(text, spell(lang->fmin, {{"a", "v_v"}, {"b", "1e+20" + lang->float_suffix}})));
      BOOST_TEST(contains(text, spell(lang->fmax, {{"a", "v_v"}, {"b", "(-0.0" + lang->float_suffix + ")"}})));
      BOOST_TEST(contains(
          text, spell(lang->umin,
                      {{"a", "4000000000u"},
                       {"b", spell(lang->buffer_access,
                                   {{"name", "b_u"},
                                    {"index", spell(lang->cast, {{"type", lang->type_u32}, {"a", "kiln_gid"}})}})}})));
    }
  }
}

// f16 and bf16 texel buffers: GLSL reads f16 through float views and bf16
// through unsigned ones it widens; they need no 16-bit storage extension. A
// language without 16-bit texel buffers refuses them by name.
BOOST_AUTO_TEST_CASE(sixteen_bit_texel_buffers_are_spelled_per_element_type) {
  Kernel k("texel16");
  Buf b4 = k.add_buffer("b4", ScalarType::bf16, Access::read);
  Buf h1 = k.add_buffer("h1", ScalarType::f16, Access::read);
  Buf y = k.add_buffer("y", F, Access::write);
  k.buffers[0].texel_width = 4;
  k.buffers[1].texel_width = 1;
  k.global_size = 16;
  const Expr i = global_index();
  k.body = {load_vector({"q0", "q1", "q2", "q3"}, b4, i, F),
            store(y, i, var("q1", F) + load(b4, i * i32(4) + i32(3), F) + load(h1, i, F))};
  for (const kb::LanguageTable* lang : languages()) {
    BOOST_TEST_CONTEXT("language " << lang->name) {
      if (lang->texel_bf16_load.empty() || !lang->texel_f16_as_f32) {
        try {
          (void)kiln::render::render(k, *lang);
          BOOST_ERROR("rendered 16-bit texel buffers without spellings for them");
        } catch (const Error& e) {
          BOOST_TEST((e.kind() == ErrorKind::Internal));
          BOOST_TEST((contains(e.what(), "texel_bf16") || contains(e.what(), "f16 texel buffers")), e.what());
        }
        continue;
      }
      const std::string text = kiln::render::render(k, *lang);
      BOOST_TEST(contains(text, spell(lang->texel_bf16_global_decl, {{"binding", "0"}, {"name", "b_b4"}, {"width", "4"}})));
      BOOST_TEST(contains(text, spell(lang->texel_buffer_global_decl, {{"binding", "1"}, {"name", "b_h1"}, {"width", "1"}})));
      BOOST_TEST(contains(text, spell(lang->texel_bf16_component_load,
                                      {{"name", "b_b4"}, {"index", "((kiln_gid * 4) + 3)"}})));
      BOOST_TEST(contains(text, spell(lang->texel_load, {{"name", "b_h1"}, {"index", "kiln_gid"}})));
      BOOST_TEST(contains(text, lang->texel_bf16_global_helpers));
      BOOST_TEST(!contains(text, lang->texel_global_helpers));  // no f32 width-4 buffer
      BOOST_TEST(!contains(text, lang->storage16_directives));
    }
  }
  const std::string glsl = kiln::render::render(k, kb::get_backend("vulkan").language());
  BOOST_TEST(contains(glsl, "uniform usamplerBuffer b_b4;"));
  // The text names the f16 view: an f32 twin's text (and caches' keys) differ.
  BOOST_TEST(contains(glsl, "// texel buffer b_h1: f16\n"));
  Kernel twin = k;
  twin.buffers[1].type = F;
  BOOST_TEST(kiln::render::render(twin, kb::get_backend("vulkan").language()) != glsl);
  BOOST_TEST(contains(glsl, "uintBitsToFloat(texelFetch(b_b4, int(kiln_gid)) << 16)"));
}

BOOST_AUTO_TEST_CASE(subgroup_and_texel_spellings_come_from_the_table) {
  const Kernel k = subgroup_texel_sink();
  for (const kb::LanguageTable* lang : languages()) {
    BOOST_TEST_CONTEXT("language " << lang->name) {
      const std::string text = kiln::render::render(k, *lang);
      // Directives right after the version line; none for a kernel without subgroup operations.
      BOOST_TEST(text.rfind(lang->version_directive + lang->subgroup_directives + lang->prelude, 0) == 0u);
      if (!lang->subgroup_directives.empty())
        BOOST_TEST(!contains(kiln::render::render(relu_kernel(64, 64), *lang), lang->subgroup_directives));
      BOOST_TEST(contains(text, spell(lang->subgroup_broadcast, {{"a", "v_v"}, {"lane", "3"}, {"sg", "8"}})));
      BOOST_TEST(contains(text, spell(lang->subgroup_lane_expr, {{"sg", "8"}, {"wg", "32"}})));
      BOOST_TEST(contains(text, spell(lang->subgroup_id_expr, {{"sg", "8"}, {"wg", "32"}})));
      BOOST_TEST(contains(text, spell(lang->texel_load, {{"name", "b_t1"}, {"index", "kiln_gid"}})));
      BOOST_TEST(contains(text, spell(lang->texel_component_load,
                                      {{"name", "b_t4"}, {"index", "((kiln_gid * 4) + 1)"}})));
      const std::string declaration = lang->texel_buffer_global_decl.empty() ? lang->texel_buffer_param_decl
                                                                              : lang->texel_buffer_global_decl;
      BOOST_TEST(contains(text, spell(declaration, {{"binding", "1"}, {"name", "b_t4"}, {"width", "4"}})));
      if (!lang->vector_f32.empty())
        BOOST_TEST(contains(text, spell(lang->texel_vector_load,
                                        {{"name", "b_t4"}, {"vector_type", spell(lang->vector_f32, {{"width", "4"}})},
                                         {"index", "kiln_gid"}})));
      // Whole workgroups: the guard is the workgroup's, as with barriers.
      BOOST_TEST(contains(text, "if (kiln_group >= 4) return;"));
    }
  }
  const std::string glsl = kiln::render::render(k, kb::get_backend("vulkan").language());
  BOOST_TEST(contains(glsl, "#version 450\n#extension GL_KHR_shader_subgroup_basic : require\n"
                            "#extension GL_KHR_shader_subgroup_ballot : require\n"));
  BOOST_TEST(contains(glsl, "layout(set = 0, binding = 0) uniform samplerBuffer b_t1;"));
  BOOST_TEST(contains(glsl, "subgroupBroadcast(v_v, 3u)"));
  for (const kb::Backend* backend : kb::all_backends()) {
    const std::string text = kiln::render::render(k, backend->language());
    if (backend->name() == "cuda") BOOST_TEST(contains(text, "__shfl_sync(0xffffffffu, v_v, 3, 8)"));
    if (backend->name() == "hip") BOOST_TEST(contains(text, "__shfl(v_v, 3, 8)"));
    if (backend->name() == "null") BOOST_TEST(contains(text, "const float* restrict b_t4"));
  }
}

BOOST_AUTO_TEST_CASE(no_spelling_leaks_between_languages) {
  // Function names each language uses; another language's text must not
  // contain one that its own table and prelude do not use.
  auto identifiers_of = [](const kb::LanguageTable& lang) {
    std::set<std::string> ids;
    for (const std::string* field : {&lang.exp, &lang.log, &lang.sqrt, &lang.rsqrt, &lang.tanh, &lang.erf, &lang.abs,
                                     &lang.iabs, &lang.floor, &lang.ceil, &lang.pow, &lang.fmin, &lang.fmax, &lang.imin,
                                     &lang.imax, &lang.umin, &lang.umax, &lang.float_inf, &lang.float_nan}) {
      std::string id;
      for (char c : *field + " ") {
        if (std::isalnum(static_cast<unsigned char>(c)) || c == '_') {
          id += c;
        } else {
          if (id.size() > 2 && !std::isdigit(static_cast<unsigned char>(id[0]))) ids.insert(id);
          id.clear();
        }
      }
    }
    return ids;
  };
  const Kernel k = kitchen_sink();
  for (const kb::LanguageTable* lang : languages()) {
    const std::string text = kiln::render::render(k, *lang);
    const std::set<std::string> own = identifiers_of(*lang);
    for (const kb::LanguageTable* other : languages()) {
      for (const std::string& id : identifiers_of(*other)) {
        if (own.count(id) || contains(lang->prelude, id)) continue;
        BOOST_TEST(!contains(text, id + "("), lang->name << " text contains " << other->name << "'s " << id);
      }
    }
    // Built-ins of one language never appear in the others.
    for (const char* builtin : {"gl_GlobalInvocationID", "blockIdx", "kiln_global_id", "__global__", "layout("}) {
      const bool used_by_table = contains(lang->global_index_expr, builtin) || contains(lang->kernel_header, builtin) ||
                                 contains(lang->buffer_global_decl, builtin) || contains(lang->extra_params, builtin);
      if (!used_by_table)
        BOOST_TEST(!contains(text.substr(lang->version_directive.size() + lang->prelude.size()), builtin), lang->name << ": " << builtin);
    }
  }
}

BOOST_AUTO_TEST_CASE(literals_round_trip) {
  Kernel k("literals");
  Buf y = k.add_buffer("y", F, Access::write);
  Buf z = k.add_buffer("z", I, Access::write);
  Buf w = k.add_buffer("w", U, Access::write);
  k.global_size = 1;
  const float inf = std::numeric_limits<float>::infinity();
  k.body = {
      store(y, i32(0), f32(0.1) + f32(1) + f32(-2.5) + f32(1e-30) + f32(3.4028234663852886e38) + f32(16777217.0)),
      store(y, i32(1), f32(inf) + f32(-inf) + f32(std::nan("")) + f32(-0.0)),
      store(z, i32(0), i32(std::numeric_limits<std::int32_t>::min()) + i32(-7) + i32(2147483647)),
      store(w, i32(0), u32(4294967295u) + u32(0)),
  };
  for (const kb::LanguageTable* lang : languages()) {
    BOOST_TEST_CONTEXT("language " << lang->name) {
      const std::string text = kiln::render::render(k, *lang);
      const std::string& s = lang->float_suffix;
      // Shortest round-trip digits; a '.' or exponent so they stay floats.
      BOOST_TEST(contains(text, "(((((0.1" + s + " + 1.0" + s + ") + (-2.5" + s + ")) + 1e-30" + s +
                                    ") + 3.4028235e+38" + s + ") + 16777216.0" + s + ")"));
      BOOST_TEST(contains(text, "(((" + lang->float_inf + " + (-" + lang->float_inf + ")) + " + lang->float_nan +
                                    ") + (-0.0" + s + "))"));
      BOOST_TEST(contains(text, "(((-2147483647 - 1) + (-7)) + 2147483647)"));
      BOOST_TEST(contains(text, "(4294967295u + 0u)"));
    }
  }
}

BOOST_AUTO_TEST_CASE(global_index_is_declared_only_when_used) {
  for (const kb::LanguageTable* lang : languages()) {
    const std::string text = kiln::render::render(no_index_kernel(), *lang);
    BOOST_TEST(!contains(text, "kiln_gid"), lang->name);
    BOOST_TEST(contains(text, "if (kiln_linear >= 1u) return;"), lang->name);
  }
}

BOOST_AUTO_TEST_CASE(kernel_source_metadata) {
  const Kernel k = relu_kernel(1000, 128);
  for (const kb::LanguageTable* lang : languages()) {
    const kb::KernelSource source = kiln::render::make_kernel_source(k, *lang);
    BOOST_TEST(source.name == "relu");
    BOOST_TEST(source.language == lang->name);
    BOOST_TEST(source.workgroup_size == 128u);
    BOOST_TEST(source.num_buffers == 2u);
    BOOST_TEST(source.text == kiln::render::render(k, *lang));
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(errors)

BOOST_AUTO_TEST_CASE(malformed_kernels_are_not_rendered) {
  Kernel k = relu_kernel(10, 64);
  k.body.push_back(store(Buf{0}, global_index(), f32(1)));  // x is read-only
  for (const kb::LanguageTable* lang : languages()) {
    try {
      kiln::render::render(k, *lang);
      BOOST_FAIL("rendered a kernel that stores to a read-only buffer");
    } catch (const Error& e) {
      BOOST_TEST(static_cast<int>(e.kind()) == static_cast<int>(ErrorKind::Internal));
      BOOST_TEST(contains(e.what(), "kernel 'relu': store to buffer 0 'x', which is declared read-only"));
    }
  }
}

BOOST_AUTO_TEST_CASE(incomplete_tables_are_reported) {
  const kb::LanguageTable& base = *languages().front();
  kb::LanguageTable missing = base;
  missing.fmax.clear();
  kb::LanguageTable unknown = base;
  unknown.exp = "exp({x})";
  kb::LanguageTable unclosed = base;
  unclosed.cast = "{type({a})";
  const Kernel relu = relu_kernel(10, 64);
  auto message = [&](const kb::LanguageTable& lang, const Kernel& k) -> std::string {
    try {
      kiln::render::render(k, lang);
    } catch (const Error& e) {
      BOOST_TEST(static_cast<int>(e.kind()) == static_cast<int>(ErrorKind::Internal));
      return e.what();
    }
    return "(rendered)";
  };
  BOOST_TEST(contains(message(missing, relu),
                      "rendering kernel 'relu' as " + base.name + ": the language table has no 'fmax' spelling"));
  BOOST_TEST(contains(message(unknown, kitchen_sink()), "table field 'exp' uses unknown placeholder {x}"));
  BOOST_TEST(contains(message(unclosed, relu), "table field 'cast' uses unknown placeholder {type({a}"));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(compile)

// Every rendered kernel compiles with every built-in backend's compiler for
// its first offline target (no device needed).
BOOST_AUTO_TEST_CASE(rendered_kernels_compile_for_every_backend) {
  const std::vector<Kernel> kernels = {kitchen_sink(), no_index_kernel(), relu_kernel(1 << 20, 256),
                                       subgroup_texel_sink()};
  for (const kb::Backend* backend : kb::all_backends()) {
    const std::vector<kb::TargetDesc> targets = backend->offline_targets();
    BOOST_TEST_REQUIRE(!targets.empty(), backend->name());
    for (const Kernel& k : kernels) {
      BOOST_TEST_CONTEXT("backend " << backend->name() << ", kernel " << k.name) {
        const kb::KernelSource source = kiln::render::make_kernel_source(k, backend->language());
        kb::KernelBinary binary;
        BOOST_CHECK_NO_THROW(binary = backend->compiler().compile(source, targets.front()));
        BOOST_TEST(!binary.data.empty());
      }
    }
  }
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(glsl_prelude)

// The host mirror of the prelude uses the same coefficients, so this bounds
// the formula itself; the device test below checks it as compiled GLSL.
BOOST_AUTO_TEST_CASE(erf_and_tanh_approximations_are_accurate) {
  double erf_error = 0, tanh_error = 0, tanh_relative = 0;
  for (int step = -200000; step <= 200000; ++step) {
    const float x = static_cast<float>(step) * 3e-5f;  // [-6, 6]
    erf_error = std::max(erf_error, std::fabs(double{kb::glsl_prelude_erf(x)} - std::erf(double{x})));
    const double t = std::tanh(double{x});
    const double e = std::fabs(double{kb::glsl_prelude_tanh(x)} - t);
    tanh_error = std::max(tanh_error, e);
    if (x != 0.0f) tanh_relative = std::max(tanh_relative, e / std::fabs(t));
  }
  BOOST_TEST_MESSAGE("erf max error " << erf_error << ", tanh max error " << tanh_error << " (relative "
                                      << tanh_relative << ")");
  BOOST_TEST(erf_error < 2e-7);
  BOOST_TEST(tanh_error < 2e-7);
  BOOST_TEST(tanh_relative < 5e-7);
  const float inf = std::numeric_limits<float>::infinity();
  BOOST_TEST(kb::glsl_prelude_erf(inf) == 1.0f);
  BOOST_TEST(kb::glsl_prelude_erf(-inf) == -1.0f);
  BOOST_TEST(kb::glsl_prelude_tanh(1e30f) == 1.0f);
  BOOST_TEST(kb::glsl_prelude_tanh(-inf) == -1.0f);
  BOOST_TEST(std::isnan(kb::glsl_prelude_erf(std::nanf(""))));
  BOOST_TEST(std::isnan(kb::glsl_prelude_tanh(std::nanf(""))));
}

BOOST_AUTO_TEST_CASE(prelude_functions_are_the_ones_the_table_calls) {
  const kb::LanguageTable& glsl = kb::get_backend("vulkan").language();
  BOOST_TEST(glsl.version_directive + glsl.prelude == kb::glsl_prelude());
  BOOST_TEST(glsl.version_directive == "#version 450\n");
  BOOST_TEST(contains(glsl.prelude, "float " + call_prefix(glsl.erf) + "float x)"));
  BOOST_TEST(contains(glsl.prelude, "float " + call_prefix(glsl.tanh) + "float x)"));
}

BOOST_AUTO_TEST_SUITE_END()

BOOST_AUTO_TEST_SUITE(vulkan_device)

namespace {

kb::Device& vulkan() {
  static const std::shared_ptr<kb::Device> device = [] {
    const kb::Backend& backend = kb::get_backend("vulkan");
    const auto reason = backend.unavailable_reason();
    BOOST_TEST_REQUIRE(!reason.has_value(), "Vulkan is unavailable: " << reason.value_or(""));
    return backend.create_device(0);
  }();
  return *device;
}

// Renders, compiles and runs `k` on the Vulkan device with `max_groups_x`
// limiting the grid width (to force a 2-D grid), and returns the buffers.
std::vector<std::vector<std::byte>> run_on_vulkan(const Kernel& k, std::vector<std::vector<std::byte>> buffers,
                                                  std::uint32_t max_groups_x) {
  kb::Device& device = vulkan();
  const kb::Backend& backend = kb::get_backend("vulkan");
  const kb::KernelSource source = kiln::render::make_kernel_source(k, backend.language());
  const kb::KernelBinary binary = backend.compiler().compile(source, device.target());
  const std::shared_ptr<kb::LoadedKernel> loaded = device.load_kernel(source, binary);
  std::vector<std::shared_ptr<kb::Buffer>> device_buffers;
  std::vector<kb::BufferBinding> bindings;
  for (const std::vector<std::byte>& data : buffers) {
    device_buffers.push_back(device.allocate(data.size()));
    device.upload(*device_buffers.back(), 0, data);
    bindings.push_back({device_buffers.back().get(), 0, data.size()});
  }
  const std::uint32_t max_x = std::min(max_groups_x, device.target().max_workgroup_count[0]);
  std::unique_ptr<kb::CommandList> commands = device.create_command_list();
  commands->dispatch(*loaded, dispatch_grid(k, max_x), bindings);
  commands->finish();
  commands->submit();
  for (std::size_t b = 0; b < buffers.size(); ++b) device.download(*device_buffers[b], 0, buffers[b]);
  return buffers;
}

template <class T>
std::vector<std::byte> to_bytes(const std::vector<T>& values) {
  std::vector<std::byte> out(values.size() * sizeof(T));
  std::memcpy(out.data(), values.data(), out.size());
  return out;
}

template <class T>
std::vector<T> from_bytes(const std::vector<std::byte>& data) {
  std::vector<T> out(data.size() / sizeof(T));
  std::memcpy(out.data(), data.data(), data.size());
  return out;
}

std::vector<std::vector<std::byte>> interpret_copy(const Kernel& k, std::vector<std::vector<std::byte>> buffers) {
  std::vector<std::span<std::byte>> spans(buffers.begin(), buffers.end());
  interpret(k, spans);
  return buffers;
}

}  // namespace

BOOST_AUTO_TEST_CASE(kitchen_sink_matches_the_interpreter) {
  const Kernel k = kitchen_sink();
  std::vector<float> x(100);
  std::vector<std::int32_t> n(100);
  std::vector<std::uint32_t> u(100);
  for (int t = 0; t < 100; ++t) {
    x[t] = static_cast<float>(t - 50) * 0.173f;
    n[t] = (t - 50) * 12345;
    u[t] = static_cast<std::uint32_t>(t) * 40000000u;
  }
  const std::vector<std::vector<std::byte>> inputs = {to_bytes(x), to_bytes(n), to_bytes(u),
                                                      std::vector<std::byte>(400), std::vector<std::byte>(400),
                                                      std::vector<std::byte>(1600)};
  const auto expected = interpret_copy(k, inputs);
  const auto actual = run_on_vulkan(k, inputs, 1u << 16);
  BOOST_TEST(from_bytes<std::int32_t>(actual[4]) == from_bytes<std::int32_t>(expected[4]),
             boost::test_tools::per_element());
  BOOST_TEST(from_bytes<std::uint32_t>(actual[2]) == from_bytes<std::uint32_t>(expected[2]),
             boost::test_tools::per_element());
  for (const std::size_t buffer : {std::size_t{3}, std::size_t{5}}) {
    const auto y_expected = from_bytes<float>(expected[buffer]), y_actual = from_bytes<float>(actual[buffer]);
    for (std::size_t t = 0; t < y_expected.size(); ++t)
      BOOST_TEST(std::fabs(y_actual[t] - y_expected[t]) <= 1e-5f * std::max(1.0f, std::fabs(y_expected[t])),
                 "buffer " << buffer << " [" << t << "]");
  }
}

BOOST_AUTO_TEST_CASE(subgroup_texel_sink_matches_the_interpreter) {
  const Kernel k = subgroup_texel_sink();
  BOOST_TEST_REQUIRE(!kb::get_backend("vulkan").supports(kiln::render::kernel_requirements(k), vulkan().target()),
                     "this test needs subgroups of 8 with broadcasts and texel buffers (lavapipe)");
  std::vector<float> t1(128), t4(4 * 128 + 2);  // t4: two floats past the last whole texel
  for (std::size_t t = 0; t < t1.size(); ++t) t1[t] = static_cast<float>(t) * 0.25f - 7.0f;
  for (std::size_t t = 0; t < t4.size(); ++t) t4[t] = static_cast<float>(t % 37) * 0.5f;
  const std::vector<std::vector<std::byte>> inputs = {to_bytes(t1), to_bytes(t4), std::vector<std::byte>(512),
                                                      std::vector<std::byte>(512)};
  const auto expected = interpret_copy(k, inputs);
  const auto actual = run_on_vulkan(k, inputs, 1u << 16);
  BOOST_TEST(from_bytes<float>(actual[2]) == from_bytes<float>(expected[2]), boost::test_tools::per_element());
  BOOST_TEST(from_bytes<std::int32_t>(actual[3]) == from_bytes<std::int32_t>(expected[3]),
             boost::test_tools::per_element());
}

BOOST_AUTO_TEST_CASE(two_dimensional_grid_covers_every_index_once) {
  // 1000 invocations in groups of 32, at most 5 groups per row: a 5 x 7 grid
  // with three idle groups in the last row.
  Kernel k("iota");
  Buf y = k.add_buffer("y", I, Access::read_write);
  k.global_size = 1000;
  k.workgroup_size = 32;
  k.body = {store(y, global_index(), load(y, global_index(), I) + global_index() + i32(1))};
  BOOST_TEST(dispatch_grid(k, 5)[1] == 7u);
  const auto out = from_bytes<std::int32_t>(run_on_vulkan(k, {std::vector<std::byte>(1000 * 4 + 64)}, 5)[0]);
  for (int t = 0; t < 1000; ++t) BOOST_TEST_REQUIRE(out[t] == t + 1);
  for (int t = 1000; t < 1016; ++t) BOOST_TEST(out[t] == 0);  // the guard kept the tail out
}

BOOST_AUTO_TEST_CASE(erf_and_tanh_on_the_device) {
  constexpr int kCount = 24001;
  Kernel k("erf_tanh");
  Buf x = k.add_buffer("x", F, Access::read);
  Buf e = k.add_buffer("e", F, Access::write);
  Buf t = k.add_buffer("t", F, Access::write);
  k.global_size = kCount;
  k.body = {store(e, global_index(), erf(load(x, global_index(), F))),
            store(t, global_index(), tanh(load(x, global_index(), F)))};
  std::vector<float> xs(kCount);
  for (int s = 0; s < kCount; ++s) xs[s] = static_cast<float>(s - kCount / 2) * 5e-4f;  // [-6, 6]
  xs[0] = -1e30f;
  xs[1] = 100.0f;
  const auto out = run_on_vulkan(
      k, {to_bytes(xs), std::vector<std::byte>(kCount * 4), std::vector<std::byte>(kCount * 4)}, 1u << 16);
  const auto erfs = from_bytes<float>(out[1]), tanhs = from_bytes<float>(out[2]);
  double erf_error = 0, tanh_error = 0;
  for (int s = 0; s < kCount; ++s) {
    erf_error = std::max(erf_error, std::fabs(double{erfs[s]} - std::erf(double{xs[s]})));
    tanh_error = std::max(tanh_error, std::fabs(double{tanhs[s]} - std::tanh(double{xs[s]})));
  }
  BOOST_TEST_MESSAGE("device erf max error " << erf_error << ", tanh max error " << tanh_error);
  BOOST_TEST(erf_error < 2e-7);
  BOOST_TEST(tanh_error < 1e-6);  // includes the driver's exp()
}

BOOST_AUTO_TEST_SUITE_END()
