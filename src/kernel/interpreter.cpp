// Tree-walking interpreter over a pre-resolved kernel: variable names become
// slots and expressions become nodes in one array, once per interpret() call,
// so the per-invocation work is a switch per node.
#include "src/kernel/interpreter.h"

#include <kiln/error.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <unordered_map>
#include <vector>

namespace kiln::kir {
namespace {

// One scalar; booleans are stored as u == 0 or 1.
union Value {
  float f;
  std::int32_t i;
  std::uint32_t u;
};

Value of_f32(float v) { return {.f = v}; }
Value of_i32(std::int32_t v) { return {.i = v}; }
Value of_u32(std::uint32_t v) { return {.u = v}; }
Value of_bool(bool v) { return of_u32(v ? 1u : 0u); }

// Wrap-around i32 arithmetic without signed overflow in C++.
std::int32_t wrap(std::uint32_t bits) { return static_cast<std::int32_t>(bits); }
std::uint32_t bits(std::int32_t v) { return static_cast<std::uint32_t>(v); }

constexpr std::size_t kElementBytes = 4;  // f32, i32 and u32 buffers

struct Node {
  ExprKind kind = ExprKind::constant;
  ScalarType type = ScalarType::f32;     // result type
  ScalarType operand = ScalarType::f32;  // type of args[0] (binary, cast, load index)
  UnaryOp unary = UnaryOp::neg;
  BinaryOp binary = BinaryOp::add;
  int ref = -1;  // var: slot; load: buffer
  int a = -1, b = -1, c = -1;
  Value constant{};
};

struct Op {
  StmtKind kind = StmtKind::declare;
  int slot = -1;  // declare, assign, loop variable
  std::vector<int> slots;  // load_vector: one per declared variable
  int buffer = -1;
  int value = -1, index = -1, begin = -1, end = -1;
  std::int32_t step = 1;
  std::string var;  // loop variable, for messages
  std::vector<Op> body, else_body;
};

// Resolves names to slots and flattens expressions. The kernel is verified,
// so every name resolves and every type is consistent.
class Compiler {
 public:
  std::vector<Node> nodes;
  std::vector<Op> body;
  int num_slots = 0;

  explicit Compiler(const Kernel& kernel) : params_(kernel.params) { body = block(kernel.body); }

 private:
  std::vector<Op> block(const std::vector<Stmt>& stmts) {
    std::vector<std::string> declared;
    std::vector<Op> ops;
    ops.reserve(stmts.size());
    for (const Stmt& s : stmts) {
      Op op;
      op.kind = s.kind;
      switch (s.kind) {
        case StmtKind::declare:
          op.value = expr(s.value);
          op.slot = bind(s.var);
          declared.push_back(s.var);
          break;
        case StmtKind::assign:
          op.value = expr(s.value);
          op.slot = slot_of(s.var);
          break;
        case StmtKind::store:
          op.buffer = s.buffer;
          op.index = expr(s.index);
          op.value = expr(s.value);
          break;
        case StmtKind::loop:
          op.begin = expr(s.begin);
          op.slot = bind(s.var);
          op.var = s.var;
          op.end = expr(s.end);
          op.step = static_cast<std::int32_t>(s.step);
          op.body = block(s.body);
          slots_.erase(s.var);
          break;
        case StmtKind::load_vector:
          op.buffer = s.buffer;
          op.index = expr(s.index);
          for (const std::string& name : s.vars) {
            op.slots.push_back(bind(name));
            declared.push_back(name);
          }
          break;
        case StmtKind::branch:
          op.value = expr(s.value);
          op.body = block(s.body);
          op.else_body = block(s.else_body);
          break;
      }
      ops.push_back(std::move(op));
    }
    for (const std::string& name : declared) slots_.erase(name);
    return ops;
  }

  int bind(const std::string& name) {
    slots_[name] = num_slots;
    return num_slots++;
  }

  int slot_of(const std::string& name) const {
    auto it = slots_.find(name);
    KILN_ASSERT(it != slots_.end());
    return it->second;
  }

  int expr(const Expr& e) {
    const ExprNode& src = *e;
    Node n;
    n.kind = src.kind;
    n.type = src.type;
    n.unary = src.unary;
    n.binary = src.binary;
    if (!src.args.empty()) n.operand = src.args[0].type();
    switch (src.kind) {
      case ExprKind::constant:
        if (src.type == ScalarType::f32)
          n.constant = of_f32(static_cast<float>(src.fvalue));
        else if (src.type == ScalarType::i32)
          n.constant = of_i32(static_cast<std::int32_t>(src.ivalue));
        else
          n.constant = of_u32(static_cast<std::uint32_t>(src.ivalue));
        break;
      case ExprKind::param:
        // A parameter is a constant of this instance (verify() checked the index).
        n.kind = ExprKind::constant;
        n.constant = of_i32(params_[static_cast<std::size_t>(src.param)]);
        break;
      case ExprKind::var: n.ref = slot_of(src.name); break;
      case ExprKind::load: n.ref = src.buffer; break;
      default: break;
    }
    if (src.args.size() > 0) n.a = expr(src.args[0]);
    if (src.args.size() > 1) n.b = expr(src.args[1]);
    if (src.args.size() > 2) n.c = expr(src.args[2]);
    nodes.push_back(n);
    return static_cast<int>(nodes.size()) - 1;
  }

  const std::vector<std::int32_t>& params_;
  std::unordered_map<std::string, int> slots_;
};

struct BufferView {
  std::byte* data = nullptr;
  std::int64_t count = 0;  // elements
};

class Machine {
 public:
  Machine(const Kernel& kernel, const Compiler& program, std::vector<BufferView> buffers)
      : kernel_(kernel),
        nodes_(program.nodes),
        buffers_(std::move(buffers)),
        slots_(static_cast<std::size_t>(program.num_slots)) {}

  void run(const std::vector<Op>& body) {
    for (invocation_ = 0; invocation_ < kernel_.global_size; ++invocation_) exec(body);
  }

 private:
  [[noreturn]] void error(const std::string& problem) const {
    throw_error(ErrorKind::Internal,
                "kernel '" + kernel_.name + "', invocation " + std::to_string(invocation_) + ": " + problem);
  }

  std::string buffer_label(int buffer) const {
    return "buffer " + std::to_string(buffer) + " '" + kernel_.buffers[static_cast<std::size_t>(buffer)].name + "'";
  }

  // Element offset in bytes of `index` (of type `type`) in `buffer`, checked.
  std::size_t element_offset(const char* what, int buffer, Value index, ScalarType type) const {
    const std::int64_t i = type == ScalarType::u32 ? std::int64_t{index.u} : std::int64_t{index.i};
    const std::int64_t count = buffers_[static_cast<std::size_t>(buffer)].count;
    if (i < 0 || i >= count)
      error(std::string(what) + " " + buffer_label(buffer) + " at index " + std::to_string(i) +
            " is out of bounds (size " + std::to_string(count) + " elements)");
    return static_cast<std::size_t>(i) * kElementBytes;
  }

  // Byte offset of vector `index` (width = op.slots.size()) of op.buffer:
  // the whole vector must lie in the buffer.
  std::size_t vector_offset(const Op& op, Value index) const {
    const ScalarType type = nodes_[static_cast<std::size_t>(op.index)].type;
    const std::int64_t i = type == ScalarType::u32 ? std::int64_t{index.u} : std::int64_t{index.i};
    const auto width = static_cast<std::int64_t>(op.slots.size());
    const std::int64_t count = buffers_[static_cast<std::size_t>(op.buffer)].count;
    if (i < 0 || (i + 1) * width > count)
      error("vector load of width " + std::to_string(width) + " from " + buffer_label(op.buffer) + " at vector index " +
            std::to_string(i) + " (elements " + std::to_string(i * width) + ".." + std::to_string(i * width + width - 1) +
            ") is out of bounds (size " + std::to_string(count) + " elements)");
    return static_cast<std::size_t>(i * width) * kElementBytes;
  }

  void exec(const std::vector<Op>& ops) {
    for (const Op& op : ops) {
      switch (op.kind) {
        case StmtKind::declare:
        case StmtKind::assign: slots_[static_cast<std::size_t>(op.slot)] = eval(op.value); break;
        case StmtKind::store: {
          const Value index = eval(op.index);
          const std::size_t offset =
              element_offset("store to", op.buffer, index, nodes_[static_cast<std::size_t>(op.index)].type);
          const Value v = eval(op.value);
          std::memcpy(buffers_[static_cast<std::size_t>(op.buffer)].data + offset, &v, kElementBytes);
          break;
        }
        case StmtKind::loop: {
          Value& k = slots_[static_cast<std::size_t>(op.slot)];
          k = eval(op.begin);
          while (k.i < eval(op.end).i) {
            exec(op.body);
            if (k.i > std::numeric_limits<std::int32_t>::max() - op.step)
              error("loop variable '" + op.var + "' overflows i32 after " + std::to_string(k.i));
            k.i += op.step;
          }
          break;
        }
        case StmtKind::load_vector: {
          const std::size_t offset = vector_offset(op, eval(op.index));
          const std::byte* data = buffers_[static_cast<std::size_t>(op.buffer)].data + offset;
          for (std::size_t c = 0; c < op.slots.size(); ++c)
            std::memcpy(&slots_[static_cast<std::size_t>(op.slots[c])], data + c * kElementBytes, kElementBytes);
          break;
        }
        case StmtKind::branch: exec(eval(op.value).u ? op.body : op.else_body); break;
      }
    }
  }

  Value eval(int id) {
    const Node& n = nodes_[static_cast<std::size_t>(id)];
    switch (n.kind) {
      case ExprKind::constant:
      case ExprKind::param: return n.constant;  // the compiler resolved parameters to constants
      case ExprKind::var: return slots_[static_cast<std::size_t>(n.ref)];
      case ExprKind::global_index: return of_i32(static_cast<std::int32_t>(invocation_));
      case ExprKind::load: {
        const std::size_t offset = element_offset("load from", n.ref, eval(n.a), n.operand);
        Value v;
        std::memcpy(&v, buffers_[static_cast<std::size_t>(n.ref)].data + offset, kElementBytes);
        return v;
      }
      case ExprKind::unary: return unary(n, eval(n.a));
      case ExprKind::binary:
        // && and || short-circuit, as in C and GLSL.
        if (n.binary == BinaryOp::logical_and) return eval(n.a).u ? eval(n.b) : of_bool(false);
        if (n.binary == BinaryOp::logical_or) return eval(n.a).u ? of_bool(true) : eval(n.b);
        return binary(n, eval(n.a), eval(n.b));
      case ExprKind::select: return eval(n.a).u ? eval(n.b) : eval(n.c);
      case ExprKind::cast: return cast(n, eval(n.a));
    }
    KILN_ASSERT(false && "unknown expression kind");
    return {};
  }

  static Value unary(const Node& n, Value a) {
    if (n.type == ScalarType::i32) {
      switch (n.unary) {
        case UnaryOp::neg: return of_i32(wrap(0u - bits(a.i)));
        case UnaryOp::abs: return of_i32(a.i < 0 ? wrap(0u - bits(a.i)) : a.i);
        default: break;
      }
    } else if (n.type == ScalarType::f32) {
      const float x = a.f;
      switch (n.unary) {
        case UnaryOp::neg: return of_f32(-x);
        case UnaryOp::exp: return of_f32(std::exp(x));
        case UnaryOp::log: return of_f32(std::log(x));
        case UnaryOp::sqrt: return of_f32(std::sqrt(x));
        case UnaryOp::rsqrt: return of_f32(1.0f / std::sqrt(x));
        case UnaryOp::tanh: return of_f32(std::tanh(x));
        case UnaryOp::erf: return of_f32(std::erf(x));
        case UnaryOp::abs: return of_f32(std::fabs(x));
        case UnaryOp::floor: return of_f32(std::floor(x));
        case UnaryOp::ceil: return of_f32(std::ceil(x));
        default: break;
      }
    } else if (n.unary == UnaryOp::logical_not) {
      return of_bool(a.u == 0);
    }
    KILN_ASSERT(false && "unary op and type passed verify() but have no semantics");
    return {};
  }

  Value binary(const Node& n, Value a, Value b) const {
    switch (n.operand) {
      case ScalarType::f32: return binary_f32(n.binary, a.f, b.f);
      case ScalarType::i32: return binary_i32(n.binary, a.i, b.i);
      case ScalarType::u32: return binary_u32(n.binary, a.u, b.u);
      case ScalarType::boolean:
        if (n.binary == BinaryOp::eq) return of_bool(a.u == b.u);
        if (n.binary == BinaryOp::ne) return of_bool(a.u != b.u);
        break;
    }
    KILN_ASSERT(false && "binary op and type passed verify() but have no semantics");
    return {};
  }

  static Value binary_f32(BinaryOp op, float a, float b) {
    switch (op) {
      case BinaryOp::add: return of_f32(a + b);
      case BinaryOp::sub: return of_f32(a - b);
      case BinaryOp::mul: return of_f32(a * b);
      case BinaryOp::div: return of_f32(a / b);
      case BinaryOp::min: return of_f32(std::fmin(a, b));
      case BinaryOp::max: return of_f32(std::fmax(a, b));
      case BinaryOp::pow: return of_f32(std::pow(a, b));
      case BinaryOp::lt: return of_bool(a < b);
      case BinaryOp::le: return of_bool(a <= b);
      case BinaryOp::gt: return of_bool(a > b);
      case BinaryOp::ge: return of_bool(a >= b);
      case BinaryOp::eq: return of_bool(a == b);
      case BinaryOp::ne: return of_bool(a != b);
      default: break;
    }
    KILN_ASSERT(false && "f32 binary op without semantics");
    return {};
  }

  Value binary_i32(BinaryOp op, std::int32_t a, std::int32_t b) const {
    switch (op) {
      case BinaryOp::add: return of_i32(wrap(bits(a) + bits(b)));
      case BinaryOp::sub: return of_i32(wrap(bits(a) - bits(b)));
      case BinaryOp::mul: return of_i32(wrap(bits(a) * bits(b)));
      case BinaryOp::div:
        if (b == 0) error("i32 division " + std::to_string(a) + " / 0");
        // INT_MIN / -1 wraps to INT_MIN like the other i32 arithmetic.
        return of_i32(wrap(static_cast<std::uint32_t>(std::int64_t{a} / std::int64_t{b})));
      case BinaryOp::mod:
        if (a < 0 || b <= 0)
          error("i32 mod " + std::to_string(a) + " % " + std::to_string(b) + " needs a >= 0 and b > 0");
        return of_i32(a % b);
      case BinaryOp::min: return of_i32(std::min(a, b));
      case BinaryOp::max: return of_i32(std::max(a, b));
      case BinaryOp::lt: return of_bool(a < b);
      case BinaryOp::le: return of_bool(a <= b);
      case BinaryOp::gt: return of_bool(a > b);
      case BinaryOp::ge: return of_bool(a >= b);
      case BinaryOp::eq: return of_bool(a == b);
      case BinaryOp::ne: return of_bool(a != b);
      default: break;
    }
    KILN_ASSERT(false && "i32 binary op without semantics");
    return {};
  }

  Value binary_u32(BinaryOp op, std::uint32_t a, std::uint32_t b) const {
    switch (op) {
      case BinaryOp::add: return of_u32(a + b);
      case BinaryOp::sub: return of_u32(a - b);
      case BinaryOp::mul: return of_u32(a * b);
      case BinaryOp::div:
        if (b == 0) error("u32 division " + std::to_string(a) + " / 0");
        return of_u32(a / b);
      case BinaryOp::mod:
        if (b == 0) error("u32 mod " + std::to_string(a) + " % 0");
        return of_u32(a % b);
      case BinaryOp::min: return of_u32(std::min(a, b));
      case BinaryOp::max: return of_u32(std::max(a, b));
      case BinaryOp::lt: return of_bool(a < b);
      case BinaryOp::le: return of_bool(a <= b);
      case BinaryOp::gt: return of_bool(a > b);
      case BinaryOp::ge: return of_bool(a >= b);
      case BinaryOp::eq: return of_bool(a == b);
      case BinaryOp::ne: return of_bool(a != b);
      default: break;
    }
    KILN_ASSERT(false && "u32 binary op without semantics");
    return {};
  }

  Value cast(const Node& n, Value a) const {
    const ScalarType from = n.operand;
    switch (n.type) {
      case ScalarType::f32:
        if (from == ScalarType::f32) return a;
        if (from == ScalarType::i32) return of_f32(static_cast<float>(a.i));
        if (from == ScalarType::u32) return of_f32(static_cast<float>(a.u));
        return of_f32(a.u ? 1.0f : 0.0f);
      case ScalarType::i32:
        if (from == ScalarType::f32)
          return of_i32(static_cast<std::int32_t>(checked_trunc(a.f, "i32", -2147483648.0, 2147483648.0)));
        if (from == ScalarType::boolean) return of_i32(a.u ? 1 : 0);
        return of_i32(wrap(a.u));  // i32 or u32: same bits
      case ScalarType::u32:
        if (from == ScalarType::f32)
          return of_u32(static_cast<std::uint32_t>(checked_trunc(a.f, "u32", 0.0, 4294967296.0)));
        if (from == ScalarType::boolean) return of_u32(a.u ? 1u : 0u);
        return of_u32(a.u);
      case ScalarType::boolean:
        if (from == ScalarType::f32) return of_bool(a.f != 0.0f);
        return of_bool(a.u != 0);
    }
    KILN_ASSERT(false && "cast to an unknown type");
    return {};
  }

  // C's float -> integer conversion: truncate, defined only when the result
  // fits in [lo, hi).
  double checked_trunc(float x, const char* type, double lo, double hi) const {
    const double t = std::trunc(static_cast<double>(x));
    if (!(t >= lo && t < hi)) error("cast of f32 " + std::to_string(x) + " to " + type + " is out of range");
    return t;
  }

  const Kernel& kernel_;
  const std::vector<Node>& nodes_;
  std::vector<BufferView> buffers_;
  std::vector<Value> slots_;
  std::int64_t invocation_ = 0;
};

}  // namespace

void interpret(const Kernel& kernel, std::span<const std::span<std::byte>> buffers) {
  verify(kernel);
  if (buffers.size() != kernel.buffers.size())
    throw_error(ErrorKind::Internal, "kernel '" + kernel.name + "' has " + std::to_string(kernel.buffers.size()) +
                                         " buffers, interpret() got " + std::to_string(buffers.size()));
  std::vector<BufferView> views;
  views.reserve(buffers.size());
  for (std::size_t i = 0; i < buffers.size(); ++i) {
    if (buffers[i].size() % kElementBytes != 0)
      throw_error(ErrorKind::Internal, "kernel '" + kernel.name + "': buffer " + std::to_string(i) + " '" +
                                           kernel.buffers[i].name + "' has " + std::to_string(buffers[i].size()) +
                                           " bytes, not a whole number of " + scalar_type_name(kernel.buffers[i].type) +
                                           " elements");
    views.push_back({buffers[i].data(), static_cast<std::int64_t>(buffers[i].size() / kElementBytes)});
  }
  const Compiler program(kernel);
  Machine(kernel, program, std::move(views)).run(program.body);
}

}  // namespace kiln::kir
