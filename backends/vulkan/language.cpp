// GLSL 4.50 for Vulkan: storage buffers in descriptor set 0 (binding = buffer
// index), a literal local_size_x, compiled for a Vulkan 1.1 environment.
#include "backends/vulkan/language.h"

#include "backends/vulkan/glsl_prelude.h"

namespace kiln::backend {

namespace {

const Storage16Spelling kGlslStorage16 = {"", "uint", "uint", "floatBitsToUint({a})", "uintBitsToFloat({a})", "{type}({a})"};

// f16 elements as float16_t, converted by the device (GL_EXT_shader_16bit_storage
// allows conversions and loads and stores of 16-bit values without 16-bit
// arithmetic), with the execution modes that make its conversions kir's:
// round to nearest even (and, for `native`, subnormals kept).
void use_native_f16(LanguageTable& t, F16Conversion f16) {
  t.f16_storage = "float16_t";
  t.f16_from_storage = "float({a})";
  t.f16_to_storage = "float16_t({a})";
  t.vector_f16 = "f16vec{width}";
  t.vector_f16_value = "vec{width}";
  t.vector_f16_store = "f16vec{width}({a})";
  t.storage16_directives += "#extension GL_EXT_spirv_intrinsics : require\n";
  // SPIR-V: capability RoundingModeRTE (4467), execution mode
  // RoundingModeRTE (4462); capability DenormPreserve (4464), mode
  // DenormPreserve (4459); each for 16-bit floats.
  std::string modes = "spirv_execution_mode(extensions = [\"SPV_KHR_float_controls\"], capabilities = [4467], 4462, 16);\n";
  if (f16 == F16Conversion::native)
    modes += "spirv_execution_mode(extensions = [\"SPV_KHR_float_controls\"], capabilities = [4464], 4459, 16);\n";
  // The integer helpers stay for rounding without 16-bit values (f16_round).
  t.storage16_helpers = modes + f16_conversions(kGlslStorage16) + bf16_conversions(kGlslStorage16);
}

LanguageTable make_glsl_language(F16Conversion f16) {
  LanguageTable t;
  t.name = "glsl";
  t.file_extension = ".comp";
  // The prelude opens with its #version line; extension directives a
  // kernel needs go between the two.
  const std::string& prelude = glsl_prelude();
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
  // float16 arithmetic needed), converted by exact integer helpers: unless
  // a kernel asks (use_native_f16), Vulkan leaves a narrowing conversion's
  // rounding (even or toward zero) and f16 subnormals to the driver.
  t.f16_storage = "uint16_t";
  t.f16_from_storage = "kiln_f16_to_f32(uint({a}))";
  t.f16_to_storage = "uint16_t(kiln_f32_to_f16({a}))";
  t.bf16_storage = "uint16_t";
  t.bf16_from_storage = "uintBitsToFloat(uint({a}) << 16)";
  t.bf16_to_storage = "uint16_t(kiln_f32_to_bf16({a}))";
  t.storage16_directives = "#extension GL_EXT_shader_16bit_storage : require\n";
  t.vector_u16 = "u16vec{width}";
  t.vector_u16_value = "uvec{width}";
  // Without 16-bit arithmetic a 16-bit vector is only converted from a
  // 32-bit one, never built from 16-bit scalars.
  t.f16_to_bits = "kiln_f32_to_f16({a})";
  t.bf16_to_bits = "kiln_f32_to_bf16({a})";
  t.vector_u16_store = "u16vec{width}({a})";
  t.storage16_helpers = f16_conversions(kGlslStorage16) + bf16_conversions(kGlslStorage16);
  t.int64_directives = "#extension GL_EXT_shader_explicit_arithmetic_types_int64 : require\n";
  t.storage8_directives = "#extension GL_EXT_shader_8bit_storage : require\n";
  t.float_suffix = "";
  t.f16_round = "kiln_f16_to_f32(kiln_f32_to_f16({a}))";
  // f16 arithmetic in float16_t (devices with shaderFloat16: TargetDesc::fp16).
  t.type_f16 = "float16_t";
  t.f16_arithmetic_directives = "#extension GL_EXT_shader_explicit_arithmetic_types_float16 : require\n";
  t.bf16_round = "kiln_bf16_to_f32(kiln_f32_to_bf16({a}))";
  t.float_to_bits = "floatBitsToUint({a})";
  t.bits_to_float = "uintBitsToFloat({a})";
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
  t.texel_f16_as_f32 = true;
  t.texel_bf16_global_decl = "layout(set = 0, binding = {binding}) uniform usamplerBuffer {name};";
  t.texel_bf16_load = "uintBitsToFloat(texelFetch({name}, int({index})).x << 16)";
  t.texel_bf16_component_load = "kiln_texel4_bf16({name}, int({index}))";
  t.texel_bf16_vector_load = "uintBitsToFloat(texelFetch({name}, int({index})) << 16)";
  t.texel_bf16_global_helpers =
      "float kiln_texel4_bf16(usamplerBuffer texels, int i) { return uintBitsToFloat(texelFetch(texels, i >> 2)[i & 3] << "
      "16); }";
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
  if (f16 != F16Conversion::integer) use_native_f16(t, f16);
  return t;
}

}  // namespace

const LanguageTable& glsl_language(F16Conversion f16) {
  static const LanguageTable integer = make_glsl_language(F16Conversion::integer);
  static const LanguageTable native = make_glsl_language(F16Conversion::native);
  static const LanguageTable native_rte = make_glsl_language(F16Conversion::native_rte);
  switch (f16) {
    case F16Conversion::integer: return integer;
    case F16Conversion::native: return native;
    case F16Conversion::native_rte: return native_rte;
  }
  return integer;
}

}  // namespace kiln::backend
