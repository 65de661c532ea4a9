#include "src/fuse/epilogue.h"

#include "src/fuse/ir_walk.h"

#include <kiln/error.h>

#include <functional>
#include <memory>
#include <unordered_set>

namespace kiln::fuse {

using kir::Access;
using kir::Expr;
using kir::ExprKind;
using kir::Stmt;
using kir::StmtKind;

namespace {

std::vector<int> slots_of(const BoundKernel& k, graph::ValueId value) {
  std::vector<int> slots;
  for (std::size_t i = 0; i < k.values.size(); ++i)
    if (k.values[i] == value) slots.push_back(static_cast<int>(i));
  return slots;
}

bool is_slot(const std::vector<int>& slots, int buffer) {
  return std::find(slots.begin(), slots.end(), buffer) != slots.end();
}

// What fusion needs to know once the pair is known to be fusable.
struct Analysis {
  int producer_slot = -1;             // the producer's buffer of the shared value
  int consumer_output = -1;           // the consumer's output buffer
  std::vector<int> consumer_value_slots;  // the consumer's buffers of the shared value
};

std::optional<std::string> analyze(const BoundKernel& p, const BoundKernel& c, graph::ValueId produced,
                                   graph::ValueId consumed, std::int64_t elements, Analysis& a) {
  KILN_ASSERT(p.values.size() == p.kernel.buffers.size() && c.values.size() == c.kernel.buffers.size());
  const std::string pair = "'" + c.kernel.name + "' into '" + p.kernel.name + "': ";
  if (!c.kernel.shared.empty()) return pair + "the consumer uses workgroup shared memory";
  const std::vector<int> produced_slots = slots_of(p, produced);
  if (produced_slots.size() != 1)
    return pair + "the producer binds the value " + std::to_string(produced_slots.size()) + " times (expected once)";
  a.producer_slot = produced_slots[0];
  if (p.kernel.buffers[static_cast<std::size_t>(a.producer_slot)].access != Access::write)
    return pair + "the producer does not only write the value (it reads it back)";

  if (c.kernel.global_size != elements)
    return pair + "the consumer runs " + std::to_string(c.kernel.global_size) + " invocations, not one per element (" +
           std::to_string(elements) + ")";
  for (std::size_t i = 0; i < c.kernel.buffers.size(); ++i) {
    if (c.kernel.buffers[i].access == Access::read) continue;
    if (a.consumer_output >= 0) return pair + "the consumer writes more than one buffer";
    if (c.kernel.buffers[i].access != Access::write) return pair + "the consumer reads its own output";
    a.consumer_output = static_cast<int>(i);
  }
  if (a.consumer_output < 0) return pair + "the consumer writes no buffer";
  a.consumer_value_slots = slots_of(c, consumed);
  if (a.consumer_value_slots.empty()) return pair + "the consumer does not read the value";
  if (is_slot(a.consumer_value_slots, a.consumer_output)) return pair + "the consumer writes the value";
  if (p.kernel.buffers[static_cast<std::size_t>(a.producer_slot)].type !=
      c.kernel.buffers[static_cast<std::size_t>(a.consumer_value_slots[0])].type)
    return pair + "the producer and the consumer disagree on the value's element type";

  // Pointwise: element i of the output depends on element i of the value only.
  std::optional<std::string> reason;
  walk(
      c.kernel.body,
      [&](const Stmt& s) {
        if (s.kind != StmtKind::store || reason) return;
        if (s.buffer != a.consumer_output) reason = pair + "the consumer stores to a buffer it also reads";
        else if (s.index->kind != ExprKind::global_index)
          reason = pair + "the consumer stores at an index other than its global index";
      },
      [&](const kir::ExprNode& n) {
        if (reason || n.kind != ExprKind::load || !is_slot(a.consumer_value_slots, n.buffer)) return;
        if (n.args[0]->kind != ExprKind::global_index)
          reason = pair + "the consumer reads the value at an index other than its global index";
      });
  if (reason) return reason;

  // A value the producer writes may not be ready when another invocation of
  // the fused kernel reads it.
  for (std::size_t i = 0; i < c.values.size(); ++i) {
    if (static_cast<int>(i) == a.consumer_output || is_slot(a.consumer_value_slots, static_cast<int>(i))) continue;
    for (std::size_t j = 0; j < p.values.size(); ++j)
      if (p.values[j] == c.values[i] && p.kernel.buffers[j].access != Access::read)
        return pair + "the consumer reads buffer '" + c.kernel.buffers[i].name + "', which the producer writes";
  }
  return std::nullopt;
}

std::string fused_name(const std::string& producer, const std::string& consumer) {
  std::string tail = consumer;
  if (tail.starts_with("elementwise_")) tail = tail.substr(std::string("elementwise_").size());
  const std::string name = producer + "_" + tail;
  return name.size() <= kMaxKernelName ? name : producer;
}

// Inlines the consumer's body at each store of the shared value.
class Inliner {
 public:
  Inliner(const BoundKernel& consumer, const Analysis& a, std::vector<int> buffer_map,
          std::unordered_set<std::string> used_names)
      : consumer_(consumer), a_(a), buffer_map_(std::move(buffer_map)), used_(std::move(used_names)) {
    walk(
        consumer_.kernel.body,
        [&](const Stmt& s) {
          if (s.kind == StmtKind::declare || s.kind == StmtKind::loop) consumer_names_.push_back(s.var);
        },
        [](const kir::ExprNode&) {});
  }

  std::vector<Stmt> rewrite(const std::vector<Stmt>& body) {
    std::vector<Stmt> out;
    for (const Stmt& s : body) {
      if (s.kind == StmtKind::store && s.buffer == a_.producer_slot) {
        inline_at(s, out);
        continue;
      }
      Stmt copy = s;
      copy.body = rewrite(s.body);
      copy.else_body = rewrite(s.else_body);
      out.push_back(std::move(copy));
    }
    return out;
  }

 private:
  // The consumer's statements for one store, with their variables renamed
  // "f<n>_<name>" (n chosen so no name collides with the producer's or an
  // earlier copy's) and the stored index and value substituted.
  void inline_at(const Stmt& store, std::vector<Stmt>& out) {
    prefix_ = fresh_prefix();
    index_ = store.index;
    if (index_.type() != kir::ScalarType::i32) index_ = kir::cast(kir::ScalarType::i32, index_);
    if (index_->kind != ExprKind::global_index && index_->kind != ExprKind::var) {
      out.push_back(kir::declare(prefix_ + "idx", kir::ScalarType::i32, index_));
      index_ = kir::var(prefix_ + "idx", kir::ScalarType::i32);
    }
    value_ = store.value;
    if (value_->kind != ExprKind::var && value_->kind != ExprKind::constant) {
      out.push_back(kir::declare(prefix_ + "val", value_.type(), value_));
      value_ = kir::var(prefix_ + "val", value_.type());
    }
    for (const Stmt& s : consumer_.kernel.body) out.push_back(substitute(s));
  }

  std::string fresh_prefix() {
    for (;;) {
      const std::string prefix = "f" + std::to_string(next_instance_++) + "_";
      bool clash = used_.count(prefix + "idx") || used_.count(prefix + "val");
      for (const std::string& name : consumer_names_) clash = clash || used_.count(prefix + name);
      if (clash) continue;
      used_.insert(prefix + "idx");
      used_.insert(prefix + "val");
      for (const std::string& name : consumer_names_) used_.insert(prefix + name);
      return prefix;
    }
  }

  Stmt substitute(const Stmt& s) const {
    Stmt out = s;
    if (!s.var.empty()) out.var = prefix_ + s.var;
    out.value = substitute(s.value);
    out.begin = substitute(s.begin);
    out.end = substitute(s.end);
    if (s.kind == StmtKind::store) {
      out.buffer = buffer_map_[static_cast<std::size_t>(s.buffer)];
      out.index = index_;  // analyze() proved it is the global index
    } else {
      out.index = substitute(s.index);
    }
    out.body.clear();
    for (const Stmt& inner : s.body) out.body.push_back(substitute(inner));
    out.else_body.clear();
    for (const Stmt& inner : s.else_body) out.else_body.push_back(substitute(inner));
    return out;
  }

  Expr substitute(const Expr& e) const {
    if (!e) return e;
    switch (e->kind) {
      case ExprKind::constant: return e;
      case ExprKind::global_index: return index_;
      case ExprKind::var: return kir::var(prefix_ + e->name, e->type);
      case ExprKind::load:
        if (is_slot(a_.consumer_value_slots, e->buffer)) return value_;
        return kir::load(kir::Buf{buffer_map_[static_cast<std::size_t>(e->buffer)]}, substitute(e->args[0]), e->type);
      default: {
        kir::ExprNode node = *e;
        for (Expr& arg : node.args) arg = substitute(arg);
        return Expr(std::make_shared<const kir::ExprNode>(std::move(node)));
      }
    }
  }

  const BoundKernel& consumer_;
  const Analysis& a_;
  std::vector<int> buffer_map_;  // consumer buffer -> fused buffer (-1: the substituted value)
  std::unordered_set<std::string> used_;
  std::vector<std::string> consumer_names_;
  int next_instance_ = 0;
  std::string prefix_;
  Expr index_, value_;
};

}  // namespace

std::optional<std::string> epilogue_unfusable_reason(const BoundKernel& producer, const BoundKernel& consumer,
                                                     graph::ValueId value, std::int64_t elements) {
  return epilogue_unfusable_reason(producer, consumer, value, value, elements);
}

std::optional<std::string> epilogue_unfusable_reason(const BoundKernel& producer, const BoundKernel& consumer,
                                                     graph::ValueId produced, graph::ValueId consumed,
                                                     std::int64_t elements) {
  Analysis a;
  return analyze(producer, consumer, produced, consumed, elements, a);
}

BoundKernel fuse_epilogue(const BoundKernel& producer, const BoundKernel& consumer, graph::ValueId value,
                          std::int64_t elements) {
  return fuse_epilogue(producer, consumer, value, value, elements);
}

BoundKernel fuse_epilogue(const BoundKernel& producer, const BoundKernel& consumer, graph::ValueId produced,
                          graph::ValueId consumed, std::int64_t elements) {
  Analysis a;
  if (auto reason = analyze(producer, consumer, produced, consumed, elements, a))
    throw_error(ErrorKind::Internal, "epilogue fusion of " + *reason);

  BoundKernel fused = producer;
  kir::Kernel& k = fused.kernel;
  k.name = fused_name(producer.kernel.name, consumer.kernel.name);
  const auto ps = static_cast<std::size_t>(a.producer_slot);
  const kir::BufferParam& out = consumer.kernel.buffers[static_cast<std::size_t>(a.consumer_output)];
  k.buffers[ps] = {"", out.type, Access::write};
  k.buffers[ps].name = unique_buffer_name(k.buffers, out.name);
  fused.values[ps] = consumer.values[static_cast<std::size_t>(a.consumer_output)];

  std::vector<int> buffer_map(consumer.kernel.buffers.size(), -1);
  for (std::size_t i = 0; i < consumer.kernel.buffers.size(); ++i) {
    if (static_cast<int>(i) == a.consumer_output) {
      buffer_map[i] = a.producer_slot;
      continue;
    }
    if (is_slot(a.consumer_value_slots, static_cast<int>(i))) continue;
    // Reuse a buffer the producer already reads for the same value.
    for (std::size_t j = 0; j < fused.values.size() && buffer_map[i] < 0; ++j)
      if (fused.values[j] == consumer.values[i] && k.buffers[j].access == Access::read) buffer_map[i] = static_cast<int>(j);
    if (buffer_map[i] >= 0) continue;
    const kir::BufferParam& in = consumer.kernel.buffers[i];
    k.buffers.push_back({unique_buffer_name(k.buffers, in.name), in.type, Access::read});
    fused.values.push_back(consumer.values[i]);
    buffer_map[i] = static_cast<int>(k.buffers.size() - 1);
  }

  std::unordered_set<std::string> used;
  walk(
      producer.kernel.body,
      [&](const Stmt& s) {
        if (s.kind == StmtKind::declare || s.kind == StmtKind::loop) used.insert(s.var);
      },
      [](const kir::ExprNode&) {});
  Inliner inliner(consumer, a, std::move(buffer_map), std::move(used));
  k.body = inliner.rewrite(producer.kernel.body);
  kir::verify(k);
  return fused;
}

}  // namespace kiln::fuse
