// Grouping by structure and turning differing literals into parameters.
//
// One traversal order (statements: value, index, begin, end, body,
// else_body; expressions: pre-order over operands) numbers the literal
// positions of a kernel; the structure key is print() of the kernel with every
// literal replaced by a placeholder, so two kernels share a key exactly when
// they differ in nothing but literal values and the global size.
#include "src/kernel/parameterise.h"

#include "src/base/check.h"

#include <kiln/error.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

namespace kiln::kir {
namespace {

bool is_integer_literal(const ExprNode& n) {
  return n.kind == ExprKind::constant && (n.type == ScalarType::i32 || n.type == ScalarType::u32);
}

// Float constants as a kernel's source has them: NaN is one constant (NaN != NaN).
bool same_float(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

bool has_loop(const std::vector<Stmt>& stmts) {
  for (const Stmt& s : stmts)
    if (s.kind == StmtKind::loop || has_loop(s.body) || has_loop(s.else_body)) return true;
  return false;
}

// Rebuilds a kernel body with each integer literal replaced by
// on_literal(literal, pinned), in traversal order; subtrees without literals
// are shared, not copied. A pinned literal is a divisor (of div or mod) that
// runs per element: inside a loop, or anywhere in a kernel without loops.
// Division by a constant compiles to a multiply and shifts, by a runtime
// value to a real division, so pinned literals stay constants; a divisor
// evaluated once per invocation of a kernel with loops (a GEMM's block
// coordinates) costs nothing measurable next to its loops. Loop bounds are
// pinned too unless the options say otherwise.
// `unpinned`, when given, holds per literal position (all integer literals,
// pinned or not, in traversal order) whether the position must not be pinned:
// it varies with a dynamic extent (parameterise_with_probes).
template <class OnLiteral>
class LiteralMapper {
 public:
  LiteralMapper(const std::vector<Stmt>& body, bool pin_loop_bounds, OnLiteral& on_literal,
                const std::vector<bool>* unpinned)
      : on_literal_(on_literal), unpinned_(unpinned), pin_loop_bounds_(pin_loop_bounds),
        kernel_has_loop_(has_loop(body)) {}

  std::vector<Stmt> block(const std::vector<Stmt>& stmts, bool in_loop) {
    std::vector<Stmt> out;
    out.reserve(stmts.size());
    for (const Stmt& s : stmts) {
      Stmt m = s;
      m.value = expr(s.value, in_loop, false);
      m.index = expr(s.index, in_loop, false);
      for (Expr& value : m.values) value = expr(value, in_loop, false);
      m.begin = expr(s.begin, true, pin_bound(s.begin));
      m.end = expr(s.end, true, pin_bound(s.end));
      m.body = block(s.body, in_loop || s.kind == StmtKind::loop);
      m.else_body = block(s.else_body, in_loop);
      out.push_back(std::move(m));
    }
    return out;
  }

 private:
  Expr expr(const Expr& e, bool in_loop, bool pinned) {
    if (!e) return e;
    if (is_integer_literal(*e)) {
      const std::size_t position = position_++;
      const bool varies = unpinned_ && position < unpinned_->size() && (*unpinned_)[position];
      return on_literal_(e, pinned && (in_loop || !kernel_has_loop_) && !varies);
    }
    if (e->args.empty()) return e;
    ExprNode copy = *e;
    bool changed = false;
    for (std::size_t i = 0; i < copy.args.size(); ++i) {
      const bool is_divisor = pinned || (copy.kind == ExprKind::binary && i == 1 &&
                                          (copy.binary == BinaryOp::div || copy.binary == BinaryOp::mod));
      Expr mapped = expr(copy.args[i], in_loop, is_divisor);
      changed = changed || mapped.operator->() != copy.args[i].operator->();
      copy.args[i] = std::move(mapped);
    }
    return changed ? Expr(std::make_shared<const ExprNode>(std::move(copy))) : e;
  }

  OnLiteral& on_literal_;
  const std::vector<bool>* unpinned_;
  std::size_t position_ = 0;
  // Loop bounds are structure unless asked otherwise; a short constant trip
  // (a 3x3 or 7x7 window, a small K) stays structure either way: it is what
  // a driver unrolls, and a kernel family rarely differs there.
  bool pin_bound(const Expr& bound) const {
    return pin_loop_bounds_ || (bound && is_integer_literal(*bound) && bound->ivalue < kShortLoopBound);
  }

  bool pin_loop_bounds_;
  bool kernel_has_loop_;
};

template <class OnLiteral>
std::vector<Stmt> map_literals(const std::vector<Stmt>& body, bool pin_loop_bounds, OnLiteral& on_literal,
                               const std::vector<bool>* unpinned = nullptr) {
  return LiteralMapper<OnLiteral>(body, pin_loop_bounds, on_literal, unpinned).block(body, false);
}

// A literal's value as the i32 bits a parameter carries (u32 keeps its bits).
std::int32_t literal_bits(const ExprNode& n) { return static_cast<std::int32_t>(static_cast<std::uint32_t>(n.ivalue)); }

// `kernel` without its body and global size: what, with a body whose
// literals are placeholders, prints as its structure key.
Kernel skeleton(const Kernel& kernel) {
  Kernel shape(kernel.name);
  shape.buffers = kernel.buffers;
  shape.shared = kernel.shared;  // array sizes are structure, never parameters
  shape.workgroup_size = kernel.workgroup_size;
  shape.subgroup_size = kernel.subgroup_size;
  shape.fragments = kernel.fragments;
  shape.global_size = 1;
  return shape;
}

struct Analysed {
  Kernel* kernel = nullptr;
  std::size_t index = 0;  // in the kernels given to parameterise()
  std::string key;
  std::vector<std::int32_t> literals;  // in traversal order
  std::vector<bool> unpinned;          // positions that vary with a dynamic extent (may be empty)
};

Analysed analyse(Kernel& kernel, bool pin_loop_bounds, std::vector<bool> unpinned = {}) {
  Analysed a;
  a.kernel = &kernel;
  a.unpinned = std::move(unpinned);
  // Literal types in order (i32 and u32 placeholders must not match), and
  // the values of pinned literals, which are structure.
  std::string types;
  auto placeholder = [&](const Expr& literal, bool pinned) {
    if (pinned) {
      types += "=" + std::to_string(literal->ivalue) + ";";
      return literal;
    }
    a.literals.push_back(literal_bits(*literal));
    types += literal->type == ScalarType::i32 ? 'i' : 'u';
    return param(0);
  };
  Kernel shape = skeleton(kernel);
  shape.body = map_literals(kernel.body, pin_loop_bounds, placeholder, &a.unpinned);
  a.key = print(shape) + types;
  return a;
}

// Gives the members of one group their parameters; returns the count, or -1
// when the group would need more than `max_params`.
int parameterise_group(const std::vector<Analysed*>& members, const ParameteriseOptions& options) {
  const std::size_t positions = members[0]->literals.size();
  // Slot of each literal position (-1: stays a literal), parameters sharing
  // one column of values across members.
  std::vector<int> slot(positions, -1);
  std::map<std::vector<std::int32_t>, int> slot_of_column;
  std::vector<std::vector<std::int32_t>> columns;
  auto slot_for = [&](std::vector<std::int32_t> column) {
    auto [it, inserted] = slot_of_column.try_emplace(column, static_cast<int>(columns.size()));
    if (inserted) columns.push_back(std::move(column));
    return it->second;
  };
  std::vector<std::int32_t> column(members.size());
  for (std::size_t p = 0; p < positions; ++p) {
    bool differs = false;
    for (std::size_t m = 0; m < members.size(); ++m) {
      column[m] = members[m]->literals[p];
      differs = differs || column[m] != column[0];
    }
    if (differs) slot[p] = slot_for(column);
  }
  std::optional<int> global_slot;
  bool sizes_differ = false;
  for (std::size_t m = 0; m < members.size(); ++m) {
    column[m] = static_cast<std::int32_t>(members[m]->kernel->global_size);  // verify() keeps it below 2^31
    sizes_differ = sizes_differ || column[m] != column[0];
  }
  if (sizes_differ) global_slot = slot_for(column);
  if (columns.empty()) return 0;  // identical kernels already share a source
  if (columns.size() > options.max_params) return -1;

  for (std::size_t m = 0; m < members.size(); ++m) {
    Kernel& kernel = *members[m]->kernel;
    std::size_t position = 0;
    auto replace = [&](const Expr& literal, bool pinned) -> Expr {
      if (pinned) return literal;
      const int s = slot[position++];
      if (s < 0) return literal;
      return literal->type == ScalarType::i32 ? param(s) : cast(ScalarType::u32, param(s));
    };
    kernel.body = map_literals(kernel.body, !options.loop_bounds, replace, &members[m]->unpinned);
    KILN_ASSERT(position == positions);
    kernel.params.resize(columns.size());
    for (std::size_t s = 0; s < columns.size(); ++s) kernel.params[s] = columns[s][m];
    kernel.global_size_param = global_slot;
  }
  return static_cast<int>(columns.size());
}

// Every integer literal of `kernel` in traversal order, none pinned.
std::vector<std::int32_t> all_literals(const Kernel& kernel, std::string* key) {
  std::vector<std::int32_t> values;
  auto collect = [&](const Expr& literal, bool) {
    values.push_back(literal_bits(*literal));
    return param(0);
  };
  Kernel shape = skeleton(kernel);
  shape.body = map_literals(kernel.body, false, collect);
  if (key) *key = print(shape);
  return values;
}

// Groups `analysed` by structure and parameterises each group. Indices at or
// past `real_kernels` are probes: they shape parameters but are not counted.
ParameteriseReport group_and_parameterise(std::vector<Analysed>& analysed, std::size_t kernel_count,
                                          std::size_t real_kernels, const ParameteriseOptions& options) {
  ParameteriseReport report;
  report.same_source_as.resize(kernel_count);
  for (std::size_t i = 0; i < kernel_count; ++i) report.same_source_as[i] = i;
  // Groups in order of first appearance, so results do not depend on hashing.
  std::unordered_map<std::string_view, std::size_t> group_of_key;
  std::vector<std::vector<Analysed*>> groups;
  for (Analysed& a : analysed) {
    auto [it, inserted] = group_of_key.try_emplace(a.key, groups.size());
    if (inserted) groups.emplace_back();
    groups[it->second].push_back(&a);
  }

  for (const std::vector<Analysed*>& members : groups) {
    if (members.size() < 2) continue;
    const int params = parameterise_group(members, options);
    if (params < 0) {
      ++report.groups_over_limit;
      continue;
    }
    // Parameterised alike, or identical already (no parameters): one source.
    for (const Analysed* m : members) report.same_source_as[m->index] = members[0]->index;
    if (params == 0) continue;
    ++report.groups;
    report.kernels += static_cast<int>(
        std::ranges::count_if(members, [&](const Analysed* m) { return m->index < real_kernels; }));
    report.max_params_used = std::max(report.max_params_used, params);
  }
  return report;
}

// Walks a parameterised kernel and a literal one side by side: equal in
// everything, except that where the first has a parameter (param(s), or
// cast(u32, param(s)) where a u32 literal was replaced) the second has an
// integer literal of that type, which gives the parameter its value.
class ParameterMatcher {
 public:
  explicit ParameterMatcher(std::size_t params) : values(params) {}
  std::vector<std::optional<std::int32_t>> values;

  bool assign(int slot, std::int32_t value) {
    if (slot < 0 || static_cast<std::size_t>(slot) >= values.size()) return false;
    std::optional<std::int32_t>& v = values[static_cast<std::size_t>(slot)];
    if (v && *v != value) return false;
    v = value;
    return true;
  }

  bool stmts(const std::vector<Stmt>& p, const std::vector<Stmt>& l) {
    if (p.size() != l.size()) return false;
    for (std::size_t i = 0; i < p.size(); ++i) {
      const Stmt& a = p[i];
      const Stmt& b = l[i];
      if (a.kind != b.kind || a.var != b.var || a.vars != b.vars || a.type != b.type || a.buffer != b.buffer ||
          a.step != b.step || a.values.size() != b.values.size() || a.shared_memory != b.shared_memory ||
          a.column_major != b.column_major)
        return false;
      for (std::size_t v = 0; v < a.values.size(); ++v)
        if (!expr(a.values[v], b.values[v])) return false;
      if (!expr(a.value, b.value) || !expr(a.index, b.index) || !expr(a.begin, b.begin) || !expr(a.end, b.end) ||
          !stmts(a.body, b.body) || !stmts(a.else_body, b.else_body))
        return false;
    }
    return true;
  }

 private:
  bool expr(const Expr& p, const Expr& l) {
    if (!p || !l) return !p && !l;
    const ExprNode& a = *p;
    const ExprNode& b = *l;
    if (a.kind == ExprKind::param)
      return is_integer_literal(b) && b.type == ScalarType::i32 && assign(a.param, literal_bits(b));
    if (a.kind == ExprKind::cast && a.type == ScalarType::u32 && a.args.size() == 1 && a.args[0]->kind == ExprKind::param)
      return is_integer_literal(b) && b.type == ScalarType::u32 && assign(a.args[0]->param, literal_bits(b));
    if (a.kind != b.kind || a.type != b.type || !same_float(a.fvalue, b.fvalue) || a.ivalue != b.ivalue || a.name != b.name ||
        a.buffer != b.buffer || a.param != b.param || a.unary != b.unary || a.binary != b.binary ||
        a.args.size() != b.args.size())
      return false;
    for (std::size_t i = 0; i < a.args.size(); ++i)
      if (!expr(a.args[i], b.args[i])) return false;
    return true;
  }
};

// Walks a kernel of a shape set and the same kernel lowered at other
// extents side by side (generalise_parameters()), building the set kernel
// with every literal that differs made a parameter.
class ParameterGeneraliser {
 public:
  explicit ParameterGeneraliser(std::size_t params) : values(params), set_params_(params) {}
  std::vector<std::optional<std::int32_t>> values;  // the literal kernel's value of each parameter
  bool ok = true;

  // The slot for a use of the set kernel's parameter `slot` that takes
  // `value` here: `slot` itself, or, where another use gave it another value
  // (positions that agreed at the set's extents but not at these), a new one.
  int slot_for_use(int slot, std::int32_t value) {
    if (slot < 0 || static_cast<std::size_t>(slot) >= set_params_) {
      ok = false;
      return slot;
    }
    std::optional<std::int32_t>& v = values[static_cast<std::size_t>(slot)];
    if (!v || *v == value) {
      v = value;
      return slot;
    }
    auto [it, inserted] = split_slot_.try_emplace({slot, value}, static_cast<int>(values.size()));
    if (inserted) values.emplace_back(value);
    return it->second;
  }

  // A slot for a literal that is `set_value` in the set kernel and `value` here.
  int new_slot(std::int32_t set_value, std::int32_t value) {
    auto [it, inserted] = slot_of_pair_.try_emplace({set_value, value}, static_cast<int>(values.size()));
    if (inserted) values.emplace_back(value);
    return it->second;
  }

  std::vector<Stmt> stmts(const std::vector<Stmt>& s, const std::vector<Stmt>& l) {
    std::vector<Stmt> out;
    if (s.size() != l.size()) {
      ok = false;
      return out;
    }
    out.reserve(s.size());
    for (std::size_t i = 0; i < s.size() && ok; ++i) {
      const Stmt& a = s[i];
      const Stmt& b = l[i];
      if (a.kind != b.kind || a.var != b.var || a.vars != b.vars || a.type != b.type || a.buffer != b.buffer ||
          a.step != b.step || a.values.size() != b.values.size() || a.shared_memory != b.shared_memory ||
          a.column_major != b.column_major) {
        ok = false;
        break;
      }
      Stmt& c = out.emplace_back(a);
      for (std::size_t v = 0; v < a.values.size(); ++v) c.values[v] = expr(a.values[v], b.values[v]);
      c.value = expr(a.value, b.value);
      c.index = expr(a.index, b.index);
      c.begin = expr(a.begin, b.begin);
      c.end = expr(a.end, b.end);
      c.body = stmts(a.body, b.body);
      c.else_body = stmts(a.else_body, b.else_body);
    }
    return out;
  }

  Expr expr(const Expr& s, const Expr& l) {
    if (!s || !l) {
      ok = ok && !s && !l;
      return s;
    }
    if (!ok) return s;
    const ExprNode& a = *s;
    const ExprNode& b = *l;
    if (a.kind == ExprKind::param) {
      if (!is_integer_literal(b) || b.type != ScalarType::i32) {
        ok = false;
        return s;
      }
      const int slot = slot_for_use(a.param, literal_bits(b));
      return slot == a.param ? s : param(slot);
    }
    if (a.kind == ExprKind::cast && a.type == ScalarType::u32 && a.args.size() == 1 && a.args[0]->kind == ExprKind::param) {
      if (!is_integer_literal(b) || b.type != ScalarType::u32) {
        ok = false;
        return s;
      }
      const int slot = slot_for_use(a.args[0]->param, literal_bits(b));
      return slot == a.args[0]->param ? s : cast(ScalarType::u32, param(slot));
    }
    if (is_integer_literal(a) && is_integer_literal(b) && a.type == b.type && a.ivalue != b.ivalue) {
      const int slot = new_slot(literal_bits(a), literal_bits(b));
      return a.type == ScalarType::i32 ? param(slot) : cast(ScalarType::u32, param(slot));
    }
    if (a.kind != b.kind || a.type != b.type || !same_float(a.fvalue, b.fvalue) || a.ivalue != b.ivalue || a.name != b.name ||
        a.buffer != b.buffer || a.param != b.param || a.unary != b.unary || a.binary != b.binary ||
        a.args.size() != b.args.size()) {
      ok = false;
      return s;
    }
    if (a.args.empty()) return s;
    auto node = std::make_shared<ExprNode>(a);
    bool changed = false;
    for (std::size_t i = 0; i < a.args.size(); ++i) {
      node->args[i] = expr(a.args[i], b.args[i]);
      changed = changed || node->args[i].operator->() != a.args[i].operator->();
    }
    return changed ? Expr(std::move(node)) : s;
  }

 private:
  std::size_t set_params_;
  std::map<std::pair<std::int32_t, std::int32_t>, int> slot_of_pair_;
  std::map<std::pair<int, std::int32_t>, int> split_slot_;
};

bool same_buffers(const std::vector<BufferParam>& a, const std::vector<BufferParam>& b) {
  return std::ranges::equal(a, b, [](const BufferParam& x, const BufferParam& y) {
    return x.name == y.name && x.type == y.type && x.access == y.access && x.texel_width == y.texel_width;
  });
}

bool same_shared(const std::vector<SharedArray>& a, const std::vector<SharedArray>& b) {
  return std::ranges::equal(a, b, [](const SharedArray& x, const SharedArray& y) {
    return x.name == y.name && x.type == y.type && x.count == y.count;
  });
}

// Whether `literal` (a kernel without parameters) has the name, sizes,
// buffers and shared arrays of `kernel`: what match_parameters() and
// generalise_parameters() require before walking the bodies.
bool same_interface(const Kernel& kernel, const Kernel& literal) {
  return literal.params.empty() && !literal.global_size_param && kernel.name == literal.name &&
         kernel.workgroup_size == literal.workgroup_size && kernel.subgroup_size == literal.subgroup_size &&
         same_buffers(kernel.buffers, literal.buffers) && same_shared(kernel.shared, literal.shared) &&
         kernel.fragments == literal.fragments;
}

}  // namespace

std::optional<std::vector<std::int32_t>> match_parameters(const Kernel& parameterised, const Kernel& literal) {
  if (!same_interface(parameterised, literal)) return std::nullopt;
  ParameterMatcher matcher(parameterised.params.size());
  if (!matcher.stmts(parameterised.body, literal.body)) return std::nullopt;
  if (parameterised.global_size_param) {
    if (!matcher.assign(*parameterised.global_size_param, static_cast<std::int32_t>(literal.global_size)))
      return std::nullopt;
  } else if (parameterised.global_size != literal.global_size) {
    return std::nullopt;
  }
  std::vector<std::int32_t> out;
  out.reserve(matcher.values.size());
  for (const std::optional<std::int32_t>& v : matcher.values) {
    if (!v) return std::nullopt;
    out.push_back(*v);
  }
  return out;
}

std::optional<Kernel> generalise_parameters(const Kernel& set_kernel, const Kernel& literal, std::size_t max_params) {
  if (!same_interface(set_kernel, literal)) return std::nullopt;
  ParameterGeneraliser generaliser(set_kernel.params.size());
  Kernel out = set_kernel;
  out.body = generaliser.stmts(set_kernel.body, literal.body);
  if (!generaliser.ok) return std::nullopt;
  if (set_kernel.global_size_param) {
    out.global_size_param =
        generaliser.slot_for_use(*set_kernel.global_size_param, static_cast<std::int32_t>(literal.global_size));
    if (!generaliser.ok) return std::nullopt;
  } else if (set_kernel.global_size != literal.global_size) {
    out.global_size_param = generaliser.new_slot(static_cast<std::int32_t>(set_kernel.global_size),
                                                 static_cast<std::int32_t>(literal.global_size));
  }
  if (generaliser.values.size() > max_params) return std::nullopt;
  out.params.clear();
  for (const std::optional<std::int32_t>& v : generaliser.values) {
    if (!v) return std::nullopt;  // a parameter `literal` gives no value
    out.params.push_back(*v);
  }
  out.global_size = literal.global_size;
  out.tuning_site = literal.tuning_site;
  return out;
}

ParameteriseReport parameterise(std::span<Kernel* const> kernels, const ParameteriseOptions& options) {
  std::vector<Analysed> analysed;
  analysed.reserve(kernels.size());
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    Kernel* kernel = kernels[i];
    KILN_ASSERT(kernel != nullptr);
    if (!kernel->params.empty() || kernel->global_size_param) continue;
    analysed.push_back(analyse(*kernel, !options.loop_bounds));
    analysed.back().index = i;
  }
  return group_and_parameterise(analysed, kernels.size(), kernels.size(), options);
}

ParameteriseReport parameterise_with_probes(std::span<Kernel* const> kernels, std::span<Kernel* const> probes,
                                            const ParameteriseOptions& options, int* varying) {
  // Twins: the k-th kernel of a name among `kernels` and the k-th of that
  // name among `probes`, when they differ in literal values only.
  std::map<std::string, std::vector<Kernel*>> probes_by_name;
  for (Kernel* probe : probes)
    if (probe->params.empty() && !probe->global_size_param) probes_by_name[probe->name].push_back(probe);
  std::map<std::string, std::size_t> seen;
  std::vector<Analysed> analysed;
  analysed.reserve(kernels.size() * 2);
  std::vector<std::pair<Kernel*, std::vector<bool>>> twins;
  if (varying) *varying = 0;
  for (std::size_t i = 0; i < kernels.size(); ++i) {
    Kernel* kernel = kernels[i];
    KILN_ASSERT(kernel != nullptr);
    if (!kernel->params.empty() || kernel->global_size_param) continue;
    std::vector<bool> unpinned;
    const std::size_t occurrence = seen[kernel->name]++;
    const auto twin_list = probes_by_name.find(kernel->name);
    if (twin_list != probes_by_name.end() && occurrence < twin_list->second.size()) {
      Kernel* twin = twin_list->second[occurrence];
      std::string key, twin_key;
      const std::vector<std::int32_t> values = all_literals(*kernel, &key);
      const std::vector<std::int32_t> twin_values = all_literals(*twin, &twin_key);
      if (key == twin_key) {
        unpinned.resize(values.size());
        for (std::size_t p = 0; p < values.size(); ++p) unpinned[p] = values[p] != twin_values[p];
        if (varying && std::ranges::find(unpinned, true) != unpinned.end()) ++*varying;
        twins.emplace_back(twin, unpinned);
      }
    }
    analysed.push_back(analyse(*kernel, !options.loop_bounds, std::move(unpinned)));
    analysed.back().index = i;
  }
  // The probes join their twins' groups (after every kernel, so a group's
  // first member, whose index same_source_as reports, is one of `kernels`).
  // Their own parameters are thrown away with them.
  std::vector<Kernel> probe_copies;
  probe_copies.reserve(twins.size());
  for (auto& [twin, unpinned] : twins) {
    probe_copies.push_back(*twin);
    analysed.push_back(analyse(probe_copies.back(), !options.loop_bounds, std::move(unpinned)));
    analysed.back().index = kernels.size() + probe_copies.size() - 1;
  }
  ParameteriseReport report = group_and_parameterise(analysed, kernels.size() + probe_copies.size(), kernels.size(), options);
  report.same_source_as.resize(kernels.size());
  return report;
}

}  // namespace kiln::kir
