#include "src/fuse/prologue.h"

#include "src/base/check.h"
#include "src/fuse/ir_walk.h"

#include <kiln/error.h>

#include <algorithm>
#include <memory>
#include <unordered_set>

namespace kiln::fuse {

using kir::Access;
using kir::Expr;
using kir::ExprKind;
using kir::Stmt;
using kir::StmtKind;

namespace {

struct PrologueAnalysis {
  int producer_slot = -1;           // the producer's buffer of the produced value
  std::vector<bool> consumed_slot;  // by consumer buffer: binds the consumed value
};

bool loads_slot(const Expr& e, const std::vector<bool>& slots) {
  bool found = false;
  for_each_expr(e, [&](const kir::ExprNode& n) {
    if (n.kind == ExprKind::load && slots[static_cast<std::size_t>(n.buffer)]) found = true;
  });
  return found;
}

std::optional<std::string> analyze_prologue(const BoundKernel& p, const BoundKernel& c, graph::ValueId produced,
                                            graph::ValueId consumed, std::int64_t elements, PrologueAnalysis& a) {
  KILN_ASSERT(p.values.size() == p.kernel.buffers.size() && c.values.size() == c.kernel.buffers.size());
  const std::string pair = "'" + p.kernel.name + "' into the loads of '" + c.kernel.name + "': ";
  // Inlined, its shared memory and barriers would run inside the consumer's
  // loads, where invocations no longer work on one element each.
  if (!p.kernel.shared.empty()) return pair + "the producer uses workgroup shared memory";
  // Fusion rewrites scalar and vector accesses; a fragment's tile accesses
  // are not rewritten yet.
  if (kir::uses_fragments(p.kernel) || kir::uses_fragments(c.kernel)) return pair + "a kernel uses matrix fragments";
  if (p.kernel.global_size != elements)
    return pair + "the producer runs " + std::to_string(p.kernel.global_size) +
           " invocations, not one per element (" + std::to_string(elements) + ")";
  for (std::size_t i = 0; i < p.values.size(); ++i) {
    if (p.values[i] == produced) {
      if (a.producer_slot >= 0) return pair + "the producer binds the value twice";
      if (p.kernel.buffers[i].access != Access::write) return pair + "the producer reads the value back";
      a.producer_slot = static_cast<int>(i);
    } else if (p.kernel.buffers[i].access != Access::read) {
      return pair + "the producer writes buffer '" + p.kernel.buffers[i].name + "' besides the value";
    }
  }
  if (a.producer_slot < 0) return pair + "the producer does not write the value";
  const std::vector<Stmt>& body = p.kernel.body;
  for (std::size_t i = 0; i < body.size(); ++i) {
    const Stmt& s = body[i];
    const bool last = i + 1 == body.size();
    if (s.kind == StmtKind::store) {
      if (!last) return pair + "the producer stores before its last statement";
      if (s.index->kind != ExprKind::global_index) return pair + "the producer stores at an index other than its global index";
    } else if (s.kind != StmtKind::declare && s.kind != StmtKind::assign) {
      return pair + "the producer is not straight-line code (it has loops, branches or vector accesses)";
    } else if (last) {
      return pair + "the producer does not end with its store";
    }
  }
  if (body.empty()) return pair + "the producer has an empty body";

  a.consumed_slot.assign(c.values.size(), false);
  bool reads = false;
  for (std::size_t i = 0; i < c.values.size(); ++i) {
    if (c.values[i] != consumed) continue;
    if (c.kernel.buffers[i].access != Access::read) return pair + "the consumer writes the value";
    if (c.kernel.buffers[i].type != p.kernel.buffers[static_cast<std::size_t>(a.producer_slot)].type)
      return pair + "the producer and the consumer disagree on the value's element type";
    a.consumed_slot[i] = true;
    reads = true;
  }
  if (!reads) return pair + "the consumer does not read the value";
  // The consumer's writes must not be inputs of the producer (they would race).
  for (std::size_t i = 0; i < c.values.size(); ++i) {
    if (c.kernel.buffers[i].access == Access::read) continue;
    for (std::size_t j = 0; j < p.values.size(); ++j)
      if (static_cast<int>(j) != a.producer_slot && p.values[j] == c.values[i])
        return pair + "the consumer writes buffer '" + c.kernel.buffers[i].name + "', which the producer reads";
  }
  std::optional<std::string> reason;
  walk(
      c.kernel.body,
      [&](const Stmt& s) {
        if (!reason && s.kind == StmtKind::load_vector && a.consumed_slot[static_cast<std::size_t>(s.buffer)])
          reason = pair + "the consumer reads the value with vector loads";
      },
      [&](const kir::ExprNode& n) {
        if (reason || n.kind != ExprKind::select) return;
        if (loads_slot(n.args[1], a.consumed_slot) || loads_slot(n.args[2], a.consumed_slot))
          reason = pair + "the consumer reads the value under a select (evaluated only when chosen)";
      });
  return reason;
}

// Rewrites the consumer's body: before each statement, one copy of the
// producer per load of the value in that statement's own expressions.
class PrologueInliner {
 public:
  PrologueInliner(const BoundKernel& producer, const PrologueAnalysis& a, std::vector<int> consumer_map,
                  std::vector<int> producer_map, std::unordered_set<std::string> used)
      : producer_(producer),
        a_(a),
        consumer_map_(std::move(consumer_map)),
        producer_map_(std::move(producer_map)),
        prefixes_("p", std::move(used)),
        producer_names_(declared_names(producer.kernel.body)) {}

  std::vector<Stmt> rewrite(const std::vector<Stmt>& body) {
    std::vector<Stmt> out;
    for (const Stmt& s : body) {
      Stmt copy = s;
      copy.value = consumer_expr(s.value, out);
      copy.index = consumer_expr(s.index, out);
      copy.begin = consumer_expr(s.begin, out);
      copy.end = consumer_expr(s.end, out);
      for (Expr& value : copy.values) value = consumer_expr(value, out);
      if (s.kind == StmtKind::store || s.kind == StmtKind::load_vector || s.kind == StmtKind::store_vector)
        copy.buffer = consumer_map_[static_cast<std::size_t>(s.buffer)];
      copy.body = rewrite(s.body);
      copy.else_body = rewrite(s.else_body);
      out.push_back(std::move(copy));
    }
    return out;
  }

 private:
  // A consumer expression with its buffers renumbered and each load of the
  // value replaced by a variable computed by statements appended to `out`.
  Expr consumer_expr(const Expr& e, std::vector<Stmt>& out) {
    if (!e) return e;
    switch (e->kind) {
      case ExprKind::constant:
      case ExprKind::var:
      case ExprKind::global_index: return e;
      case ExprKind::load: {
        const Expr index = consumer_expr(e->args[0], out);
        const auto slot = static_cast<std::size_t>(e->buffer);
        if (a_.consumed_slot[slot]) return inline_producer(index, out);
        return kir::load(kir::Buf{consumer_map_[slot]}, index, e->type);
      }
      default: {
        kir::ExprNode node = *e;
        for (Expr& arg : node.args) arg = consumer_expr(arg, out);
        return Expr(std::make_shared<const kir::ExprNode>(std::move(node)));
      }
    }
  }

  Expr inline_producer(Expr index, std::vector<Stmt>& out) {
    prefix_ = fresh_prefix();
    if (index.type() != kir::ScalarType::i32) index = kir::cast(kir::ScalarType::i32, index);
    index_ = index;
    if (index->kind != ExprKind::var && index->kind != ExprKind::constant) {
      out.push_back(kir::declare(prefix_ + "idx", kir::ScalarType::i32, index));
      index_ = kir::var(prefix_ + "idx", kir::ScalarType::i32);
    }
    const std::vector<Stmt>& body = producer_.kernel.body;
    for (std::size_t i = 0; i + 1 < body.size(); ++i) {
      Stmt s = body[i];
      s.var = prefix_ + s.var;
      s.value = producer_expr(s.value);
      out.push_back(std::move(s));
    }
    const kir::ScalarType type = kir::value_type(producer_.kernel.buffers[static_cast<std::size_t>(a_.producer_slot)].type);
    out.push_back(kir::declare(prefix_ + "val", type, producer_expr(body.back().value)));
    return kir::var(prefix_ + "val", type);
  }

  Expr producer_expr(const Expr& e) const {
    if (!e) return e;
    switch (e->kind) {
      case ExprKind::constant: return e;
      case ExprKind::global_index: return index_;
      case ExprKind::var: return kir::var(prefix_ + e->name, e->type);
      case ExprKind::load:
        return kir::load(kir::Buf{producer_map_[static_cast<std::size_t>(e->buffer)]}, producer_expr(e->args[0]),
                         e->type);
      default: {
        kir::ExprNode node = *e;
        for (Expr& arg : node.args) arg = producer_expr(arg);
        return Expr(std::make_shared<const kir::ExprNode>(std::move(node)));
      }
    }
  }

  std::string fresh_prefix() {
    std::vector<std::string> suffixes = {"idx", "val"};
    suffixes.insert(suffixes.end(), producer_names_.begin(), producer_names_.end());
    return prefixes_.next(suffixes);
  }

  const BoundKernel& producer_;
  const PrologueAnalysis& a_;
  std::vector<int> consumer_map_;  // consumer buffer -> fused buffer (-1: the value, inlined)
  std::vector<int> producer_map_;  // producer buffer -> fused buffer (-1: the value)
  FreshPrefixes prefixes_;
  std::vector<std::string> producer_names_;
  std::string prefix_;
  Expr index_;
};

}  // namespace

std::optional<std::string> prologue_unfusable_reason(const BoundKernel& producer, const BoundKernel& consumer,
                                                     graph::ValueId produced, graph::ValueId consumed,
                                                     std::int64_t elements) {
  PrologueAnalysis a;
  return analyze_prologue(producer, consumer, produced, consumed, elements, a);
}

BoundKernel fuse_prologue(const BoundKernel& producer, const BoundKernel& consumer, graph::ValueId produced,
                          graph::ValueId consumed, std::int64_t elements) {
  PrologueAnalysis a;
  if (auto reason = analyze_prologue(producer, consumer, produced, consumed, elements, a))
    throw_error(ErrorKind::Internal, "prologue fusion of " + *reason);

  const std::string name = producer.kernel.name + "_" + consumer.kernel.name;
  BoundKernel fused{kir::Kernel(name.size() <= kMaxKernelName ? name : consumer.kernel.name), {}};
  kir::Kernel& k = fused.kernel;
  k.global_size = consumer.kernel.global_size;
  k.workgroup_size = consumer.kernel.workgroup_size;
  k.shared = consumer.kernel.shared;  // a shared-memory GEMM keeps its tiles
  k.tuning_site = consumer.kernel.tuning_site;  // the consumer's knobs still apply
  k.subgroup_size = consumer.kernel.subgroup_size;  // and a subgroup GEMM its lanes
  k.fragments = consumer.kernel.fragments;          // and a matrix-unit one its fragments

  std::vector<int> consumer_map(consumer.values.size(), -1);
  for (std::size_t i = 0; i < consumer.values.size(); ++i) {
    if (a.consumed_slot[i]) continue;
    consumer_map[i] = static_cast<int>(k.buffers.size());
    k.buffers.push_back(consumer.kernel.buffers[i]);
    fused.values.push_back(consumer.values[i]);
  }
  std::vector<int> producer_map(producer.values.size(), -1);
  for (std::size_t j = 0; j < producer.values.size(); ++j)
    if (static_cast<int>(j) != a.producer_slot)
      producer_map[j] = bind_read(fused, producer, j, producer.kernel.buffers[j].name);

  const std::vector<std::string> names = declared_names(consumer.kernel.body);
  PrologueInliner inliner(producer, a, std::move(consumer_map), std::move(producer_map),
                  std::unordered_set<std::string>(names.begin(), names.end()));
  k.body = inliner.rewrite(consumer.kernel.body);
  return fused;
}

}  // namespace kiln::fuse
