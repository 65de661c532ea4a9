// Language tables shared by several backends.
#include "backends/language.h"

#include <string>
#include <utility>

namespace kiln::backend {

namespace {

std::string substitute(std::string pattern, const std::string& a) {
  for (std::size_t at = pattern.find("{a}"); at != std::string::npos; at = pattern.find("{a}", at + a.size()))
    pattern.replace(at, 3, a);
  return pattern;
}

// `a` converted to `type` in the spelling's language.
std::string spell(const Storage16Spelling& s, const std::string& type, const std::string& a) {
  std::string out = s.cast;
  out.replace(out.find("{type}"), 6, type);
  return substitute(out, a);
}

}  // namespace

std::string f16_conversions(const Storage16Spelling& s) {
  const std::string& u32 = s.u32;
  const std::string q = s.qualifier.empty() ? "" : s.qualifier + " ";
  const auto to16 = [&](const std::string& a) { return spell(s, s.u16, a); };
  // A normal result drops 13 mantissa bits, a subnormal one counts units of
  // 2^-24; both round on the dropped bits, and a carry moves into the
  // exponent (or to infinity) correctly. Widening is branch-free (it sits in
  // GEMM inner loops): a subnormal is m * 2^-24, exact in f32.
  return q + s.u16 + " kiln_f32_to_f16(float f) {\n" +
         "  " + u32 + " x = " + substitute(s.bits, "f") + ";\n" +
         "  " + u32 + " sign = (x >> 16) & 0x8000u;\n" +
         "  x &= 0x7fffffffu;\n" +
         "  if (x >= 0x7f800000u) return " + to16("sign | (x > 0x7f800000u ? 0x7e00u : 0x7c00u)") + ";\n" +
         "  if (x >= 0x47800000u) return " + to16("sign | 0x7c00u") + ";\n" +
         "  " + u32 + " e = x >> 23, m = x & 0x7fffffu, r, shift;\n" +
         "  if (e >= 113u) { r = ((e - 112u) << 10) | (m >> 13); shift = 13u; }\n" +
         "  else { if (e < 102u) return " + to16("sign") + "; m |= 0x800000u; shift = 126u - e; r = m >> shift; }\n" +
         "  " + u32 + " rem = m & ((1u << shift) - 1u), half_unit = 1u << (shift - 1u);\n" +
         "  if (rem > half_unit || (rem == half_unit && (r & 1u) != 0u)) r += 1u;\n" +
         "  return " + to16("sign | r") + ";\n" +
         "}\n" +
         q + "float kiln_f16_to_f32(" + s.u16 + " h) {\n" +
         "  " + u32 + " e = (" + spell(s, u32, "h") + " >> 10) & 0x1fu, m = " + spell(s, u32, "h") + " & 0x3ffu;\n" +
         "  float magnitude = e == 0u ? " + spell(s, "float", "m") + " * 5.9604644775390625e-8f\n" +
         "                  : " + substitute(s.value, "(e == 31u ? 0x7f800000u : (e + 112u) << 23) | (m << 13)") + ";\n" +
         "  return " + substitute(s.value, substitute(s.bits, "magnitude") + " | ((" + spell(s, u32, "h") +
                                               " & 0x8000u) << 16)") + ";\n" +
         "}\n";
}

std::string bf16_conversions(const Storage16Spelling& s) {
  const std::string q = s.qualifier.empty() ? "" : s.qualifier + " ";
  // Adding 0x7fff plus the kept part's lowest bit rounds to nearest even.
  return q + s.u16 + " kiln_f32_to_bf16(float f) {\n" +
         "  " + s.u32 + " x = " + substitute(s.bits, "f") + ";\n" +
         "  if ((x & 0x7fffffffu) > 0x7f800000u) return " + spell(s, s.u16, "(x >> 16) | 0x40u") + ";\n" +
         "  return " + spell(s, s.u16, "(x + 0x7fffu + ((x >> 16) & 1u)) >> 16") + ";\n" +
         "}\n" +
         q + "float kiln_bf16_to_f32(" + s.u16 + " h) { return " + substitute(s.value, spell(s, s.u32, "h") + " << 16") +
         "; }\n";
}

const Storage16Spelling kCudaStyleStorage16 = {"__device__ __forceinline__", "unsigned int", "unsigned short",
                                              "__float_as_uint({a})", "__uint_as_float({a})", "(({type})({a}))"};

LanguageTable cuda_style_language(std::string name, std::string prelude) {
  // CUDA C++ as NVRTC and hiprtc read it: buffers are __restrict__ pointer
  // parameters of an extern "C" kernel (an unmangled name), launched as 1-D
  // blocks of workgroup_size threads on a 2-D grid.
  LanguageTable t;
  t.file_extension = name == "hip" ? ".hip" : ".cu";
  t.name = std::move(name);
  t.prelude = std::move(prelude);
  t.type_f32 = "float";
  t.type_i32 = "int";
  t.type_u32 = "unsigned int";
  t.type_bool = "bool";
  t.type_i64 = "long long";
  t.i64_suffix = "LL";
  t.bool_storage = "unsigned char";
  t.bool_from_storage = "(({a}) != 0)";
  t.bool_to_storage = "((unsigned char)(({a}) ? 1 : 0))";
  // 16-bit floats as their bits: NVRTC finds cuda_fp16.h only with the
  // toolkit's include folder, which a deployed machine may lack, so f16
  // conversions are the PTX instructions its __half uses (cvt.rn: nearest
  // even) and bf16 the integer rounding (cvt.rn.bf16 needs sm_80).
  t.f16_storage = "unsigned short";
  t.f16_from_storage = "kiln_f16_to_f32({a})";
  t.f16_to_storage = "kiln_f32_to_f16({a})";
  t.bf16_storage = "unsigned short";
  t.bf16_from_storage = "kiln_bf16_to_f32({a})";
  t.bf16_to_storage = "kiln_f32_to_bf16({a})";
  t.vector_u16 = "ushort{width}";
  t.vector_u16_value = "ushort{width}";
  t.f16_to_bits = t.f16_to_storage;
  t.bf16_to_bits = t.bf16_to_storage;
  t.vector_u16_store = "{a}";
  t.storage16_helpers =
      "__device__ __forceinline__ unsigned short kiln_f32_to_f16(float f) {\n"
      "  unsigned short h; asm(\"cvt.rn.f16.f32 %0, %1;\" : \"=h\"(h) : \"f\"(f)); return h;\n"
      "}\n"
      "__device__ __forceinline__ float kiln_f16_to_f32(unsigned short h) {\n"
      "  float f; asm(\"cvt.f32.f16 %0, %1;\" : \"=f\"(f) : \"h\"(h)); return f;\n"
      "}\n" +
      bf16_conversions(kCudaStyleStorage16);
  t.float_suffix = "f";
  t.f16_round = "kiln_f16_to_f32(kiln_f32_to_f16({a}))";
  t.bf16_round = "kiln_bf16_to_f32(kiln_f32_to_bf16({a}))";
  t.float_to_bits = "__float_as_uint({a})";
  t.bits_to_float = "__uint_as_float({a})";
  t.float_inf = "__int_as_float(0x7f800000)";
  t.float_nan = "__int_as_float(0x7fc00000)";
  t.buffer_global_decl = "";
  t.buffer_param_decl = "{readonly}{type}* __restrict__ {name}";
  t.readonly_qualifier = "const ";
  t.buffer_access = "{name}[{index}]";
  // float4 loads need 16-byte aligned addresses: buffers are bound at
  // offsets aligned to 16 and vector indices count whole vectors.
  t.vector_f32 = "float{width}";
  t.vector_i32 = "int{width}";
  t.vector_u32 = "uint{width}";
  t.buffer_vector_global_decl = "";
  t.buffer_vector_access = "reinterpret_cast<{readonly}{vector_type}*>({name})[{index}]";
  t.vector_construct = "make_{vector_type}({components})";
  // Parameters travel as one struct argument, copied by value at launch.
  t.params_global_decl = "struct KilnParams {{ {members} }};";
  t.params_param_decl = "KilnParams kiln_params";
  t.param_access = "kiln_params.p{index}";
  t.extra_params = "";
  t.kernel_header = "extern \"C\" __global__ void __launch_bounds__({wg}) {name}({params})";
  t.global_index_expr = "(blockIdx.x * blockDim.x + threadIdx.x + blockIdx.y * (gridDim.x * blockDim.x))";
  t.shared_local_decl = "__shared__ {type} {name}[{count}];";
  t.shared_access = "{name}[{index}]";
  t.barrier = "__syncthreads();";
  // Texel buffers are read-only pointers read through the read-only data
  // cache (__ldg); float4 texels need 16-byte aligned bindings, as vectors do.
  t.texel_buffer_param_decl = "const float* __restrict__ {name}";
  t.texel_load = "__ldg(&{name}[{index}])";
  t.texel_component_load = "__ldg(&{name}[{index}])";
  t.texel_vector_load = "__ldg(&reinterpret_cast<const float4*>({name})[{index}])";
  // A kernel's subgroups are {sg}-lane slices of a warp: consecutive
  // threads, and shuffles confined to them by the width argument. The mask
  // names the whole warp, so blocks are whole warps (supports() checks).
  t.subgroup_lane_expr = "((int)(threadIdx.x % {sg}u))";
  t.subgroup_id_expr = "((int)(threadIdx.x / {sg}u))";
  t.subgroup_broadcast = "__shfl_sync(0xffffffffu, {a}, {lane}, {sg})";
  t.local_index_expr = "((int)threadIdx.x)";
  t.workgroup_index_expr = "((int)(blockIdx.x + blockIdx.y * gridDim.x))";
  t.exp = "expf({a})";
  t.log = "logf({a})";
  t.sqrt = "sqrtf({a})";
  t.rsqrt = "rsqrtf({a})";
  t.tanh = "tanhf({a})";
  t.erf = "erff({a})";
  t.abs = "fabsf({a})";
  t.iabs = "abs({a})";
  // Helpers of their own: CUDA and HIP differ in their long long overloads.
  t.int64_helpers =
      "__device__ __forceinline__ long long kiln_lmin(long long a, long long b) { return a < b ? a : b; }\n"
      "__device__ __forceinline__ long long kiln_lmax(long long a, long long b) { return a > b ? a : b; }\n"
      "__device__ __forceinline__ long long kiln_labs(long long a) { return a < 0 ? "
      "(long long)(0ull - (unsigned long long)a) : a; }\n";
  t.labs = "kiln_labs({a})";
  t.lmin = "kiln_lmin({a}, {b})";
  t.lmax = "kiln_lmax({a}, {b})";
  t.floor = "floorf({a})";
  t.ceil = "ceilf({a})";
  t.pow = "powf({a}, {b})";
  t.fmin = "fminf({a}, {b})";
  t.fmax = "fmaxf({a}, {b})";
  t.imin = "min({a}, {b})";
  t.imax = "max({a}, {b})";
  t.umin = "min({a}, {b})";  // CUDA and HIP overload min/max for unsigned
  t.umax = "max({a}, {b})";
  t.cast = "(({type})({a}))";
  return t;
}

const std::string& c99_prelude() {
  static const std::string text =
      "#include <math.h>\n"
      "#include <stdbool.h>\n"
      "#include <stdint.h>\n"
      "#include <stdlib.h>\n"
      "\n"
      "typedef struct { uint32_t x, y, z; } kiln_uvec3;\n"
      "static inline int32_t kiln_imin(int32_t a, int32_t b) { return a < b ? a : b; }\n"
      "static inline int64_t kiln_lmin(int64_t a, int64_t b) { return a < b ? a : b; }\n"
      "static inline int64_t kiln_lmax(int64_t a, int64_t b) { return a > b ? a : b; }\n"
      "static inline int64_t kiln_labs(int64_t a) { return a < 0 ? (int64_t)(0u - (uint64_t)a) : a; }\n"
      "static inline int32_t kiln_imax(int32_t a, int32_t b) { return a > b ? a : b; }\n"
      "static inline uint32_t kiln_umin(uint32_t a, uint32_t b) { return a < b ? a : b; }\n"
      "static inline uint32_t kiln_umax(uint32_t a, uint32_t b) { return a > b ? a : b; }\n";
  return text;
}

LanguageTable c99_language(const std::string& extra_prelude) {
  LanguageTable t;
  t.name = "c99";
  t.file_extension = ".c";
  t.prelude = c99_prelude() + extra_prelude;
  t.type_f32 = "float";
  t.type_i32 = "int32_t";
  t.type_u32 = "uint32_t";
  t.type_bool = "bool";
  t.type_i64 = "int64_t";
  t.i64_suffix = "LL";
  t.bool_storage = "uint8_t";
  t.bool_from_storage = "(({a}) != 0)";
  t.bool_to_storage = "((uint8_t)(({a}) ? 1 : 0))";
  // 16-bit floats as their bits (C99 has no 16-bit float type; _Float16 is
  // an optional extension), converted exactly by integer helpers.
  t.f16_storage = "uint16_t";
  t.f16_from_storage = "kiln_f16_to_f32({a})";
  t.f16_to_storage = "kiln_f32_to_f16({a})";
  t.bf16_storage = "uint16_t";
  t.bf16_from_storage = "kiln_bf16_to_f32({a})";
  t.bf16_to_storage = "kiln_f32_to_bf16({a})";
  const Storage16Spelling c99 = {"static inline", "uint32_t", "uint16_t",
                                 "((union { float f; uint32_t u; }){ .f = ({a}) }).u",
                                 "((union { uint32_t u; float f; }){ .u = ({a}) }).f", "(({type})({a}))"};
  t.storage16_helpers = f16_conversions(c99) + bf16_conversions(c99);
  t.f16_round = "kiln_f16_to_f32(kiln_f32_to_f16({a}))";
  t.bf16_round = "kiln_bf16_to_f32(kiln_f32_to_bf16({a}))";
  // The same unions, their braces doubled for the renderer's format strings.
  t.float_to_bits = "((union {{ float f; uint32_t u; }}){{ .f = ({a}) }}).u";
  t.bits_to_float = "((union {{ uint32_t u; float f; }}){{ .u = ({a}) }}).f";
  t.float_suffix = "f";
  t.float_inf = "INFINITY";
  t.float_nan = "NAN";
  t.buffer_global_decl = "";
  t.buffer_param_decl = "{readonly}{type}* restrict {name}";
  t.readonly_qualifier = "const ";
  t.buffer_access = "{name}[{index}]";
  t.vector_f32 = "";  // C99 has no vector types: vector loads become scalar loads
  t.params_global_decl = "typedef struct {{ {members} }} KilnParams;";
  t.params_param_decl = "KilnParams kiln_params";
  t.param_access = "kiln_params.p{index}";
  t.extra_params = "kiln_uvec3 kiln_global_id, kiln_uvec3 kiln_num_groups";
  t.kernel_header = "void {name}({params})";
  t.global_index_expr = "(kiln_global_id.x + kiln_global_id.y * (kiln_num_groups.x * {wg}u))";
  // One call runs one invocation, so a workgroup's shared arrays come from
  // the caller, and a barrier is the host's: it must run the group's
  // invocations concurrently (threads or fibres) and implement kiln_barrier.
  t.shared_param_decl = "{type}* restrict {name}";
  t.shared_access = "{name}[{index}]";
  t.barrier = "kiln_barrier();";
  t.barrier_global_decl = "void kiln_barrier(void);  // the host's workgroup barrier";
  // Texel buffers are plain read-only pointers.
  t.texel_buffer_param_decl = "const float* restrict {name}";
  t.texel_load = "{name}[{index}]";
  t.texel_component_load = "{name}[{index}]";
  // One call runs one invocation: a subgroup is that invocation alone (the
  // null target's subgroup size is 1), so a broadcast from lane 0 is the value.
  t.subgroup_lane_expr = "((int32_t)(kiln_global_id.x % {wg}u % {sg}u))";
  t.subgroup_id_expr = "((int32_t)(kiln_global_id.x % {wg}u / {sg}u))";
  t.subgroup_broadcast = "({a})";
  t.local_index_expr = "((int32_t)(kiln_global_id.x % {wg}u))";
  t.workgroup_index_expr = "((int32_t)(kiln_global_id.x / {wg}u + kiln_global_id.y * kiln_num_groups.x))";
  t.exp = "expf({a})";
  t.log = "logf({a})";
  t.sqrt = "sqrtf({a})";
  t.rsqrt = "(1.0f / sqrtf({a}))";
  t.tanh = "tanhf({a})";
  t.erf = "erff({a})";
  t.abs = "fabsf({a})";
  t.iabs = "abs({a})";
  t.floor = "floorf({a})";
  t.ceil = "ceilf({a})";
  t.pow = "powf({a}, {b})";
  t.fmin = "fminf({a}, {b})";
  t.fmax = "fmaxf({a}, {b})";
  t.imin = "kiln_imin({a}, {b})";
  t.lmin = "kiln_lmin({a}, {b})";
  t.lmax = "kiln_lmax({a}, {b})";
  t.labs = "kiln_labs({a})";
  t.imax = "kiln_imax({a}, {b})";
  t.umin = "kiln_umin({a}, {b})";
  t.umax = "kiln_umax({a}, {b})";
  t.cast = "(({type})({a}))";
  return t;
}

}  // namespace kiln::backend
