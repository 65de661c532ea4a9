// A C-style language described as data: the spellings that differ between
// GLSL, CUDA C++ and HIP C++. The renderer core (src/render/) walks the kernel
// IR once and looks every difference up here; there is no per-language branch.
//
// Format strings use {placeholders}; the renderer documents which ones each
// field receives.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kiln::backend {

// A matrix instruction's operation (kir matrix fragments in subgroups of
// more than one lane): `lanes` lanes together multiply an m x k tile by a
// k x n tile, both of `inputs` ("tf32", "f16" or "bf16", kir's
// MatrixPrecision names), into an m x n f32 accumulator. Targets list the
// ones they run (TargetDesc::matrix_shapes); "tf32 16x8x8 in 32 lanes".
struct MatrixShape {
  std::string inputs;
  std::uint32_t m = 0, n = 0, k = 0, lanes = 0;
  friend bool operator==(const MatrixShape&, const MatrixShape&) = default;
};
std::string matrix_shape_name(const MatrixShape& shape);

// Which elements of a tile each lane holds: element e (0 <= e < count) of
// the lane with index L lies at
//   row = row_hi * hi + row_lo * lo + row[e],  col = col_hi * hi + col_lo * lo + col[e]
// where lo is L's low `lane_bits` bits and hi the rest (NVIDIA's "groupID"
// and "threadID_in_group" for lane_bits 2). Every (row, col) of the tile is
// held by exactly one lane's element.
struct FragmentLayout {
  std::uint32_t row_hi = 0, row_lo = 0, col_hi = 0, col_lo = 0;
  std::vector<std::uint32_t> row, col;
};

// How a language runs one MatrixShape: the lanes' layouts of the a (m x k),
// b (k x n) and accumulator (m x n) tiles, and the multiply-add. Each lane
// keeps its elements as an array of f32 (a and b already rounded to the
// inputs' precision); `call` is a statement computing d = a * b + c over
// those arrays (placeholders {d} {a} {b} {c}; d may be c), through helpers
// that `helpers` defines (emitted once after the prelude of a kernel that
// uses the instruction).
struct MatrixInstruction {
  MatrixShape shape;
  std::uint32_t lane_bits = 0;
  FragmentLayout a, b, accumulator;
  std::string helpers;
  std::string call;
};

struct LanguageTable {
  std::string name;     // "glsl", "cuda", "hip", "c99" (null backend)
  std::string file_extension;  // of a source file editors and compilers recognise: ".comp", ".cu", ".hip", ".c"
  // The first line of every kernel (GLSL "#version 450"), before any
  // directive the kernel needs; empty where the language has none.
  std::string version_directive;
  std::string prelude;  // text emitted before every kernel (helpers such as erf for GLSL)

  // Scalar type spellings.
  std::string type_f32, type_i32, type_u32, type_bool, type_i64;
  // The suffix of an i64 literal (GLSL "l", C/C++ "LL").
  std::string i64_suffix;
  // Booleans in buffers: one byte each (kir element_bytes), declared as
  // bool_storage; bool_from_storage turns a loaded byte {a} into a bool and
  // bool_to_storage a bool {a} into the byte to store.
  std::string bool_storage, bool_from_storage, bool_to_storage;
  // Directives after version_directive of a kernel with i64 values or
  // one-byte (bool) buffer elements (GLSL extensions), and helper functions
  // after the prelude of a kernel with i64 values (CUDA/HIP); empty where
  // the language needs none.
  std::string int64_directives, storage8_directives, int64_helpers;
  // 16-bit float buffers (kir f16 and bf16: storage types whose values are
  // f32). Elements are declared as *_storage; *_from_storage widens a loaded
  // element {a} to float (exactly) and *_to_storage rounds a float {a} to
  // nearest even for the store, as kir defines it. storage16_directives
  // follow version_directive and storage16_helpers the prelude in a kernel
  // with such a buffer. A vector load of such a buffer reads a vector of
  // vector_u16 (placeholder {width}: GLSL "u16vec{width}", CUDA
  // "ushort{width}") into a temporary of vector_u16_value (GLSL, where
  // 16-bit values live only in buffers: "uvec{width}"), constructed from it,
  // whose components *_from_storage widen; with vector_u16 empty, one
  // scalar access per component.
  // A language whose f16 elements are its own 16-bit float type (GLSL
  // float16_t on a device that converts exactly) may read and write them as
  // vectors of it: vector_f16 (placeholder {width}) is the view's type,
  // vector_f16_value the f32 vector a loaded one is converted to (its
  // components need no f16_from_storage: that spelling must then accept a
  // float), and vector_f16_store ({width}, {a}: an f32 vector) the f16
  // vector stored. Empty: f16 vectors are read as vector_u16 and stored per
  // component.
  std::string f16_storage, f16_from_storage, f16_to_storage, vector_u16, vector_u16_value;
  std::string vector_f16, vector_f16_value, vector_f16_store;
  // A vector store of 16-bit elements as bits: *_to_bits rounds a float {a}
  // to the element's bits, of vector_u16_value's component type; those are
  // built into a vector_u16_value (vector_construct) and vector_u16_store
  // ({width}, {a}: that vector) is what is stored. Empty vector_u16_store:
  // one scalar store per component.
  std::string f16_to_bits, bf16_to_bits, vector_u16_store;
  // An f32 {a} rounded to f16 / bf16 and widened back, with 32-bit values
  // only (matrix fragments emulated by one lane round their inputs so).
  std::string f16_round, bf16_round;
  // f16 arithmetic (kir's f16 values): type_f16 is the language's 16-bit
  // float type, whose + - * / and comparisons round to f16 and which `cast`
  // converts to and from f32; f16_arithmetic_directives follow
  // version_directive in a kernel with such values. Empty type_f16: the
  // language has none, and f16 values are f32 ones rounded after every op
  // (f16_round).
  std::string type_f16, f16_arithmetic_directives;
  std::string bf16_storage, bf16_from_storage, bf16_to_storage;
  std::string storage16_directives, storage16_helpers;
  // Float literal suffix ("" for GLSL, "f" for CUDA/HIP).
  std::string float_suffix;
  // Expressions for +infinity and a quiet NaN (no language has a literal).
  std::string float_inf, float_nan;
  // An f32 {a} as its bits (an unsigned 32-bit value), and bits {a} as an
  // f32: matrix fragments emulated by one lane round their inputs to TF32
  // with them.
  std::string float_to_bits, bits_to_float;

  // Buffers. GLSL declares them at global scope; CUDA/HIP pass them as
  // parameters. Placeholders: {binding} {name} {type} {readonly}.
  std::string buffer_global_decl;   // empty for CUDA/HIP
  std::string buffer_param_decl;    // empty for GLSL
  std::string readonly_qualifier;   // GLSL "readonly ", CUDA "const "
  std::string buffer_access;        // "{name}[{index}]" (GLSL: "{name}.data[{index}]")

  // Vector loads (kir load_vector). Vector type spellings, placeholder
  // {width}: GLSL "vec{width}", CUDA "float{width}". Empty vector_f32: the
  // language has no vector types and vector loads render as scalar loads.
  std::string vector_f32, vector_i32, vector_u32;
  // A buffer's vector view, declared at global scope (GLSL: a second block
  // aliasing the buffer's binding); empty for CUDA/HIP. Placeholders:
  // {binding} {view} {vector_type} {readonly} {width}.
  std::string buffer_vector_global_decl;
  // Vector `index` of a buffer. Placeholders: {name} (the buffer), {view}
  // (its vector view), {vector_type}, {readonly}, {index}.
  std::string buffer_vector_access;
  // A vector value from scalars (kir store_vector). Placeholders:
  // {vector_type}, {components} (comma-separated). GLSL "{vector_type}(...)",
  // CUDA "make_{vector_type}(...)".
  std::string vector_construct;

  // Per-dispatch i32 parameters (kir param expressions), when a kernel has
  // any: a block of members "p0", "p1", ... declared at global scope
  // (placeholder {members}: the member declarations), the kernel parameter
  // that carries it (empty for GLSL push constants), and the expression for
  // member {index}.
  std::string params_global_decl;   // GLSL "layout(push_constant) uniform KilnParams {{ {members} }} kiln_params;"
  std::string params_param_decl;    // CUDA "KilnParams kiln_params" (a struct passed by value)
  std::string param_access;         // "kiln_params.p{index}"

  // Parameters after the buffer parameters (the C99 template's invocation
  // ids); empty for GLSL/CUDA/HIP.
  std::string extra_params;

  // Entry point. Placeholders: {name} {params} {wg}.
  std::string kernel_header;        // GLSL "layout(local_size_x = {wg}) in;\nvoid main()"
  // Expression for the linear invocation index over a 2-D grid, as u32 (so
  // a tail past 2^31 cannot wrap negative before the guard). Placeholder: {wg}.
  std::string global_index_expr;

  // Workgroup-shared arrays (kir Kernel::shared), declared in one of three
  // places. Placeholders: {type} {name} {count}. GLSL: at global scope;
  // CUDA/HIP: at the top of the kernel body; C99: as a parameter (the caller
  // passes the workgroup's arrays).
  std::string shared_global_decl;   // GLSL "shared {type} {name}[{count}];"
  std::string shared_local_decl;    // CUDA "__shared__ {type} {name}[{count}];"
  std::string shared_param_decl;    // C99 "{type}* restrict {name}"
  std::string shared_access;        // "{name}[{index}]"
  // Shared memory beyond what a kernel may declare statically (CUDA: 48 KiB;
  // more needs dynamic shared memory and an opt-in at load): a kernel whose
  // arrays need more than max_static_shared_bytes declares one dynamic
  // array (shared_dynamic_decl, placeholder {bytes}) and each of its arrays
  // as a pointer into it (shared_dynamic_view: {type} {name} {offset}, in
  // bytes, 16-byte aligned). 0: no limit (every array static).
  std::uint64_t max_static_shared_bytes = 0;
  std::string shared_dynamic_decl;  // CUDA "extern __shared__ __align__(16) unsigned char kiln_shared[];"
  std::string shared_dynamic_view;  // CUDA "{type}* {name} = reinterpret_cast<{type}*>(kiln_shared + {offset});"
  // A workgroup execution and shared-memory barrier statement, and what it
  // needs declared at global scope (C99: the host's barrier function).
  std::string barrier;              // GLSL "memoryBarrierShared(); barrier();", CUDA "__syncthreads();"
  std::string barrier_global_decl;
  // The invocation's index in its workgroup and the workgroup's linear index
  // (consistent with global_index_expr: linear = group * wg + local), as i32.
  // Placeholder: {wg}.
  std::string local_index_expr;
  std::string workgroup_index_expr;

  // Texel buffers (kir BufferParam::texel_width 1 or 4) of f32 elements.
  // Declarations, placeholders {binding} {name} {width}: at global scope
  // (GLSL "uniform samplerBuffer") or as a parameter (CUDA/HIP/C99 a const
  // pointer). Loads, placeholders {name} {index}: texel_load reads element
  // {index} of a width-1 buffer, texel_component_load element {index} of a
  // width-4 one, texel_vector_load texel {index} of a width-4 one (as
  // {vector_type}; unused where vector_f32 is empty). texel_global_helpers
  // is emitted once at global scope when a kernel has a width-4 buffer.
  std::string texel_buffer_global_decl;
  std::string texel_buffer_param_decl;
  std::string texel_load;
  std::string texel_component_load;
  std::string texel_vector_load;
  std::string texel_global_helpers;
  // Texel buffers of 16-bit elements (kir f16 / bf16 texel buffers, which
  // only targets with TargetDesc::texel_16bit run). texel_f16_as_f32: an
  // f16 buffer is read with the f32 spellings above (GLSL: its R16 / RGBA16
  // float view gives floats). The texel_bf16_ spellings read a bf16 one (GLSL:
  // an unsigned R16 / RGBA16 view, each element shifted into a float's high
  // half). Empty: the language has no such texel buffers.
  bool texel_f16_as_f32 = false;
  std::string texel_bf16_global_decl;
  std::string texel_bf16_load;
  std::string texel_bf16_component_load;
  std::string texel_bf16_vector_load;
  std::string texel_bf16_global_helpers;

  // Subgroup operations (kir Kernel::subgroup_size = {sg}). Directives
  // emitted after version_directive when a kernel uses any (GLSL
  // extensions); the lane and subgroup index within the workgroup as i32
  // (placeholders {sg} {wg}); the broadcast of {a} from lane {lane} (a
  // constant) within subgroups of {sg} lanes.
  std::string subgroup_directives;
  std::string subgroup_lane_expr;
  std::string subgroup_id_expr;
  std::string subgroup_broadcast;

  // The matrix instructions kernels may use (fragments in subgroups of more
  // than one lane); a target runs those of TargetDesc::matrix_shapes. Empty:
  // fragments are emulated by one-lane subgroups only.
  std::vector<MatrixInstruction> matrix_instructions;

  // Math spellings. Placeholders: {a} {b}.
  std::string exp, log, sqrt, rsqrt, tanh, erf, abs, floor, ceil, pow, fmin, fmax, imin, imax;
  std::string iabs, umin, umax;     // abs for i32, min/max for u32
  std::string labs, lmin, lmax;     // abs, min and max for i64
  std::string cast;                 // "{type}({a})" or "(({type})({a}))"; placeholders {type} {a}
};

// How a C-style language (GLSL included) spells the 16-bit conversion
// helpers below.
struct Storage16Spelling {
  std::string qualifier;  // before each function: "static inline", "__device__ __forceinline__", "" (GLSL)
  std::string u32;        // the unsigned 32-bit type
  std::string u16;        // the type holding a 16-bit value's bits (GLSL, whose 16-bit types live in buffers: uint)
  std::string bits;       // f32 {a} -> its u32 bits
  std::string value;      // u32 bits {a} -> the f32
  std::string cast;       // {a} converted to {type}: C "(({type})({a}))", GLSL "{type}({a})"
};

// Exact conversions in 32-bit integer arithmetic (nearest even, NaN to a
// quiet NaN, overflow to infinity: the kir rule, kiln/float16.h's):
// kiln_f32_to_f16 and kiln_f16_to_f32 (f16 as its bits), and
// kiln_f32_to_bf16 and kiln_bf16_to_f32.
std::string f16_conversions(const Storage16Spelling& spelling);
std::string bf16_conversions(const Storage16Spelling& spelling);
// CUDA's and HIP's spelling.
extern const Storage16Spelling kCudaStyleStorage16;

// The table of CUDA C++ as NVRTC and hiprtc compile it; HIP differs from CUDA
// only in its name, prelude, 16-bit types and broadcast.
LanguageTable cuda_style_language(std::string name, std::string prelude);

// The table of C99 as the null template spells it: one call of the kernel
// function runs one invocation, given its global id and the number of
// workgroups; shared arrays are parameters and a barrier is the host's
// kiln_barrier(). The cpu backend starts from it and changes what running
// the code needs (backends/cpu/language.cpp).
// `extra_prelude` follows c99_prelude() in the table's prelude.
LanguageTable c99_language(const std::string& extra_prelude = "");
// Standard headers, the invocation-id struct and integer min/max helpers.
const std::string& c99_prelude();

}  // namespace kiln::backend
