// Kernel IR: typed construction helpers (verify() is in verify.cpp, print() in print.cpp).
//
// Type rules (shared by the helpers and verify()):
//   neg, abs                          f32 | f16 | i32 | i64  -> same
//   exp log sqrt rsqrt tanh erf
//   floor ceil                        f32 | f16          -> same
//   logical_not                       bool               -> bool
//   add sub mul div min max           f32 | f16 | i32 | u32 | i64 -> same
//   mod                               i32 | u32 | i64    -> same
//   pow                               f32                -> f32
//   lt le gt ge                       f32 | f16 | i32 | u32 | i64 -> bool
//   eq ne                             any but bf16 (same type) -> bool
//   cast                              to or from f16: from or to f32 only
//   logical_and logical_or            bool               -> bool
//   select(cond, a, b)                cond bool, a and b of one type
//   load / store index                i32 | u32
//   load_vector                       index i32 | u32; vars of the buffer's type
//   store_vector                      index i32 | u32; values of the buffer's type
//   shared load / store               index i32 | u32; value of the array's type
//   local_index, workgroup_index      i32
//   subgroup_lane, subgroup_id        i32
//   subgroup_broadcast(a, lane)       f32 | i32 | u32    -> same
#include "src/base/check.h"
#include "src/kernel/ir.h"
#include "src/kernel/type_rules.h"

#include <kiln/error.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace kiln::kir {

// ---- names ----------------------------------------------------------------

const char* scalar_type_name(ScalarType type) {
  switch (type) {
    case ScalarType::f32: return "f32";
    case ScalarType::i32: return "i32";
    case ScalarType::u32: return "u32";
    case ScalarType::boolean: return "bool";
    case ScalarType::i64: return "i64";
    case ScalarType::f16: return "f16";
    case ScalarType::bf16: return "bf16";
  }
  return "?";
}

std::size_t element_bytes(ScalarType type) {
  switch (type) {
    case ScalarType::boolean: return 1;
    case ScalarType::i64: return 8;
    case ScalarType::f16:
    case ScalarType::bf16: return 2;
    default: return 4;
  }
}

bool is_storage_only(ScalarType type) { return type == ScalarType::f16 || type == ScalarType::bf16; }

ScalarType value_type(ScalarType type) { return is_storage_only(type) ? ScalarType::f32 : type; }

const char* unary_op_name(UnaryOp op) {
  switch (op) {
    case UnaryOp::neg: return "neg";
    case UnaryOp::exp: return "exp";
    case UnaryOp::log: return "log";
    case UnaryOp::sqrt: return "sqrt";
    case UnaryOp::rsqrt: return "rsqrt";
    case UnaryOp::tanh: return "tanh";
    case UnaryOp::erf: return "erf";
    case UnaryOp::abs: return "abs";
    case UnaryOp::floor: return "floor";
    case UnaryOp::ceil: return "ceil";
    case UnaryOp::logical_not: return "not";
  }
  return "?";
}

const char* binary_op_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::add: return "add";
    case BinaryOp::sub: return "sub";
    case BinaryOp::mul: return "mul";
    case BinaryOp::div: return "div";
    case BinaryOp::mod: return "mod";
    case BinaryOp::min: return "min";
    case BinaryOp::max: return "max";
    case BinaryOp::pow: return "pow";
    case BinaryOp::lt: return "lt";
    case BinaryOp::le: return "le";
    case BinaryOp::gt: return "gt";
    case BinaryOp::ge: return "ge";
    case BinaryOp::eq: return "eq";
    case BinaryOp::ne: return "ne";
    case BinaryOp::logical_and: return "and";
    case BinaryOp::logical_or: return "or";
  }
  return "?";
}

const char* infix_symbol(BinaryOp op) {
  switch (op) {
    case BinaryOp::add: return "+";
    case BinaryOp::sub: return "-";
    case BinaryOp::mul: return "*";
    case BinaryOp::div: return "/";
    case BinaryOp::mod: return "%";
    case BinaryOp::lt: return "<";
    case BinaryOp::le: return "<=";
    case BinaryOp::gt: return ">";
    case BinaryOp::ge: return ">=";
    case BinaryOp::eq: return "==";
    case BinaryOp::ne: return "!=";
    case BinaryOp::logical_and: return "&&";
    case BinaryOp::logical_or: return "||";
    default: return nullptr;  // min, max, pow print as calls
  }
}

[[noreturn]] void fail(const std::string& message) { throw_error(ErrorKind::Internal, message); }

namespace {

bool is_numeric(ScalarType t) { return t != ScalarType::boolean && t != ScalarType::bf16; }
bool is_integer(ScalarType t) { return t == ScalarType::i32 || t == ScalarType::u32 || t == ScalarType::i64; }

}  // namespace

std::optional<ScalarType> unary_result_type(UnaryOp op, ScalarType a) {
  switch (op) {
    case UnaryOp::neg:
    case UnaryOp::abs:
      if (a == ScalarType::f32 || a == ScalarType::f16 || a == ScalarType::i32 || a == ScalarType::i64) return a;
      return std::nullopt;
    case UnaryOp::logical_not:
      if (a == ScalarType::boolean) return a;
      return std::nullopt;
    default:  // transcendental and rounding functions
      if (a == ScalarType::f32 || a == ScalarType::f16) return a;
      return std::nullopt;
  }
}

std::optional<ScalarType> binary_result_type(BinaryOp op, ScalarType a, ScalarType b) {
  if (a != b) return std::nullopt;
  switch (op) {
    case BinaryOp::add:
    case BinaryOp::sub:
    case BinaryOp::mul:
    case BinaryOp::div:
    case BinaryOp::min:
    case BinaryOp::max:
      if (is_numeric(a)) return a;
      return std::nullopt;
    case BinaryOp::mod:
      if (is_integer(a)) return a;
      return std::nullopt;
    case BinaryOp::pow:
      if (a == ScalarType::f32) return a;
      return std::nullopt;
    case BinaryOp::lt:
    case BinaryOp::le:
    case BinaryOp::gt:
    case BinaryOp::ge:
      if (is_numeric(a)) return ScalarType::boolean;
      return std::nullopt;
    case BinaryOp::eq:
    case BinaryOp::ne:
      if (a != ScalarType::bf16) return ScalarType::boolean;
      return std::nullopt;
    case BinaryOp::logical_and:
    case BinaryOp::logical_or:
      if (a == ScalarType::boolean) return a;
      return std::nullopt;
  }
  return std::nullopt;
}

std::string unary_type_error(UnaryOp op, ScalarType a) {
  return std::string("unary '") + unary_op_name(op) + "' does not accept an operand of type " + scalar_type_name(a);
}

std::string binary_type_error(BinaryOp op, ScalarType a, ScalarType b) {
  std::string msg = std::string("binary '") + binary_op_name(op) + "' ";
  if (a != b) return msg + "needs operands of one type, got " + scalar_type_name(a) + " and " + scalar_type_name(b);
  return msg + "does not accept operands of type " + scalar_type_name(a);
}

std::optional<std::string> cast_type_error(ScalarType to, ScalarType from) {
  if (to == ScalarType::bf16 || from == ScalarType::bf16 ||
      ((to == ScalarType::f16 || from == ScalarType::f16) && to != ScalarType::f32 && from != ScalarType::f32 &&
       to != from))
    return std::string("a cast from ") + scalar_type_name(from) + " to " + scalar_type_name(to) +
           " (f16 values convert to and from f32 only; bf16 is a storage type)";
  return std::nullopt;
}

bool is_index_type(ScalarType t) { return t == ScalarType::i32 || t == ScalarType::u32; }

// Names must be identifiers in GLSL, C99 and C++ once the renderer prefixes
// them, so: a letter first, then letters, digits and single underscores
// (identifiers with "__" are reserved in GLSL and C++).
bool is_identifier(std::string_view name) {
  if (name.empty()) return false;
  auto alpha = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
  auto digit = [](char c) { return c >= '0' && c <= '9'; };
  if (!alpha(name[0])) return false;
  for (char c : name)
    if (!alpha(c) && !digit(c) && c != '_') return false;
  return name.find("__") == std::string_view::npos;
}

// Kernel names appear unprefixed as CUDA/HIP/C99 function names, so they must
// not collide with a keyword or a function those languages declare.
bool is_reserved_kernel_name(const std::string& name) {
  static const std::unordered_set<std::string> reserved = [] {
    std::unordered_set<std::string> words = {
        // C++20 and C99 keywords
        "alignas", "alignof", "and", "and_eq", "asm", "auto", "bitand", "bitor", "bool", "break", "case", "catch",
        "char", "char8_t", "char16_t", "char32_t", "class", "compl", "concept", "const", "consteval", "constexpr",
        "constinit", "const_cast", "continue", "co_await", "co_return", "co_yield", "decltype", "default", "delete",
        "do", "double", "dynamic_cast", "else", "enum", "explicit", "export", "extern", "false", "float", "for",
        "friend", "goto", "if", "inline", "int", "long", "mutable", "namespace", "new", "noexcept", "not", "not_eq",
        "nullptr", "operator", "or", "or_eq", "private", "protected", "public", "register", "reinterpret_cast",
        "requires", "restrict", "return", "short", "signed", "sizeof", "static", "static_assert", "static_cast",
        "struct", "switch", "template", "this", "thread_local", "throw", "true", "try", "typedef", "typeid", "typename",
        "union", "unsigned", "using", "virtual", "void", "volatile", "wchar_t", "while", "xor", "xor_eq",
        // entry points and common runtime functions
        "main", "printf", "malloc", "free", "memcpy", "memset", "assert", "min", "max", "umin", "umax", "abs", "labs",
        "llabs"};
    // C math functions, each also with its float ("f") variant.
    for (const char* f :
         {"fabs",  "exp",   "exp2",  "expm1", "log",       "log2", "log10",     "log1p",  "sqrt",   "cbrt",
          "rsqrt", "pow",   "sin",   "cos",   "tan",       "asin", "acos",      "atan",   "atan2",  "sinh",
          "cosh",  "tanh",  "asinh", "acosh", "atanh",     "erf",  "erfc",      "tgamma", "lgamma", "floor",
          "ceil",  "trunc", "round", "rint",  "nearbyint", "fmod", "remainder", "fmin",   "fmax",   "fma",
          "hypot", "ldexp", "frexp", "modf",  "copysign",  "nan"}) {
      words.insert(f);
      words.insert(std::string(f) + "f");
    }
    return words;
  }();
  return reserved.count(name) != 0;
}

namespace {

void check_expr(const Expr& e, const std::string& what) {
  if (!e) fail("kir: " + what + " is a null expression");
}

ExprNode node_of(ExprKind kind, ScalarType type) {
  ExprNode n{};
  n.kind = kind;
  n.type = type;
  return n;
}

Stmt stmt_of(StmtKind kind) {
  Stmt s{};
  s.kind = kind;
  return s;
}

Expr make(ExprNode node) { return Expr(std::make_shared<const ExprNode>(std::move(node))); }

}  // namespace

ScalarType Expr::type() const {
  KILN_ASSERT(node_ != nullptr);
  return node_->type;
}

Buf Kernel::add_buffer(const std::string& buffer_name, ScalarType type, Access access) {
  if (!is_identifier(buffer_name))
    fail("kernel '" + name + "': buffer name '" + buffer_name +
         "' is not an identifier (a letter, then letters, digits and single underscores)");
  for (const BufferParam& b : buffers)
    if (b.name == buffer_name) fail("kernel '" + name + "': duplicate buffer name '" + buffer_name + "'");
  buffers.push_back({buffer_name, type, access});
  return Buf{static_cast<int>(buffers.size()) - 1};
}

Buf Kernel::add_texel_buffer(const std::string& buffer_name, std::uint32_t texel_width) {
  if (texel_width != 1 && texel_width != 4)
    fail("kernel '" + name + "': texel buffer '" + buffer_name + "' has texel width " + std::to_string(texel_width) +
         "; it must be 1 or 4");
  const Buf buffer = add_buffer(buffer_name, ScalarType::f32, Access::read);
  buffers.back().texel_width = texel_width;
  return buffer;
}

Shared Kernel::add_shared(const std::string& array_name, ScalarType type, std::int64_t count) {
  if (!is_identifier(array_name))
    fail("kernel '" + name + "': shared array name '" + array_name +
         "' is not an identifier (a letter, then letters, digits and single underscores)");
  for (const SharedArray& a : shared)
    if (a.name == array_name) fail("kernel '" + name + "': duplicate shared array name '" + array_name + "'");
  if (type == ScalarType::boolean || type == ScalarType::i64 || is_storage_only(type))
    fail("kernel '" + name + "': shared array '" + array_name + "' has element type " + scalar_type_name(type) +
         "; use f32, i32 or u32");
  if (count < 1 || count > kMaxSharedElements)
    fail("kernel '" + name + "': shared array '" + array_name + "' has " + std::to_string(count) +
         " elements, outside [1, " + std::to_string(kMaxSharedElements) + "]");
  shared.push_back({array_name, type, count});
  return Shared{static_cast<int>(shared.size()) - 1};
}

std::uint64_t shared_memory_bytes(const Kernel& kernel) {
  std::uint64_t bytes = 0;
  for (const SharedArray& a : kernel.shared) bytes += static_cast<std::uint64_t>(std::max<std::int64_t>(a.count, 0)) * 4;
  return bytes;
}

namespace {
bool has_barrier(const std::vector<Stmt>& stmts) {
  for (const Stmt& s : stmts)
    if (s.kind == StmtKind::barrier || has_barrier(s.body) || has_barrier(s.else_body)) return true;
  return false;
}
}  // namespace

bool has_barrier(const Kernel& kernel) { return has_barrier(kernel.body); }

namespace {

bool expr_uses(const Expr& e, bool broadcast_only) {
  if (!e) return false;
  if (e->kind == ExprKind::subgroup_broadcast) return true;
  if (!broadcast_only && (e->kind == ExprKind::subgroup_lane || e->kind == ExprKind::subgroup_id)) return true;
  for (const Expr& arg : e->args)
    if (expr_uses(arg, broadcast_only)) return true;
  return false;
}

bool stmts_use(const std::vector<Stmt>& stmts, bool broadcast_only) {
  for (const Stmt& s : stmts) {
    for (const Expr* e : {&s.value, &s.index, &s.begin, &s.end})
      if (expr_uses(*e, broadcast_only)) return true;
    for (const Expr& e : s.values)
      if (expr_uses(e, broadcast_only)) return true;
    if (stmts_use(s.body, broadcast_only) || stmts_use(s.else_body, broadcast_only)) return true;
  }
  return false;
}

}  // namespace

bool uses_subgroup_ops(const Kernel& kernel) { return stmts_use(kernel.body, false); }
bool uses_subgroup_broadcast(const Kernel& kernel) { return stmts_use(kernel.body, true); }

// ---- expression helpers ---------------------------------------------------

Expr f32(double value) {
  ExprNode n = node_of(ExprKind::constant, ScalarType::f32);
  n.fvalue = static_cast<double>(static_cast<float>(value));  // the constant is an f32
  return make(std::move(n));
}

Expr i32(std::int64_t value) {
  if (value < std::numeric_limits<std::int32_t>::min() || value > std::numeric_limits<std::int32_t>::max())
    fail("kir: i32 constant " + std::to_string(value) + " is out of range");
  ExprNode n = node_of(ExprKind::constant, ScalarType::i32);
  n.ivalue = value;
  return make(std::move(n));
}

Expr u32(std::int64_t value) {
  if (value < 0 || value > std::numeric_limits<std::uint32_t>::max())
    fail("kir: u32 constant " + std::to_string(value) + " is out of range");
  ExprNode n = node_of(ExprKind::constant, ScalarType::u32);
  n.ivalue = value;
  return make(std::move(n));
}

Expr i64(std::int64_t value) {
  ExprNode n = node_of(ExprKind::constant, ScalarType::i64);
  n.ivalue = value;
  return make(std::move(n));
}

Expr boolean(bool value) {
  ExprNode n = node_of(ExprKind::constant, ScalarType::boolean);
  n.ivalue = value ? 1 : 0;
  return make(std::move(n));
}

Expr var(const std::string& name, ScalarType type) {
  if (!is_identifier(name)) fail("kir: variable name '" + name + "' is not an identifier");
  ExprNode n = node_of(ExprKind::var, type);
  n.name = name;
  return make(std::move(n));
}

Expr global_index() { return make(node_of(ExprKind::global_index, ScalarType::i32)); }

Expr param(int index) {
  if (index < 0) fail("kir: parameter index " + std::to_string(index) + " is negative");
  ExprNode n = node_of(ExprKind::param, ScalarType::i32);
  n.param = index;
  return make(std::move(n));
}

Expr local_index() { return make(node_of(ExprKind::local_index, ScalarType::i32)); }
Expr workgroup_index() { return make(node_of(ExprKind::workgroup_index, ScalarType::i32)); }
Expr subgroup_lane() { return make(node_of(ExprKind::subgroup_lane, ScalarType::i32)); }
Expr subgroup_id() { return make(node_of(ExprKind::subgroup_id, ScalarType::i32)); }

Expr subgroup_broadcast(Expr value, std::int64_t lane) {
  check_expr(value, "broadcast value");
  if (value.type() == ScalarType::boolean) fail("kir: subgroup_broadcast of a bool; broadcast an i32 or u32");
  if (lane < 0 || lane >= kMaxSubgroupSize)
    fail("kir: subgroup_broadcast from lane " + std::to_string(lane) + ", outside [0, " +
         std::to_string(kMaxSubgroupSize) + ")");
  ExprNode n = node_of(ExprKind::subgroup_broadcast, value.type());
  n.ivalue = lane;
  n.args = {std::move(value)};
  return make(std::move(n));
}

namespace {

// A load from buffer or shared array `target` (`what`: "buffer" or "shared
// array", for messages; `prefix`: "" or "shared ").
Expr indexed_load(ExprKind kind, int target, Expr index, ScalarType type, const char* what, const std::string& prefix) {
  check_expr(index, prefix + "load index");
  if (target < 0) fail(std::string("kir: load from an invalid ") + what + " handle");
  if (!is_index_type(index.type()))
    fail("kir: " + prefix + "load index must be i32 or u32, got " + scalar_type_name(index.type()));
  ExprNode n = node_of(kind, type);
  n.buffer = target;
  n.args = {std::move(index)};
  return make(std::move(n));
}

}  // namespace

Expr load(Shared array, Expr index, ScalarType type) {
  return indexed_load(ExprKind::shared_load, array.index, std::move(index), type, "shared array", "shared ");
}

Expr load(Buf buffer, Expr index, ScalarType type) {
  if (is_storage_only(type))
    fail(std::string("kir: a load typed ") + scalar_type_name(type) +
         ", a storage type: loads from such a buffer are f32");
  return indexed_load(ExprKind::load, buffer.index, std::move(index), type, "buffer", "");
}

Expr unary(UnaryOp op, Expr a) {
  check_expr(a, "unary operand");
  std::optional<ScalarType> t = unary_result_type(op, a.type());
  if (!t) fail("kir: " + unary_type_error(op, a.type()));
  ExprNode n = node_of(ExprKind::unary, *t);
  n.unary = op;
  n.args = {std::move(a)};
  return make(std::move(n));
}

Expr binary(BinaryOp op, Expr a, Expr b) {
  check_expr(a, "binary operand");
  check_expr(b, "binary operand");
  std::optional<ScalarType> t = binary_result_type(op, a.type(), b.type());
  if (!t) fail("kir: " + binary_type_error(op, a.type(), b.type()));
  ExprNode n = node_of(ExprKind::binary, *t);
  n.binary = op;
  n.args = {std::move(a), std::move(b)};
  return make(std::move(n));
}

Expr select(Expr cond, Expr if_true, Expr if_false) {
  check_expr(cond, "select condition");
  check_expr(if_true, "select operand");
  check_expr(if_false, "select operand");
  if (cond.type() != ScalarType::boolean)
    fail(std::string("kir: select condition must be bool, got ") + scalar_type_name(cond.type()));
  if (if_true.type() != if_false.type())
    fail(std::string("kir: select needs operands of one type, got ") + scalar_type_name(if_true.type()) + " and " +
         scalar_type_name(if_false.type()));
  ExprNode n = node_of(ExprKind::select, if_true.type());
  n.args = {std::move(cond), std::move(if_true), std::move(if_false)};
  return make(std::move(n));
}

Expr cast(ScalarType type, Expr a) {
  check_expr(a, "cast operand");
  if (std::optional<std::string> why = cast_type_error(type, a.type())) fail("kir: " + *why);
  ExprNode n = node_of(ExprKind::cast, type);
  n.args = {std::move(a)};
  return make(std::move(n));
}

Expr operator+(Expr a, Expr b) { return binary(BinaryOp::add, std::move(a), std::move(b)); }
Expr operator-(Expr a, Expr b) { return binary(BinaryOp::sub, std::move(a), std::move(b)); }
Expr operator*(Expr a, Expr b) { return binary(BinaryOp::mul, std::move(a), std::move(b)); }
Expr operator/(Expr a, Expr b) { return binary(BinaryOp::div, std::move(a), std::move(b)); }
Expr operator%(Expr a, Expr b) { return binary(BinaryOp::mod, std::move(a), std::move(b)); }
Expr operator-(Expr a) { return unary(UnaryOp::neg, std::move(a)); }
Expr operator<(Expr a, Expr b) { return binary(BinaryOp::lt, std::move(a), std::move(b)); }
Expr operator<=(Expr a, Expr b) { return binary(BinaryOp::le, std::move(a), std::move(b)); }
Expr operator>(Expr a, Expr b) { return binary(BinaryOp::gt, std::move(a), std::move(b)); }
Expr operator>=(Expr a, Expr b) { return binary(BinaryOp::ge, std::move(a), std::move(b)); }
Expr operator&&(Expr a, Expr b) { return binary(BinaryOp::logical_and, std::move(a), std::move(b)); }
Expr operator||(Expr a, Expr b) { return binary(BinaryOp::logical_or, std::move(a), std::move(b)); }
Expr eq(Expr a, Expr b) { return binary(BinaryOp::eq, std::move(a), std::move(b)); }
Expr ne(Expr a, Expr b) { return binary(BinaryOp::ne, std::move(a), std::move(b)); }
Expr min(Expr a, Expr b) { return binary(BinaryOp::min, std::move(a), std::move(b)); }
Expr max(Expr a, Expr b) { return binary(BinaryOp::max, std::move(a), std::move(b)); }
Expr pow(Expr a, Expr b) { return binary(BinaryOp::pow, std::move(a), std::move(b)); }
Expr exp(Expr a) { return unary(UnaryOp::exp, std::move(a)); }
Expr log(Expr a) { return unary(UnaryOp::log, std::move(a)); }
Expr sqrt(Expr a) { return unary(UnaryOp::sqrt, std::move(a)); }
Expr rsqrt(Expr a) { return unary(UnaryOp::rsqrt, std::move(a)); }
Expr tanh(Expr a) { return unary(UnaryOp::tanh, std::move(a)); }
Expr erf(Expr a) { return unary(UnaryOp::erf, std::move(a)); }
Expr abs(Expr a) { return unary(UnaryOp::abs, std::move(a)); }
Expr floor(Expr a) { return unary(UnaryOp::floor, std::move(a)); }
Expr ceil(Expr a) { return unary(UnaryOp::ceil, std::move(a)); }

// ---- statement helpers ----------------------------------------------------

Stmt declare(const std::string& name, ScalarType type, Expr init) {
  if (!is_identifier(name)) fail("kir: variable name '" + name + "' is not an identifier");
  check_expr(init, "initial value of '" + name + "'");
  if (is_storage_only(type))
    fail("kir: variable '" + name + "' is declared " + scalar_type_name(type) +
         ", a storage type (buffers only; its values are f32)");
  if (init.type() != type)
    fail("kir: variable '" + name + "' of type " + scalar_type_name(type) + " initialised with a " +
         scalar_type_name(init.type()) + " value");
  Stmt s = stmt_of(StmtKind::declare);
  s.var = name;
  s.type = type;
  s.value = std::move(init);
  return s;
}

Stmt assign(const std::string& name, Expr value) {
  if (!is_identifier(name)) fail("kir: variable name '" + name + "' is not an identifier");
  check_expr(value, "assigned value");
  Stmt s = stmt_of(StmtKind::assign);
  s.var = name;
  s.type = value.type();
  s.value = std::move(value);
  return s;
}

namespace {

// A store to buffer or shared array `target` (see indexed_load).
Stmt indexed_store(StmtKind kind, int target, Expr index, Expr value, const char* what, const std::string& prefix,
                   const char* value_what) {
  if (target < 0) fail(std::string("kir: store to an invalid ") + what + " handle");
  check_expr(index, prefix + "store index");
  check_expr(value, value_what);
  if (!is_index_type(index.type()))
    fail("kir: " + prefix + "store index must be i32 or u32, got " + scalar_type_name(index.type()));
  Stmt s = stmt_of(kind);
  s.buffer = target;
  s.type = value.type();
  s.index = std::move(index);
  s.value = std::move(value);
  return s;
}

}  // namespace

Stmt store(Buf buffer, Expr index, Expr value) {
  return indexed_store(StmtKind::store, buffer.index, std::move(index), std::move(value), "buffer", "",
                       "stored value");
}

Stmt store(Shared array, Expr index, Expr value) {
  return indexed_store(StmtKind::shared_store, array.index, std::move(index), std::move(value), "shared array",
                       "shared ", "value stored to shared memory");
}

Stmt barrier() { return stmt_of(StmtKind::barrier); }

Stmt loop(const std::string& var_name, Expr begin, Expr end, std::vector<Stmt> body, std::int64_t step) {
  if (!is_identifier(var_name)) fail("kir: loop variable name '" + var_name + "' is not an identifier");
  check_expr(begin, "loop begin");
  check_expr(end, "loop end");
  if (begin.type() != ScalarType::i32 || end.type() != ScalarType::i32)
    fail("kir: loop '" + var_name + "' bounds must be i32, got " + scalar_type_name(begin.type()) + " and " +
         scalar_type_name(end.type()));
  if (step < 1 || step > std::numeric_limits<std::int32_t>::max())
    fail("kir: loop '" + var_name + "' step must be in [1, 2^31), got " + std::to_string(step));
  Stmt s = stmt_of(StmtKind::loop);
  s.var = var_name;
  s.type = ScalarType::i32;
  s.begin = std::move(begin);
  s.end = std::move(end);
  s.step = step;
  s.body = std::move(body);
  return s;
}

Stmt branch(Expr cond, std::vector<Stmt> body, std::vector<Stmt> else_body) {
  check_expr(cond, "branch condition");
  if (cond.type() != ScalarType::boolean)
    fail(std::string("kir: branch condition must be bool, got ") + scalar_type_name(cond.type()));
  Stmt s = stmt_of(StmtKind::branch);
  s.value = std::move(cond);
  s.body = std::move(body);
  s.else_body = std::move(else_body);
  return s;
}

bool is_vector_width(std::size_t width) { return width == 2 || width == 4; }

Stmt load_vector(std::vector<std::string> names, Buf buffer, Expr vector_index, ScalarType type) {
  if (buffer.index < 0) fail("kir: vector load from an invalid buffer handle");
  if (!is_vector_width(names.size()))
    fail("kir: a vector load declares 2 or 4 variables, got " + std::to_string(names.size()));
  for (const std::string& name : names)
    if (!is_identifier(name)) fail("kir: variable name '" + name + "' is not an identifier");
  check_expr(vector_index, "vector load index");
  if (!is_index_type(vector_index.type()))
    fail(std::string("kir: vector load index must be i32 or u32, got ") + scalar_type_name(vector_index.type()));
  Stmt s = stmt_of(StmtKind::load_vector);
  s.vars = std::move(names);
  s.buffer = buffer.index;
  s.type = type;
  s.index = std::move(vector_index);
  return s;
}

Stmt store_vector(Buf buffer, Expr vector_index, std::vector<Expr> values) {
  if (buffer.index < 0) fail("kir: vector store to an invalid buffer handle");
  if (!is_vector_width(values.size()))
    fail("kir: a vector store writes 2 or 4 values, got " + std::to_string(values.size()));
  check_expr(vector_index, "vector store index");
  if (!is_index_type(vector_index.type()))
    fail(std::string("kir: vector store index must be i32 or u32, got ") + scalar_type_name(vector_index.type()));
  for (const Expr& value : values) {
    check_expr(value, "vector store value");
    if (value.type() != values[0].type()) fail("kir: the values of a vector store differ in type");
  }
  Stmt s = stmt_of(StmtKind::store_vector);
  s.buffer = buffer.index;
  s.type = values[0].type();
  s.index = std::move(vector_index);
  s.values = std::move(values);
  return s;
}

// ---- dispatch -------------------------------------------------------------

std::array<std::uint32_t, 3> dispatch_grid(const Kernel& kernel, std::uint32_t max_groups_x) {
  constexpr std::int64_t kMaxGlobalSize = std::int64_t{1} << 31;
  if (kernel.global_size <= 0 || kernel.global_size >= kMaxGlobalSize)
    fail("kernel '" + kernel.name + "': global_size " + std::to_string(kernel.global_size) + " is outside (0, 2^31)");
  if (kernel.workgroup_size == 0) fail("kernel '" + kernel.name + "': workgroup_size is 0");
  if (max_groups_x == 0) fail("kernel '" + kernel.name + "': the device allows 0 workgroups in x");
  const std::int64_t wg = kernel.workgroup_size;
  const std::int64_t groups = (kernel.global_size + wg - 1) / wg;
  if (groups <= max_groups_x) return {static_cast<std::uint32_t>(groups), 1, 1};
  // Fewest rows, then the narrowest rows that still cover every group, so the
  // guarded tail stays below one row.
  const std::int64_t gy = (groups + max_groups_x - 1) / max_groups_x;
  const std::int64_t gx = (groups + gy - 1) / gy;
  return {static_cast<std::uint32_t>(gx), static_cast<std::uint32_t>(gy), 1};
}

}  // namespace kiln::kir
