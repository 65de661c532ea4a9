// GLSL 4.50 for Vulkan: storage buffers in descriptor set 0 (binding = buffer
// index), a literal local_size_x, compiled for a Vulkan 1.1 environment.
#include "backends/vulkan/language.h"

#include "shaders/preludes.h"

namespace kiln::backend {

const LanguageTable& glsl_language() {
  static const LanguageTable table = [] {
    LanguageTable t;
    t.name = "glsl";
    // The prelude opens with its #version line; extension directives a
    // kernel needs go between the two.
    const std::string& prelude = shaders::glsl_prelude();
    const std::size_t first_line = prelude.find('\n') + 1;
    t.version_directive = prelude.substr(0, first_line);
    t.prelude = prelude.substr(first_line);
    t.type_f32 = "float";
    t.type_i32 = "int";
    t.type_u32 = "uint";
    t.type_bool = "bool";
    t.type_i64 = "int64_t";
    t.i64_suffix = "l";
    // GL_EXT_shader_8bit_storage allows 8-bit values only in buffers and in
    // conversions to and from 32-bit integers.
    t.bool_storage = "uint8_t";
    t.bool_from_storage = "(uint({a}) != 0u)";
    t.bool_to_storage = "uint8_t(({a}) ? 1u : 0u)";
    // 16-bit floats as uint16_t bits (GL_EXT_shader_16bit_storage, no
    // float16 arithmetic needed), converted by exact integer helpers:
    // Vulkan leaves a narrowing conversion's rounding (even or toward zero)
    // and unpackHalf2x16's subnormals to the driver.
    t.f16_storage = "uint16_t";
    t.f16_from_storage = "kiln_f16_to_f32(uint({a}))";
    t.f16_to_storage = "uint16_t(kiln_f32_to_f16({a}))";
    t.bf16_storage = "uint16_t";
    t.bf16_from_storage = "uintBitsToFloat(uint({a}) << 16)";
    t.bf16_to_storage = "uint16_t(kiln_f32_to_bf16({a}))";
    t.storage16_directives = "#extension GL_EXT_shader_16bit_storage : require\n";
    t.vector_u16 = "u16vec{width}";
    t.vector_u16_value = "uvec{width}";
    t.storage16_helpers =
        "uint kiln_f32_to_f16(float f) {\n"
        "  uint x = floatBitsToUint(f);\n"
        "  uint sign = (x >> 16) & 0x8000u;\n"
        "  x &= 0x7fffffffu;\n"
        "  if (x >= 0x7f800000u) return sign | (x > 0x7f800000u ? 0x7e00u : 0x7c00u);\n"
        "  if (x >= 0x47800000u) return sign | 0x7c00u;\n"
        "  uint e = x >> 23, m = x & 0x7fffffu, r, shift;\n"
        "  if (e >= 113u) { r = ((e - 112u) << 10) | (m >> 13); shift = 13u; }\n"
        "  else { if (e < 102u) return sign; m |= 0x800000u; shift = 126u - e; r = m >> shift; }\n"
        "  uint rem = m & ((1u << shift) - 1u), half_unit = 1u << (shift - 1u);\n"
        "  if (rem > half_unit || (rem == half_unit && (r & 1u) != 0u)) r += 1u;\n"
        "  return sign | r;\n"
        "}\n"
        // Branch-free (selects), as it sits in GEMM inner loops: a subnormal
        // is m * 2^-24, exact in f32.
        "float kiln_f16_to_f32(uint h) {\n"
        "  uint e = (h >> 10) & 0x1fu, m = h & 0x3ffu;\n"
        "  float magnitude = e == 0u ? float(m) * 5.9604644775390625e-8\n"
        "                  : uintBitsToFloat((e == 31u ? 0x7f800000u : (e + 112u) << 23) | (m << 13));\n"
        "  return uintBitsToFloat(floatBitsToUint(magnitude) | ((h & 0x8000u) << 16));\n"
        "}\n"
        "uint kiln_f32_to_bf16(float f) {\n"
        "  uint x = floatBitsToUint(f);\n"
        "  if ((x & 0x7fffffffu) > 0x7f800000u) return (x >> 16) | 0x40u;\n"
        "  return (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;\n"
        "}\n";
    t.int64_directives = "#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require\n";
    t.storage8_directives = "#extension GL_EXT_shader_8bit_storage : require\n";
    t.float_suffix = "";
    t.float_inf = "uintBitsToFloat(0x7F800000u)";
    t.float_nan = "uintBitsToFloat(0x7FC00000u)";
    t.buffer_global_decl =
        "layout(std430, set = 0, binding = {binding}) {readonly}buffer KilnBuffer{binding} {{ {type} data[]; }} "
        "{name};";
    t.buffer_param_decl = "";
    t.readonly_qualifier = "readonly ";
    t.buffer_access = "{name}.data[{index}]";
    // A vector view is a second block on the same binding (SPIR-V allows
    // aliased bindings); std430 gives vecN arrays an N-element stride.
    t.vector_f32 = "vec{width}";
    t.vector_i32 = "ivec{width}";
    t.vector_u32 = "uvec{width}";
    t.buffer_vector_global_decl =
        "layout(std430, set = 0, binding = {binding}) {readonly}buffer KilnBuffer{binding}x{width} {{ {vector_type} "
        "data[]; }} {view};";
    t.buffer_vector_access = "{view}.data[{index}]";
    t.vector_construct = "{vector_type}({components})";
    // Push constants: scalar members are 4 bytes apart in every layout.
    t.params_global_decl = "layout(push_constant) uniform KilnParams {{ {members} }} kiln_params;";
    t.params_param_decl = "";
    t.param_access = "kiln_params.p{index}";
    t.extra_params = "";
    t.kernel_header = "layout(local_size_x = {wg}) in;\nvoid main()";
    t.global_index_expr =
        "(gl_GlobalInvocationID.x + gl_GlobalInvocationID.y * (gl_NumWorkGroups.x * gl_WorkGroupSize.x))";
    t.shared_global_decl = "shared {type} {name}[{count}];";
    t.shared_access = "{name}[{index}]";
    // barrier() orders execution; shared writes before it are made visible
    // to the group by the memory barrier (GLSL 4.50, section 8.16).
    t.barrier = "memoryBarrierShared(); barrier();";
    // Texel buffers: one uniform texel buffer per binding, an R32 or RGBA32
    // float view; texelFetch of a texel index.
    t.texel_buffer_global_decl = "layout(set = 0, binding = {binding}) uniform samplerBuffer {name};";
    t.texel_load = "texelFetch({name}, int({index})).x";
    t.texel_component_load = "kiln_texel4({name}, int({index}))";
    t.texel_vector_load = "texelFetch({name}, int({index}))";
    t.texel_global_helpers =
        "float kiln_texel4(samplerBuffer texels, int i) { return texelFetch(texels, i >> 2)[i & 3]; }";
    t.subgroup_directives =
        "#extension GL_KHR_shader_subgroup_basic : require\n#extension GL_KHR_shader_subgroup_ballot : require\n";
    t.subgroup_lane_expr = "int(gl_SubgroupInvocationID)";
    t.subgroup_id_expr = "int(gl_SubgroupID)";
    t.subgroup_broadcast = "subgroupBroadcast({a}, {lane}u)";
    t.local_index_expr = "int(gl_LocalInvocationIndex)";
    t.workgroup_index_expr = "int(gl_WorkGroupID.x + gl_WorkGroupID.y * gl_NumWorkGroups.x)";
    t.exp = "exp({a})";
    t.log = "log({a})";
    t.sqrt = "sqrt({a})";
    t.rsqrt = "inversesqrt({a})";
    t.tanh = "kiln_tanh({a})";  // prelude: the built-in may overflow to NaN
    t.erf = "kiln_erf({a})";    // prelude: GLSL has no erf
    t.abs = "abs({a})";
    t.iabs = "abs({a})";
    t.floor = "floor({a})";
    t.ceil = "ceil({a})";
    t.pow = "pow({a}, {b})";
    t.fmin = "min({a}, {b})";
    t.fmax = "max({a}, {b})";
    t.imin = "min({a}, {b})";
    t.imax = "max({a}, {b})";
    t.umin = "min({a}, {b})";
    t.umax = "max({a}, {b})";
    t.labs = "abs({a})";
    t.lmin = "min({a}, {b})";
    t.lmax = "max({a}, {b})";
    t.cast = "{type}({a})";
    return t;
  }();
  return table;
}

}  // namespace kiln::backend
