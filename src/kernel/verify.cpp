// Kernel IR: verify(), the checks every kernel passes before it is rendered
// or interpreted (the type rules it shares with the construction helpers
// are in type_rules.h).
#include "src/kernel/ir.h"
#include "src/kernel/type_rules.h"

#include <kiln/error.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace kiln::kir {

// ---- verify ---------------------------------------------------------------

namespace {

// Variables whose value may differ between the invocations of a workgroup:
// those computed from global_index, local_index or a loaded value, and those
// written under a condition or trip count that may differ. Flow-insensitive
// (by name, iterated to a fixed point), so conservative.
class Divergence {
 public:
  explicit Divergence(const std::vector<Stmt>& body) {
    std::size_t before = 0;
    do {
      before = divergent_.size();
      block(body, false);
    } while (divergent_.size() != before);
  }

  bool uniform(const Expr& e) const {
    if (!e) return true;
    switch (e->kind) {
      case ExprKind::global_index:
      case ExprKind::local_index:
      case ExprKind::load:
      case ExprKind::shared_load:
      case ExprKind::subgroup_lane:
      case ExprKind::subgroup_id:
      case ExprKind::subgroup_broadcast: return false;
      case ExprKind::var:
        if (divergent_.count(e->name)) return false;
        break;
      default: break;
    }
    for (const Expr& arg : e->args)
      if (!uniform(arg)) return false;
    return true;
  }

 private:
  void block(const std::vector<Stmt>& stmts, bool divergent_context) {
    for (const Stmt& s : stmts) {
      switch (s.kind) {
        case StmtKind::declare:
        case StmtKind::assign:
          if (divergent_context || !uniform(s.value)) divergent_.insert(s.var);
          break;
        case StmtKind::load_vector: divergent_.insert(s.vars.begin(), s.vars.end()); break;
        case StmtKind::loop: {
          const bool inner = divergent_context || !uniform(s.begin) || !uniform(s.end);
          if (inner) divergent_.insert(s.var);
          block(s.body, inner);
          break;
        }
        case StmtKind::branch: {
          const bool inner = divergent_context || !uniform(s.value);
          block(s.body, inner);
          block(s.else_body, inner);
          break;
        }
        default: break;
      }
    }
  }

  std::unordered_set<std::string> divergent_;
};

class Verifier {
 public:
  Verifier(const Kernel& kernel, std::optional<std::uint64_t> max_shared_bytes)
      : kernel_(kernel), max_shared_bytes_(max_shared_bytes), divergence_(kernel.body) {}

  void run() {
    if (!is_identifier(kernel_.name))
      fail("kernel '" + kernel_.name +
           "': name is not an identifier (a letter, then letters, digits and single underscores)");
    if (is_reserved_kernel_name(kernel_.name))
      fail("kernel '" + kernel_.name + "': name is reserved in a target language (keyword or library function)");
    if (kernel_.global_size <= 0 || kernel_.global_size >= (std::int64_t{1} << 31))
      error("global_size " + std::to_string(kernel_.global_size) + " is outside (0, 2^31)");
    if (kernel_.workgroup_size == 0) error("workgroup_size is 0");
    if (const std::optional<int> p = kernel_.global_size_param) {
      check_param_index(*p, "the global-size guard");
      if (kernel_.params[static_cast<std::size_t>(*p)] != kernel_.global_size)
        error("the global-size guard reads param(" + std::to_string(*p) + ") = " +
              std::to_string(kernel_.params[static_cast<std::size_t>(*p)]) + ", but global_size is " +
              std::to_string(kernel_.global_size));
    }
    std::unordered_set<std::string> names;
    for (std::size_t i = 0; i < kernel_.buffers.size(); ++i) {
      const BufferParam& b = kernel_.buffers[i];
      if (!is_identifier(b.name)) error("buffer " + std::to_string(i) + " name '" + b.name + "' is not an identifier");
      if (!names.insert(b.name).second) error("duplicate buffer name '" + b.name + "'");
      if (b.texel_width != 0 && b.texel_width != 1 && b.texel_width != 4)
        error("buffer '" + b.name + "' has texel width " + std::to_string(b.texel_width) + "; it must be 0, 1 or 4");
      const bool texel_type = b.type == ScalarType::f32 || b.type == ScalarType::f16 || b.type == ScalarType::bf16;
      if (b.texel_width != 0 && (!texel_type || b.access != Access::read))
        error("texel buffer '" + b.name + "' must be read-only f32, f16 or bf16");
    }
    check_shared_arrays();
    check_fragments();
    check_subgroups();
    if (has_barrier(kernel_) && kernel_.global_size % kernel_.workgroup_size != 0)
      error("has barriers but global_size " + std::to_string(kernel_.global_size) +
            " is not a multiple of workgroup_size " + std::to_string(kernel_.workgroup_size) +
            " (a partial workgroup would leave invocations out of the barrier)");
    block(kernel_.body, "body");
  }

 private:
  struct VarInfo {
    ScalarType type;
    bool read_only;  // loop variables
  };

  [[noreturn]] void error(const std::string& problem) const {
    std::string msg = "kernel '" + kernel_.name + "': " + problem;
    if (!path_.empty()) {
      msg += " (at ";
      for (std::size_t i = 0; i < path_.size(); ++i) msg += (i ? " > " : "") + path_[i];
      msg += ")";
    }
    fail(msg);
  }

  std::string buffer_label(int index) const {
    return "buffer " + std::to_string(index) + " '" + kernel_.buffers[static_cast<std::size_t>(index)].name + "'";
  }

  void check_param_index(int index, const std::string& where) const {
    if (index < 0 || static_cast<std::size_t>(index) >= kernel_.params.size())
      error("parameter index " + std::to_string(index) + " in " + where + " is invalid (the kernel has " +
            std::to_string(kernel_.params.size()) + " parameters)");
  }

  void check_subgroups() const {
    const std::uint32_t size = kernel_.subgroup_size;
    if (size != 0) {
      if (!std::has_single_bit(size) || size > kMaxSubgroupSize)
        error("subgroup_size " + std::to_string(size) + " is not a power of two up to " +
              std::to_string(kMaxSubgroupSize));
      if (kernel_.workgroup_size % size != 0)
        error("workgroup_size " + std::to_string(kernel_.workgroup_size) + " is not a multiple of subgroup_size " +
              std::to_string(size));
    }
    if (!uses_subgroup_ops(kernel_) && !uses_fragments(kernel_)) return;
    if (size == 0) error("uses subgroup operations but declares no subgroup_size");
    if (kernel_.global_size % kernel_.workgroup_size != 0)
      error("uses subgroup operations but global_size " + std::to_string(kernel_.global_size) +
            " is not a multiple of workgroup_size " + std::to_string(kernel_.workgroup_size) +
            " (every subgroup must be whole)");
  }

  void check_fragments() const {
    std::unordered_set<std::string> names;
    for (const Fragment& f : kernel_.fragments) {
      if (!is_identifier(f.name)) error("fragment name '" + f.name + "' is not an identifier");
      if (!names.insert(f.name).second) error("duplicate fragment name '" + f.name + "'");
      for (const std::uint32_t d : {f.shape.m, f.shape.n, f.shape.k})
        if (d < 1 || d > kMaxFragmentDim)
          error("fragment '" + f.name + "' has shape " + std::to_string(f.shape.m) + "x" + std::to_string(f.shape.n) +
                "x" + std::to_string(f.shape.k) + " (each dimension in [1, " + std::to_string(kMaxFragmentDim) + "])");
    }
    if (!kernel_.fragments.empty() && kernel_.subgroup_size == 0)
      error("declares matrix fragments but no subgroup_size (a fragment belongs to a subgroup)");
  }

  const Fragment& fragment(const std::string& name, const char* what) const {
    for (const Fragment& f : kernel_.fragments)
      if (f.name == name) return f;
    error(std::string(what) + " of undeclared fragment '" + name + "'");
  }

  void require_role(const Fragment& f, FragmentRole role, const char* what) const {
    if (f.role != role)
      error(std::string(what) + ": fragment '" + f.name + "' is " + fragment_role_name(f.role) + ", not " +
            fragment_role_name(role));
  }

  // Every lane of the subgroup reaches a fragment statement together.
  void check_collective_place(const char* what) const {
    if (divergent_branches_ > 0)
      error(std::string(what) + " inside a branch whose condition may differ between invocations: every lane of "
                                "the subgroup must reach it (uniform control flow)");
    if (!divergent_loops_.empty())
      error(std::string(what) + " inside loop '" + divergent_loops_.back() +
            "', whose bounds may differ between invocations (uniform control flow)");
  }

  // A fragment load's source or a fragment store's destination, and its
  // index, stride, rows and cols.
  void tile_access(const Stmt& s, const Fragment& f, bool store) {
    const char* what = store ? "fragment store" : "fragment load";
    if (s.shared_memory) {
      check_shared_index(s.buffer);
      const SharedArray& a = kernel_.shared[static_cast<std::size_t>(s.buffer)];
      if (a.type != ScalarType::f32)
        error(std::string(what) + " of " + shared_label(s.buffer) + " of type " + scalar_type_name(a.type) +
              " (fragments are read from and written to f32 arrays)");
    } else {
      check_buffer_index(s.buffer);
      const BufferParam& b = kernel_.buffers[static_cast<std::size_t>(s.buffer)];
      if (store && b.access == Access::read)
        error(std::string(what) + " to " + buffer_label(s.buffer) + ", which is declared read-only");
      if (!store && b.access == Access::write)
        error(std::string(what) + " from " + buffer_label(s.buffer) + ", which is declared write-only (use read_write)");
      if (value_type(b.type) != ScalarType::f32)
        error(std::string(what) + " of " + buffer_label(s.buffer) + " of type " + scalar_type_name(b.type) +
              " (fragments are read from and written to f32, f16 or bf16 buffers)");
      if (b.texel_width != 0) error(std::string(what) + " of texel " + buffer_label(s.buffer));
    }
    if (s.values.size() != 3) error(std::string(what) + " of '" + f.name + "' without its stride, rows and cols");
    const char* operands[] = {"index", "stride", "rows", "cols"};
    const Expr* exprs[] = {&s.index, &s.values[0], &s.values[1], &s.values[2]};
    for (int i = 0; i < 4; ++i)
      if (expr(*exprs[i], std::string(what) + " " + operands[i]) != ScalarType::i32)
        error(std::string(what) + " " + operands[i] + " must be i32");
  }

  void check_shared_arrays() const {
    std::unordered_set<std::string> names;
    for (std::size_t i = 0; i < kernel_.shared.size(); ++i) {
      const SharedArray& a = kernel_.shared[i];
      if (!is_identifier(a.name))
        error("shared array " + std::to_string(i) + " name '" + a.name + "' is not an identifier");
      if (!names.insert(a.name).second) error("duplicate shared array name '" + a.name + "'");
      if (a.type == ScalarType::boolean || a.type == ScalarType::i64 || is_storage_only(a.type))
        error("shared array '" + a.name + "' has element type " + scalar_type_name(a.type) + "; use f32, i32 or u32");
      if (a.count < 1 || a.count > kMaxSharedElements)
        error("shared array '" + a.name + "' has " + std::to_string(a.count) + " elements, outside [1, " +
              std::to_string(kMaxSharedElements) + "]");
    }
    const std::uint64_t bytes = shared_memory_bytes(kernel_);
    if (max_shared_bytes_ && bytes > *max_shared_bytes_)
      error("needs " + std::to_string(bytes) + " bytes of shared memory; the target allows " +
            std::to_string(*max_shared_bytes_));
  }

  std::string shared_label(int index) const {
    return "shared array " + std::to_string(index) + " '" + kernel_.shared[static_cast<std::size_t>(index)].name + "'";
  }

  void check_shared_index(int index) const {
    if (index < 0 || static_cast<std::size_t>(index) >= kernel_.shared.size())
      error("shared array index " + std::to_string(index) + " is invalid (the kernel has " +
            std::to_string(kernel_.shared.size()) + " shared arrays)");
  }

  void check_buffer_index(int index) const {
    if (index < 0 || static_cast<std::size_t>(index) >= kernel_.buffers.size())
      error("buffer index " + std::to_string(index) + " is invalid (the kernel has " +
            std::to_string(kernel_.buffers.size()) + " buffers)");
  }

  void declare_var(const std::string& name, ScalarType type, bool read_only) {
    if (!is_identifier(name)) error("variable name '" + name + "' is not an identifier");
    if (vars_.count(name)) error("variable '" + name + "' is already declared in an enclosing scope");
    vars_.emplace(name, VarInfo{type, read_only});
    scopes_.back().push_back(name);
  }

  void block(const std::vector<Stmt>& stmts, const std::string& label) {
    scopes_.emplace_back();
    for (std::size_t i = 0; i < stmts.size(); ++i) {
      path_.push_back(label + "[" + std::to_string(i) + "]");
      statement(stmts[i]);
      path_.pop_back();
    }
    for (const std::string& name : scopes_.back()) vars_.erase(name);
    scopes_.pop_back();
  }

  void statement(const Stmt& s) {
    switch (s.kind) {
      case StmtKind::declare: {
        if (is_storage_only(s.type))
          error("variable '" + s.var + "' is declared " + scalar_type_name(s.type) +
                ", a storage type (buffers only; its values are f32)");
        ScalarType t = expr(s.value, "declaration of '" + s.var + "'");
        if (t != s.type)
          error("variable '" + s.var + "' of type " + scalar_type_name(s.type) + " initialised with a " +
                scalar_type_name(t) + " value");
        declare_var(s.var, s.type, false);
        return;
      }
      case StmtKind::assign: {
        auto it = vars_.find(s.var);
        if (it == vars_.end()) error("assignment to undeclared variable '" + s.var + "'");
        if (it->second.read_only) error("assignment to loop variable '" + s.var + "', which is read-only");
        ScalarType t = expr(s.value, "assignment to '" + s.var + "'");
        if (t != it->second.type)
          error("assignment of a " + std::string(scalar_type_name(t)) + " value to variable '" + s.var + "' of type " +
                scalar_type_name(it->second.type));
        return;
      }
      case StmtKind::store: {
        check_buffer_index(s.buffer);
        const BufferParam& b = kernel_.buffers[static_cast<std::size_t>(s.buffer)];
        if (b.access == Access::read) error("store to " + buffer_label(s.buffer) + ", which is declared read-only");
        ScalarType it = expr(s.index, "store index");
        if (!is_index_type(it))
          error("store index into " + buffer_label(s.buffer) + " must be i32 or u32, got " + scalar_type_name(it));
        ScalarType vt = expr(s.value, "stored value");
        if (vt != value_type(b.type))
          error("store of a " + std::string(scalar_type_name(vt)) + " value into " + buffer_label(s.buffer) +
                " of type " + scalar_type_name(b.type));
        return;
      }
      case StmtKind::loop: {
        if (control_expr(s.begin, "loop begin") != ScalarType::i32) error("loop '" + s.var + "' begin must be i32");
        if (s.step < 1 || s.step > std::numeric_limits<std::int32_t>::max())
          error("loop '" + s.var + "' step must be in [1, 2^31), got " + std::to_string(s.step));
        // The loop variable is in scope for the bound (re-evaluated each
        // iteration, as in C) and the body; both live in one scope.
        scopes_.emplace_back();
        declare_var(s.var, ScalarType::i32, true);
        path_.push_back("for " + s.var);
        if (control_expr(s.end, "loop end") != ScalarType::i32) error("loop '" + s.var + "' end must be i32");
        const bool divergent = !divergence_.uniform(s.begin) || !divergence_.uniform(s.end);
        if (divergent) divergent_loops_.push_back(s.var);
        block(s.body, "body");
        if (divergent) divergent_loops_.pop_back();
        path_.pop_back();
        for (const std::string& name : scopes_.back()) vars_.erase(name);
        scopes_.pop_back();
        return;
      }
      case StmtKind::load_vector: {
        check_buffer_index(s.buffer);
        const BufferParam& b = kernel_.buffers[static_cast<std::size_t>(s.buffer)];
        if (b.access == Access::write)
          error("vector load from " + buffer_label(s.buffer) + ", which is declared write-only (use read_write)");
        if (s.type != value_type(b.type))
          error("vector load of type " + std::string(scalar_type_name(s.type)) + " from " + buffer_label(s.buffer) +
                " of type " + scalar_type_name(b.type));
        if (b.type == ScalarType::boolean || b.type == ScalarType::i64)
          error("vector load from " + buffer_label(s.buffer) + " of type " + scalar_type_name(b.type) +
                " (vectors are f32, i32 or u32)");
        if (!is_vector_width(s.vars.size()))
          error("vector load from " + buffer_label(s.buffer) + " declares " + std::to_string(s.vars.size()) +
                " variables; the width must be 2 or 4");
        if (b.texel_width != 0 && s.vars.size() != b.texel_width)
          error("vector load of width " + std::to_string(s.vars.size()) + " from texel " + buffer_label(s.buffer) +
                " of texel width " + std::to_string(b.texel_width) + " (a texel buffer's vector loads read one texel)");
        ScalarType it = expr(s.index, "vector load index");
        if (!is_index_type(it))
          error("vector load index into " + buffer_label(s.buffer) + " must be i32 or u32, got " +
                scalar_type_name(it));
        for (const std::string& name : s.vars) declare_var(name, s.type, false);
        return;
      }
      case StmtKind::store_vector: {
        check_buffer_index(s.buffer);
        const BufferParam& b = kernel_.buffers[static_cast<std::size_t>(s.buffer)];
        if (b.access == Access::read)
          error("vector store to " + buffer_label(s.buffer) + ", which is declared read-only");
        if (b.type == ScalarType::boolean || b.type == ScalarType::i64)
          error("vector store to " + buffer_label(s.buffer) + " of type " + scalar_type_name(b.type) +
                " (vectors are f32, i32 or u32)");
        if (!is_vector_width(s.values.size()))
          error("vector store to " + buffer_label(s.buffer) + " writes " + std::to_string(s.values.size()) +
                " values; the width must be 2 or 4");
        ScalarType it = expr(s.index, "vector store index");
        if (!is_index_type(it))
          error("vector store index into " + buffer_label(s.buffer) + " must be i32 or u32, got " +
                scalar_type_name(it));
        for (const Expr& value : s.values) {
          ScalarType vt = expr(value, "vector stored value");
          if (vt != value_type(b.type))
            error("vector store of a " + std::string(scalar_type_name(vt)) + " value into " + buffer_label(s.buffer) +
                  " of type " + scalar_type_name(b.type));
        }
        return;
      }
      case StmtKind::branch: {
        if (control_expr(s.value, "branch condition") != ScalarType::boolean) error("branch condition must be bool");
        path_.push_back("if");
        ++branch_depth_;
        const bool divergent = !divergence_.uniform(s.value);
        divergent_branches_ += divergent ? 1 : 0;
        block(s.body, "then");
        block(s.else_body, "else");
        divergent_branches_ -= divergent ? 1 : 0;
        --branch_depth_;
        path_.pop_back();
        return;
      }
      case StmtKind::shared_store: {
        check_shared_index(s.buffer);
        const SharedArray& a = kernel_.shared[static_cast<std::size_t>(s.buffer)];
        ScalarType it = expr(s.index, "shared store index");
        if (!is_index_type(it))
          error("store index into " + shared_label(s.buffer) + " must be i32 or u32, got " + scalar_type_name(it));
        ScalarType vt = expr(s.value, "value stored to shared memory");
        if (vt != a.type)
          error("store of a " + std::string(scalar_type_name(vt)) + " value into " + shared_label(s.buffer) +
                " of type " + scalar_type_name(a.type));
        return;
      }
      case StmtKind::fragment_fill: {
        check_collective_place("fragment fill");
        require_role(fragment(s.var, "fragment fill"), FragmentRole::accumulator, "fragment fill");
        if (expr(s.value, "fragment fill value") != ScalarType::f32) error("fragment fill value must be f32");
        return;
      }
      case StmtKind::fragment_load: {
        check_collective_place("fragment load");
        tile_access(s, fragment(s.var, "fragment load"), false);
        return;
      }
      case StmtKind::fragment_store: {
        check_collective_place("fragment store");
        const Fragment& f = fragment(s.var, "fragment store");
        require_role(f, FragmentRole::accumulator, "fragment store");
        tile_access(s, f, true);
        return;
      }
      case StmtKind::fragment_mma: {
        check_collective_place("fragment multiply-add");
        if (s.vars.size() != 3) error("fragment multiply-add of '" + s.var + "' without its a, b and c");
        const Fragment& d = fragment(s.var, "fragment multiply-add");
        const Fragment& a = fragment(s.vars[0], "fragment multiply-add");
        const Fragment& b = fragment(s.vars[1], "fragment multiply-add");
        const Fragment& c = fragment(s.vars[2], "fragment multiply-add");
        require_role(d, FragmentRole::accumulator, "fragment multiply-add (d)");
        require_role(a, FragmentRole::a, "fragment multiply-add (a)");
        require_role(b, FragmentRole::b, "fragment multiply-add (b)");
        require_role(c, FragmentRole::accumulator, "fragment multiply-add (c)");
        for (const Fragment* f : {&a, &b, &c})
          if (!(f->shape == d.shape))
            error("fragment multiply-add of '" + d.name + "': fragment '" + f->name + "' has another shape");
        if (a.precision != b.precision)
          error("fragment multiply-add of '" + d.name + "': a is " + matrix_precision_name(a.precision) + ", b " +
                matrix_precision_name(b.precision));
        return;
      }
      case StmtKind::barrier:
        if (branch_depth_ > 0)
          error("barrier inside a branch: every invocation of a workgroup must reach it (uniform control flow)");
        if (!divergent_loops_.empty())
          error("barrier inside loop '" + divergent_loops_.back() +
                "', whose bounds may differ between invocations (they use global_index, local_index, a loaded "
                "value or a variable computed from one)");
        return;
    }
    error("unknown statement kind " + std::to_string(static_cast<int>(s.kind)));
  }

  // A loop bound or branch condition: no broadcast may appear in it.
  ScalarType control_expr(const Expr& e, const std::string& where) {
    ++control_;
    const ScalarType t = expr(e, where);
    --control_;
    return t;
  }

  // Every lane of the subgroup must evaluate a broadcast together.
  void check_broadcast_place(const ExprNode& n, const std::string& where) const {
    const std::uint32_t size = kernel_.subgroup_size;
    if (size != 0 && n.ivalue >= static_cast<std::int64_t>(size))
      error("subgroup_broadcast from lane " + std::to_string(n.ivalue) + " of a subgroup of " + std::to_string(size) +
            " (in " + where + ")");
    if (n.ivalue < 0) error("subgroup_broadcast from lane " + std::to_string(n.ivalue) + " (in " + where + ")");
    if (control_ > 0)
      error("subgroup_broadcast in " + where + ": broadcasts may not appear in loop bounds or branch conditions");
    if (conditional_ > 0)
      error("subgroup_broadcast under a select or the right side of && / || (in " + where +
            "): every lane of the subgroup must evaluate it (uniform control flow)");
    if (divergent_branches_ > 0)
      error("subgroup_broadcast inside a branch whose condition may differ between invocations (in " + where +
            "): every lane of the subgroup must reach it (uniform control flow)");
    if (!divergent_loops_.empty())
      error("subgroup_broadcast inside loop '" + divergent_loops_.back() +
            "', whose bounds may differ between invocations (uniform control flow)");
  }

  // Checks an expression tree and returns its type.
  ScalarType expr(const Expr& e, const std::string& where) {
    if (!e) error("missing expression in " + where);
    const ExprNode& n = *e;
    auto arity = [&](std::size_t count) {
      if (n.args.size() != count)
        error(std::string("expression of kind ") + std::to_string(static_cast<int>(n.kind)) + " has " +
              std::to_string(n.args.size()) + " operands, expected " + std::to_string(count) + " (in " + where + ")");
    };
    // f16 values come only from f16 arithmetic (see ir.h); bf16 ones never.
    const bool f16_arithmetic = n.kind == ExprKind::unary || n.kind == ExprKind::binary ||
                                n.kind == ExprKind::select || n.kind == ExprKind::cast;
    if (n.type == ScalarType::bf16 || (n.type == ScalarType::f16 && !f16_arithmetic))
      error(std::string("an expression of type ") + scalar_type_name(n.type) + " in " + where +
            " (a storage type: buffers only; loads of it are f32" +
            (n.type == ScalarType::f16 ? ", and f16 values are made by casts from f32)" : ")"));
    switch (n.kind) {
      case ExprKind::constant:
        if (n.type == ScalarType::i32 && (n.ivalue < std::numeric_limits<std::int32_t>::min() ||
                                          n.ivalue > std::numeric_limits<std::int32_t>::max()))
          error("i32 constant " + std::to_string(n.ivalue) + " is out of range");
        if (n.type == ScalarType::u32 && (n.ivalue < 0 || n.ivalue > std::numeric_limits<std::uint32_t>::max()))
          error("u32 constant " + std::to_string(n.ivalue) + " is out of range");
        if (n.type == ScalarType::boolean && n.ivalue != 0 && n.ivalue != 1)
          error("bool constant with value " + std::to_string(n.ivalue));
        return n.type;
      case ExprKind::var: {
        auto it = vars_.find(n.name);
        if (it == vars_.end()) error("variable '" + n.name + "' is used before its declaration or outside its scope");
        if (it->second.type != n.type)
          error("variable '" + n.name + "' is used as " + scalar_type_name(n.type) + " but declared " +
                scalar_type_name(it->second.type));
        return n.type;
      }
      case ExprKind::global_index:
        if (n.type != ScalarType::i32) error("global_index must be i32");
        return n.type;
      case ExprKind::local_index:
      case ExprKind::workgroup_index:
        if (n.type != ScalarType::i32) error("local_index and workgroup_index must be i32");
        return n.type;
      case ExprKind::subgroup_lane:
      case ExprKind::subgroup_id:
        if (n.type != ScalarType::i32) error("subgroup_lane and subgroup_id must be i32");
        return n.type;
      case ExprKind::subgroup_broadcast: {
        arity(1);
        check_broadcast_place(n, where);
        const ScalarType t = expr(n.args[0], where);
        if (t == ScalarType::boolean || t == ScalarType::i64 || t != n.type)
          error(std::string("subgroup_broadcast of type ") + scalar_type_name(n.type) + " has an operand of type " +
                scalar_type_name(t) + " (f32, i32 or u32, the same)");
        return n.type;
      }
      case ExprKind::shared_load: {
        arity(1);
        check_shared_index(n.buffer);
        const SharedArray& a = kernel_.shared[static_cast<std::size_t>(n.buffer)];
        if (n.type != a.type)
          error("load of type " + std::string(scalar_type_name(n.type)) + " from " + shared_label(n.buffer) +
                " of type " + scalar_type_name(a.type));
        ScalarType it = expr(n.args[0], where);
        if (!is_index_type(it))
          error("load index into " + shared_label(n.buffer) + " must be i32 or u32, got " + scalar_type_name(it));
        return n.type;
      }
      case ExprKind::param:
        if (n.type != ScalarType::i32) error("param(" + std::to_string(n.param) + ") must be i32");
        check_param_index(n.param, where);
        return n.type;
      case ExprKind::load: {
        arity(1);
        check_buffer_index(n.buffer);
        const BufferParam& b = kernel_.buffers[static_cast<std::size_t>(n.buffer)];
        if (b.access == Access::write)
          error("load from " + buffer_label(n.buffer) + ", which is declared write-only (use read_write)");
        if (n.type != value_type(b.type))
          error("load of type " + std::string(scalar_type_name(n.type)) + " from " + buffer_label(n.buffer) +
                " of type " + scalar_type_name(b.type));
        ScalarType it = expr(n.args[0], where);
        if (!is_index_type(it))
          error("load index into " + buffer_label(n.buffer) + " must be i32 or u32, got " + scalar_type_name(it));
        return n.type;
      }
      case ExprKind::unary: {
        arity(1);
        ScalarType a = expr(n.args[0], where);
        std::optional<ScalarType> t = unary_result_type(n.unary, a);
        if (!t) error(unary_type_error(n.unary, a));
        if (*t != n.type)
          error(std::string("unary '") + unary_op_name(n.unary) + "' is typed " + scalar_type_name(n.type) +
                ", expected " + scalar_type_name(*t));
        return n.type;
      }
      case ExprKind::binary: {
        arity(2);
        ScalarType a = expr(n.args[0], where);
        // && and || evaluate their right operand only for some invocations.
        const bool short_circuit = n.binary == BinaryOp::logical_and || n.binary == BinaryOp::logical_or;
        conditional_ += short_circuit ? 1 : 0;
        ScalarType b = expr(n.args[1], where);
        conditional_ -= short_circuit ? 1 : 0;
        std::optional<ScalarType> t = binary_result_type(n.binary, a, b);
        if (!t) error(binary_type_error(n.binary, a, b));
        if (*t != n.type)
          error(std::string("binary '") + binary_op_name(n.binary) + "' is typed " + scalar_type_name(n.type) +
                ", expected " + scalar_type_name(*t));
        return n.type;
      }
      case ExprKind::select: {
        arity(3);
        if (expr(n.args[0], where) != ScalarType::boolean) error("select condition must be bool");
        ++conditional_;
        ScalarType a = expr(n.args[1], where);
        ScalarType b = expr(n.args[2], where);
        --conditional_;
        if (a != b || a != n.type)
          error(std::string("select of type ") + scalar_type_name(n.type) + " has operands of type " +
                scalar_type_name(a) + " and " + scalar_type_name(b));
        return n.type;
      }
      case ExprKind::cast: {
        arity(1);
        const ScalarType from = expr(n.args[0], where);
        if (std::optional<std::string> why = cast_type_error(n.type, from)) error(*why + " in " + where);
        return n.type;
      }
    }
    error("unknown expression kind " + std::to_string(static_cast<int>(n.kind)) + " in " + where);
  }

  const Kernel& kernel_;
  std::optional<std::uint64_t> max_shared_bytes_;
  Divergence divergence_;
  int branch_depth_ = 0;
  int divergent_branches_ = 0;  // enclosing branches with a divergent condition
  int conditional_ = 0;         // inside operands evaluated only for some invocations
  int control_ = 0;             // inside a loop bound or branch condition
  std::vector<std::string> divergent_loops_;  // enclosing loops with divergent bounds
  std::unordered_map<std::string, VarInfo> vars_;
  std::vector<std::vector<std::string>> scopes_;
  std::vector<std::string> path_;
};

}  // namespace

void verify(const Kernel& kernel) { Verifier(kernel, std::nullopt).run(); }
void verify(const Kernel& kernel, std::uint64_t max_shared_memory_bytes) {
  Verifier(kernel, max_shared_memory_bytes).run();
}

}  // namespace kiln::kir
