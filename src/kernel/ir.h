// The kernel IR: small, typed and target-neutral. Every kernel kiln runs is
// built in this IR once, then rendered to GLSL, CUDA C++ or HIP C++, and
// interpret() (interpreter.h) is its executable definition.
//
// A Kernel is a body executed once per invocation for a linear global index
// in [0, global_size). Invocations run in workgroups of workgroup_size
// consecutive indices. Without shared memory they are independent: each reads
// any buffer element and writes its own outputs. With workgroup-shared arrays
// (Kernel::shared) the invocations of one workgroup cooperate: they read and
// write the group's shared arrays and synchronise with `barrier` statements,
// which must be reached by every invocation of the group (uniform control
// flow: never inside a branch, only in loops whose bounds are the same for
// every invocation). A kernel with barriers has a global_size that is a
// multiple of its workgroup_size, so no invocation leaves early.
//
// Vector loads: load_vector declares 2 or 4 scalars from one aligned vector
// load (GLSL vec4, CUDA float4); store_vector writes 2 or 4 in one aligned
// vector store. Devices that scalarise buffer accesses (lavapipe) pay per
// access instruction, in run time and in their compiler, so one vec4 access
// costs about what one scalar does.
//
// Texel buffers: a read-only f32 buffer may be declared a texel buffer
// (Kernel::add_texel_buffer, texel width 1 or 4): the same loads, read
// through a uniform texel buffer (GLSL samplerBuffer + texelFetch over an
// R32 / RGBA32 float view, CUDA/HIP __ldg, C99 a plain load). lavapipe keeps
// texel fetches vectorised where it scalarises storage-buffer loads. A
// read-only f16 or bf16 buffer may be one too (loads widen as a storage
// buffer's do): Vulkan views it as R16 / RGBA16 texels; languages without
// such views have no 16-bit texel buffers (backend::Target::texel_16bit). A
// width-4 texel buffer is read in whole texels: load_vector of width 4, or a
// scalar load of one element of a texel (elements past the last whole texel
// of the binding cannot be read).
//
// Subgroups: a kernel that sets Kernel::subgroup_size = S runs its
// workgroups as subgroups of S consecutive local indices (lane =
// local_index % S) and may use subgroup_lane(), subgroup_id() and
// subgroup_broadcast(value, lane): the value of `value` in lane `lane` (a
// constant) of the caller's subgroup. A broadcast is reached by every lane
// of the subgroup together (uniform control flow, never under a select or
// the right side of && / ||), and the kernel runs whole workgroups only. A
// target runs such a kernel only where its subgroups have exactly S lanes
// (Vulkan) or a shuffle can be confined to S lanes (CUDA/HIP width).
// Renderers map the linear index onto a 2-D dispatch and guard the tail.
//
// Matrix fragments (matrix units: tensor cores, MFMA, cooperative
// matrices): a kernel with Kernel::subgroup_size set may declare fragments
// (Kernel::add_fragment), each a tile held by one subgroup together: an
// m x k `a`, a k x n `b` or an m x n f32 `accumulator` of a FragmentShape.
// Four statements use them, each reached by every lane of the subgroup
// together with the same operands (as a broadcast is): fragment_fill (every
// element of an accumulator = a value), fragment_load (a tile from a buffer
// or shared array: element (r, c) at index + r * stride + c, row-major, or
// index + c * stride + r, column-major; elements at r >= rows or c >= cols
// are zero, not read), fragment_mma (d = a * b + c) and fragment_store (an
// accumulator's elements r < rows, c < cols to a buffer or shared array).
// An a or b fragment's elements are its MatrixPrecision's values: loading
// rounds each f32 to TF32 (to nearest, ties away from zero: cvt.rna.tf32.f32)
// or to f16 / bf16 (to nearest, ties to even). fragment_mma computes each
// element of d as c + the sum of the k exact products, rounded once to f32
// (hardware sums in its own order and precision: renderings are checked
// against this within a bound, docs/precision.md). With subgroup_size 1 a
// fragment belongs to one invocation (the cpu backend's emulation).
//
// Expressions are immutable trees shared by value; the helpers below make
// lowering code read like the arithmetic it does:
//
//   Kernel k("relu");
//   Buf x = k.add_buffer("x", ScalarType::f32, Access::read);
//   Buf y = k.add_buffer("y", ScalarType::f32, Access::write);
//   k.global_size = n;
//   Expr i = global_index();
//   k.body.push_back(store(y, i, max(load(x, i), f32(0.0f))));
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kiln::kir {

// Buffer elements are stored as C stores them: f32, i32 and u32 in 4 bytes,
// i64 in 8, a bool in one byte (0 or 1; kiln's DType::boolean). i64 is
// arithmetic (a model's int64 tensors); indices and loop variables are i32.
//
// f16 (IEEE binary16) and bf16 (bfloat16) are storage types: a buffer's
// elements have them (2 bytes each). A load from such a buffer is an f32
// value (widened exactly) and a store into one takes an f32 value and rounds
// it to nearest, ties to even (NaN stays NaN, overflow becomes infinity).
// Kernels on 16-bit tensors therefore compute in f32 and round once per
// store, which is PyTorch's per-op rule for 16-bit tensors
// (docs/precision.md). f16 arithmetic is the one exception: an f16 value is
// made by a cast from f32 (rounded as a store rounds) and is the operand and
// result of neg, abs, the transcendental and rounding functions, add, sub,
// mul, div, min, max, comparisons and select, each result the f32 op's
// rounded to f16 (for + - * / that is the exact result rounded once: f32's
// 24 bits are at least 2p + 2 for f16's p = 11); a cast to f32 widens
// it exactly. No variable, buffer access, shared array or other op has an
// f16 value, and nothing has a bf16 one (use_f16_arithmetic, in
// f16_arithmetic.h, writes such expressions).
enum class ScalarType : std::uint8_t { f32, i32, u32, boolean, i64, f16, bf16 };
const char* scalar_type_name(ScalarType type);  // "f32", "i32", "u32", "bool", "i64", "f16", "bf16"
// Bytes of one buffer element of `type` (see above).
std::size_t element_bytes(ScalarType type);
// Whether `type` is a storage type (f16, bf16): buffer elements (and, for
// f16, the values of f16 arithmetic; see above).
bool is_storage_only(ScalarType type);
// The type of a value loaded from or stored into a buffer of `type`: f32 for
// the storage types, `type` itself for every other.
ScalarType value_type(ScalarType type);

enum class UnaryOp : std::uint8_t { neg, exp, log, sqrt, rsqrt, tanh, erf, abs, floor, ceil, logical_not };
enum class BinaryOp : std::uint8_t {
  add, sub, mul, div, mod,  // mod: integer remainder (operands >= 0)
  min, max, pow,
  lt, le, gt, ge, eq, ne,   // result boolean
  logical_and, logical_or,
};
const char* unary_op_name(UnaryOp op);
const char* binary_op_name(BinaryOp op);
// The C-style infix operator ("+", "<=", "&&"), or nullptr for ops written as calls (min, max, pow).
const char* infix_symbol(BinaryOp op);

// param: an i32 read from the kernel's per-dispatch parameters (Kernel::params).
// local_index: the invocation's index within its workgroup (i32, [0, workgroup_size)).
// workgroup_index: the linear index of its workgroup (i32): global_index() ==
// workgroup_index() * workgroup_size + local_index().
// shared_load: element args[0] of shared array `buffer` (Kernel::shared).
// subgroup_lane: the invocation's lane in its subgroup (i32, [0, S));
// subgroup_id: its subgroup's index in the workgroup (i32, [0, wg / S));
// subgroup_broadcast: args[0] as evaluated in lane `ivalue` of the subgroup.
enum class ExprKind : std::uint8_t {
  constant, var, global_index, load, unary, binary, select, cast, param,
  local_index, workgroup_index, shared_load,
  subgroup_lane, subgroup_id, subgroup_broadcast,
};

struct ExprNode;

// A value-semantics handle on an immutable expression tree.
class Expr {
 public:
  Expr() = default;
  explicit Expr(std::shared_ptr<const ExprNode> node) : node_(std::move(node)) {}
  const ExprNode& operator*() const { return *node_; }
  const ExprNode* operator->() const { return node_.get(); }
  explicit operator bool() const { return node_ != nullptr; }
  ScalarType type() const;

 private:
  std::shared_ptr<const ExprNode> node_;
};

struct ExprNode {
  ExprKind kind;
  ScalarType type;
  double fvalue = 0;        // constant (f32)
  std::int64_t ivalue = 0;  // constant (i32/u32/bool); subgroup_broadcast: the source lane
  std::string name;         // var
  int buffer = -1;          // load: index into Kernel::buffers; shared_load: into Kernel::shared
  int param = -1;           // param: index into Kernel::params
  UnaryOp unary = UnaryOp::neg;
  BinaryOp binary = BinaryOp::add;
  std::vector<Expr> args;   // operands: load {index}; unary {a}; binary {a, b}; select {cond, a, b}; cast {a}
};

// A buffer parameter's handle (its index in Kernel::buffers).
struct Buf {
  int index = -1;
};

enum class Access : std::uint8_t { read, write, read_write };

struct BufferParam {
  std::string name;
  ScalarType type;
  Access access;
  // 0: a storage buffer. 1 or 4: a read-only f32, f16 or bf16 buffer read
  // through a uniform texel buffer of 1 or 4 elements per texel (see the top
  // of this file).
  std::uint32_t texel_width = 0;
};

// A workgroup-shared array's handle (its index in Kernel::shared).
struct Shared {
  int index = -1;
};

// An array in workgroup-shared memory: one instance per workgroup, visible to
// its invocations, uninitialised when the workgroup starts.
struct SharedArray {
  std::string name;
  ScalarType type;        // f32, i32 or u32
  std::int64_t count = 0;  // elements
};

enum class StmtKind : std::uint8_t {
  declare,  // declare `var` of `type` initialised to `value`
  assign,   // var = value
  store,    // buffer[index] = value
  loop,     // for (i32 var = begin; var < end; var += step) body
  branch,   // if (value) body else else_body
  // declare vars[c] of `type` = buffer[index * width + c] for c < width
  // (width = vars.size(), 2 or 4): one vector load, aligned to width elements.
  load_vector,
  shared_store,  // shared array `buffer`[index] = value
  // buffer[index * width + c] = values[c] for c < width (values.size(), 2 or
  // 4): one aligned vector store, the counterpart of load_vector.
  store_vector,
  // Workgroup execution and shared-memory barrier: every invocation of the
  // group arrives before any continues, and shared writes made before it are
  // visible to every invocation after it.
  barrier,
  // Matrix fragments (see the top of this file); `var` names the fragment
  // written (or, for fragment_store, read).
  fragment_fill,   // var = value, every element
  fragment_load,   // var = tile at `index` of `buffer` (values: stride, rows, cols)
  fragment_mma,    // var = vars[0] * vars[1] + vars[2]
  fragment_store,  // tile var to `index` of `buffer` (values: stride, rows, cols)
};

struct Stmt {
  StmtKind kind;
  std::string var;
  std::vector<std::string> vars;  // load_vector
  std::vector<Expr> values;       // store_vector
  ScalarType type = ScalarType::f32;
  Expr value;
  int buffer = -1;  // store, load_vector, store_vector: a buffer; shared_store: a shared array
  Expr index;
  Expr begin, end;
  std::int64_t step = 1;
  std::vector<Stmt> body;
  std::vector<Stmt> else_body;
  // fragment_load, fragment_store: `buffer` is a shared array rather than a
  // buffer; the tile is column-major (element (r, c) at c * stride + r).
  bool shared_memory = false;
  bool column_major = false;
};

// What a fragment holds (see the top of this file).
enum class FragmentRole : std::uint8_t { a, b, accumulator };
// The input type of a multiply: a and b fragments' elements are rounded to it.
enum class MatrixPrecision : std::uint8_t { tf32, f16, bf16 };
const char* fragment_role_name(FragmentRole role);          // "a", "b", "accumulator"
const char* matrix_precision_name(MatrixPrecision precision);  // "tf32", "f16", "bf16"
// The precision matrix_precision_name spells `name`; nullopt for another text.
std::optional<MatrixPrecision> matrix_precision_of(const std::string& name);

// One multiply's dimensions: a is m x k, b k x n, the accumulator m x n.
struct FragmentShape {
  std::uint32_t m = 16, n = 16, k = 8;
  friend bool operator==(const FragmentShape&, const FragmentShape&) = default;
};

// A fragment's handle (its index in Kernel::fragments, and its name, by
// which statements refer to it).
struct Frag {
  int index = -1;
  std::string name;
};

struct Fragment {
  std::string name;
  FragmentRole role = FragmentRole::accumulator;
  FragmentShape shape;
  MatrixPrecision precision = MatrixPrecision::tf32;  // a and b; an accumulator's is f32
  friend bool operator==(const Fragment&, const Fragment&) = default;
};

// The rows and columns of a fragment's tile.
std::uint32_t fragment_rows(const Fragment& fragment);
std::uint32_t fragment_cols(const Fragment& fragment);
// `value` as the precision keeps it (TF32: ties away from zero; f16, bf16:
// ties to even; NaN stays NaN, overflow becomes infinity).
float round_to_precision(float value, MatrixPrecision precision);

// Which template built a kernel and with which knobs, recorded by lowering
// where a heuristic (or an override) chose them: the autotuner's tuning site
// (src/tune/site.h). Fusion keeps it: the knobs still mean the same kernel.
struct TuningSite {
  std::string template_name;  // "gemm", "conv", "attention"
  int template_version = 0;   // the template's version constant
  std::string problem;        // canonical shape and layout text (tune::RecordKey::kernel)
  std::string knobs;          // the knobs the kernel was built with, as text
  bool overridden = false;    // the knobs came from an override, not the heuristic

  friend bool operator==(const TuningSite&, const TuningSite&) = default;
};

struct Kernel {
  explicit Kernel(std::string kernel_name) : name(std::move(kernel_name)) {}
  std::string name;                  // a C identifier
  std::vector<BufferParam> buffers;  // binding order = index
  std::int64_t global_size = 0;      // invocations (< 2^31)
  std::uint32_t workgroup_size = 64;
  std::vector<Stmt> body;
  // This instance's values of param(i) expressions, set per dispatch (push
  // constants, a by-value struct argument). They are not part of the source:
  // kernels that differ only in them render identically and share one
  // compiled pipeline (see parameterise.h).
  std::vector<std::int32_t> params;
  // When set, the tail guard compares against params[*global_size_param]
  // (which must equal global_size) instead of a literal.
  std::optional<int> global_size_param;
  // Workgroup-shared arrays (declaration order = index).
  std::vector<SharedArray> shared;
  // Set by lowering for a template kernel with choices (not part of the source).
  std::optional<TuningSite> tuning_site;
  // Lanes per subgroup the kernel is written for (a power of two dividing
  // workgroup_size); 0: the kernel uses no subgroup operations.
  std::uint32_t subgroup_size = 0;
  // Matrix fragments, one instance per subgroup (declaration order = index).
  std::vector<Fragment> fragments;

  Buf add_buffer(const std::string& buffer_name, ScalarType type, Access access);
  // A read-only f32 buffer read through a texel buffer of `texel_width` (1 or 4) floats per texel.
  Buf add_texel_buffer(const std::string& buffer_name, std::uint32_t texel_width);
  Shared add_shared(const std::string& array_name, ScalarType type, std::int64_t count);
  Frag add_fragment(const std::string& fragment_name, FragmentRole role, FragmentShape shape,
                    MatrixPrecision precision = MatrixPrecision::tf32);
};

// Bytes of workgroup-shared memory `kernel` declares (4 per element).
std::uint64_t shared_memory_bytes(const Kernel& kernel);
// Whether `kernel`'s body has a barrier statement.
bool has_barrier(const Kernel& kernel);
// Whether `kernel` uses subgroup_lane, subgroup_id or subgroup_broadcast.
bool uses_subgroup_ops(const Kernel& kernel);
// Whether it uses subgroup_broadcast.
bool uses_subgroup_broadcast(const Kernel& kernel);
// Whether its body has fragment statements.
bool uses_fragments(const Kernel& kernel);
// Whether a fragment load or store reads or writes a buffer (not only shared
// arrays): fusion rewrites a kernel's scalar and vector buffer accesses only.
bool fragments_touch_buffers(const Kernel& kernel);
// Whether `kind` is one of the fragment statements.
bool is_fragment_stmt(StmtKind kind);
// The largest subgroup size kernels may declare.
inline constexpr std::uint32_t kMaxSubgroupSize = 128;

// ---- expression helpers -------------------------------------------------
Expr f32(double value);
Expr i32(std::int64_t value);
Expr u32(std::int64_t value);
Expr i64(std::int64_t value);
Expr boolean(bool value);
Expr var(const std::string& name, ScalarType type);
Expr global_index();  // i32
Expr param(int index);  // i32: Kernel::params[index] of the dispatched instance
Expr local_index();      // i32: the invocation's index in its workgroup
Expr workgroup_index();  // i32: the workgroup's linear index
Expr subgroup_lane();    // i32: the invocation's lane in its subgroup (Kernel::subgroup_size set)
Expr subgroup_id();      // i32: its subgroup's index in the workgroup
// `value` (f32, i32 or u32) as evaluated in lane `lane` of the caller's subgroup.
Expr subgroup_broadcast(Expr value, std::int64_t lane);
Expr load(Buf buffer, Expr index, ScalarType type);  // type must be the buffer's value_type
Expr load(Shared array, Expr index, ScalarType type);  // type must match the shared array
Expr unary(UnaryOp op, Expr a);
Expr binary(BinaryOp op, Expr a, Expr b);  // operand types must match
Expr select(Expr cond, Expr if_true, Expr if_false);
Expr cast(ScalarType type, Expr a);

Expr operator+(Expr a, Expr b);
Expr operator-(Expr a, Expr b);
Expr operator*(Expr a, Expr b);
Expr operator/(Expr a, Expr b);
Expr operator%(Expr a, Expr b);
Expr operator-(Expr a);
Expr operator<(Expr a, Expr b);
Expr operator<=(Expr a, Expr b);
Expr operator>(Expr a, Expr b);
Expr operator>=(Expr a, Expr b);
Expr operator&&(Expr a, Expr b);
Expr operator||(Expr a, Expr b);
Expr eq(Expr a, Expr b);
Expr ne(Expr a, Expr b);
Expr min(Expr a, Expr b);
Expr max(Expr a, Expr b);
Expr pow(Expr a, Expr b);
Expr exp(Expr a);
Expr log(Expr a);
Expr sqrt(Expr a);
Expr rsqrt(Expr a);
Expr tanh(Expr a);
Expr erf(Expr a);
Expr abs(Expr a);
Expr floor(Expr a);
Expr ceil(Expr a);

// ---- statement helpers --------------------------------------------------
Stmt declare(const std::string& name, ScalarType type, Expr init);
Stmt assign(const std::string& name, Expr value);
Stmt store(Buf buffer, Expr index, Expr value);
Stmt store(Shared array, Expr index, Expr value);
Stmt barrier();
Stmt loop(const std::string& var_name, Expr begin, Expr end, std::vector<Stmt> body, std::int64_t step = 1);
Stmt branch(Expr cond, std::vector<Stmt> body, std::vector<Stmt> else_body = {});
// Declares `names` (2 or 4) from elements [vector_index * n, vector_index * n + n)
// of `buffer`, whose element type is `type`.
Stmt load_vector(std::vector<std::string> names, Buf buffer, Expr vector_index, ScalarType type);
// Stores `values` (2 or 4, of the buffer's type) to elements
// [vector_index * n, vector_index * n + n) of `buffer`.
Stmt store_vector(Buf buffer, Expr vector_index, std::vector<Expr> values);
// Vector widths load_vector and store_vector accept.
bool is_vector_width(std::size_t width);
// Matrix fragments (see the top of this file). `stride`, `rows` and `cols`
// are i32; rows and cols bound the elements read or written (pass the
// tile's own rows and cols for a whole tile).
Stmt fragment_fill(Frag accumulator, Expr value);
Stmt fragment_load(Frag fragment, Buf buffer, Expr index, Expr stride, Expr rows, Expr cols, bool column_major = false);
Stmt fragment_load(Frag fragment, Shared array, Expr index, Expr stride, Expr rows, Expr cols,
                   bool column_major = false);
Stmt fragment_mma(Frag d, Frag a, Frag b, Frag c);
Stmt fragment_store(Frag accumulator, Buf buffer, Expr index, Expr stride, Expr rows, Expr cols,
                    bool column_major = false);
Stmt fragment_store(Frag accumulator, Shared array, Expr index, Expr stride, Expr rows, Expr cols,
                    bool column_major = false);

// The dispatch grid for a kernel: ceil(global_size / workgroup_size) groups as
// {gx, gy, 1} with gx <= max_groups_x. Renderers compute the linear index as
// gid.x + gid.y * (num_groups.x * workgroup_size), so this and they agree.
std::array<std::uint32_t, 3> dispatch_grid(const Kernel& kernel, std::uint32_t max_groups_x);

// Checks types, variable scoping, buffer indices and access (no store to a
// read buffer), shared arrays, and barriers (only in uniform control flow: not
// inside a branch, inside loops only if their bounds use no global_index,
// local_index or loaded value; global_size a multiple of workgroup_size);
// texel buffers (read-only f32, f16 or bf16, width 1 or 4, vector loads only of the texel
// width); subgroup operations (subgroup_size a power of two dividing the
// workgroup, whole workgroups; broadcasts with a lane below subgroup_size, in
// uniform control flow as barriers are but also under branches and loops whose
// condition or bounds are uniform, never under a select, the right side of
// && / ||, a loop bound or a branch condition);
// throws kiln::Error(Internal) naming the kernel and problem. The second form
// also checks the shared arrays fit in `max_shared_memory_bytes` (a target's
// limit; backends check it again when they load the kernel).
void verify(const Kernel& kernel);
void verify(const Kernel& kernel, std::uint64_t max_shared_memory_bytes);
// Target-neutral text form, stable enough to hash and diff.
std::string print(const Kernel& kernel);

}  // namespace kiln::kir
