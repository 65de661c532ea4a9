#include "src/kernel/f16_arithmetic.h"

#include <set>
#include <string>
#include <vector>

namespace kiln::kir {
namespace {

// Ops whose f32 result narrow() computes in f16 instead.
bool is_pointwise_f32(const ExprNode& n) {
  if (n.type != ScalarType::f32) return false;
  switch (n.kind) {
    case ExprKind::unary: return true;  // every f32 unary op has an f16 form
    case ExprKind::binary:
      switch (n.binary) {
        case BinaryOp::add:
        case BinaryOp::sub:
        case BinaryOp::mul:
        case BinaryOp::div:
        case BinaryOp::min:
        case BinaryOp::max: return true;
        default: return false;  // pow stays f32
      }
    case ExprKind::select: return true;
    default: return false;
  }
}

class Narrower {
 public:
  explicit Narrower(const Kernel& kernel) : kernel_(kernel) { find_f16_vars(kernel.body); }

  int rewrite(std::vector<Stmt>& stmts) const {
    int count = 0;
    for (Stmt& s : stmts) {
      const bool f16_buffer = (s.kind == StmtKind::store || s.kind == StmtKind::store_vector) &&
                              kernel_.buffers[static_cast<std::size_t>(s.buffer)].type == ScalarType::f16;
      if (f16_buffer && s.kind == StmtKind::store) count += narrow_stored(s.value) ? 1 : 0;
      if (f16_buffer && s.kind == StmtKind::store_vector)
        for (Expr& value : s.values) count += narrow_stored(value) ? 1 : 0;
      count += rewrite(s.body);
      count += rewrite(s.else_body);
    }
    return count;
  }

 private:
  // Variables whose every value is an f16 buffer element: declared by a
  // vector load of an f16 buffer, or from a load of one and never assigned.
  void find_f16_vars(const std::vector<Stmt>& stmts) {
    std::set<std::string> assigned;
    collect(stmts, assigned);
    for (const std::string& name : assigned) f16_vars_.erase(name);
  }

  void collect(const std::vector<Stmt>& stmts, std::set<std::string>& assigned) {
    for (const Stmt& s : stmts) {
      if (s.kind == StmtKind::load_vector && buffer_is_f16(s.buffer))
        for (const std::string& name : s.vars) f16_vars_.insert(name);
      if (s.kind == StmtKind::declare && s.value && is_f16_element(*s.value)) f16_vars_.insert(s.var);
      if (s.kind == StmtKind::assign) assigned.insert(s.var);
      collect(s.body, assigned);
      collect(s.else_body, assigned);
    }
  }

  bool buffer_is_f16(int buffer) const {
    return buffer >= 0 && kernel_.buffers[static_cast<std::size_t>(buffer)].type == ScalarType::f16;
  }

  // A value f16 holds exactly: an element of an f16 buffer.
  bool is_f16_element(const ExprNode& n) const {
    if (n.kind == ExprKind::load) return buffer_is_f16(n.buffer);
    if (n.kind == ExprKind::var) return f16_vars_.count(n.name) != 0;
    return false;
  }

  // An f32 operand that is not an f16 value already, such as a sum or a
  // statistic in a variable: rounding it before a sum or difference would
  // lose what cancellation keeps (x - mean), so such an add or sub runs in f32.
  bool is_wide_operand(const ExprNode& n) const {
    return !is_pointwise_f32(n) && n.kind != ExprKind::constant && !is_f16_element(n);
  }

  // `e` (f32) as an f16 value: its pointwise ops in f16, everything else
  // (loads, variables, constants, pow, casts) rounded to f16 where read.
  Expr narrow(const Expr& e) const {
    const ExprNode& n = *e;
    if (n.kind == ExprKind::cast && n.args[0].type() == ScalarType::f16) return n.args[0];
    if (!is_pointwise_f32(n)) return cast(ScalarType::f16, e);
    switch (n.kind) {
      case ExprKind::unary: return unary(n.unary, narrow(n.args[0]));
      case ExprKind::binary:
        if ((n.binary == BinaryOp::add || n.binary == BinaryOp::sub) &&
            (is_wide_operand(*n.args[0]) || is_wide_operand(*n.args[1])))
          return cast(ScalarType::f16, e);
        return binary(n.binary, narrow(n.args[0]), narrow(n.args[1]));
      default: return select(n.args[0], narrow(n.args[1]), narrow(n.args[2]));
    }
  }

  // The value to store, computed in f16 where its root is a pointwise op
  // that narrows (a lone sum of a variable stays as it is).
  bool narrow_stored(Expr& value) const {
    if (!is_pointwise_f32(*value)) return false;
    Expr narrowed = narrow(value);
    if (narrowed->kind == ExprKind::cast) return false;  // nothing computes in f16
    value = cast(ScalarType::f32, std::move(narrowed));
    return true;
  }

  const Kernel& kernel_;
  std::set<std::string> f16_vars_;
};

bool has_f16(const Expr& e) {
  if (!e) return false;
  if (e->type == ScalarType::f16) return true;
  for (const Expr& arg : e->args)
    if (has_f16(arg)) return true;
  return false;
}

bool has_f16(const std::vector<Stmt>& stmts) {
  for (const Stmt& s : stmts) {
    if (has_f16(s.value)) return true;
    for (const Expr& value : s.values)
      if (has_f16(value)) return true;
    if (has_f16(s.body) || has_f16(s.else_body)) return true;
  }
  return false;
}

}  // namespace

int use_f16_arithmetic(Kernel& kernel) {
  const Narrower narrower(kernel);
  return narrower.rewrite(kernel.body);
}

bool uses_f16_arithmetic(const Kernel& kernel) { return has_f16(kernel.body); }

}  // namespace kiln::kir
