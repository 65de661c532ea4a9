#include "src/fuse/epilogue.h"

#include "src/base/check.h"
#include "src/fuse/ir_walk.h"

#include <kiln/error.h>

#include <algorithm>
#include <functional>
#include <memory>
#include <unordered_map>
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
  // Fusion rewrites scalar and vector accesses; a fragment's tile accesses
  // of buffers are not rewritten yet (a matrix-unit GEMM's fragments stay in
  // shared memory, and its block reaches Y through scalar stores).
  if (kir::fragments_touch_buffers(p.kernel) || kir::uses_fragments(c.kernel))
    return pair + "a kernel moves matrix fragments through buffers";
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
      : consumer_(consumer), a_(a), buffer_map_(std::move(buffer_map)), prefixes_("f", std::move(used_names)) {
    walk(
        consumer_.kernel.body,
        [&](const Stmt& s) {
          if (s.kind == StmtKind::declare || s.kind == StmtKind::loop) consumer_names_.push_back(s.var);
        },
        [](const kir::ExprNode&) {});
    analyse_vector_consumer();
  }

  std::vector<Stmt> rewrite(const std::vector<Stmt>& body) {
    std::vector<Stmt> out;
    for (const Stmt& s : body) {
      if (s.kind == StmtKind::store && s.buffer == a_.producer_slot) {
        inline_at(s, out);
        continue;
      }
      if (s.kind == StmtKind::store_vector && s.buffer == a_.producer_slot) {
        inline_vector_at(s, out);
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

  // The consumer once per component of a vector store of the value. A
  // consumer of straight-line code with one store keeps the store a vector
  // store, and its reads of other buffers at its own global index (a
  // residual input) become vector loads; any other consumer is inlined per
  // component as at a scalar store.
  void inline_vector_at(const Stmt& store, std::vector<Stmt>& out) {
    const std::size_t width = store.values.size();
    const kir::ScalarType index_type = store.index.type();
    Expr vector_index = store.index;
    if (vector_index->kind != ExprKind::var && vector_index->kind != ExprKind::constant) {
      const std::string name = fresh_prefix() + "vidx";
      out.push_back(kir::declare(name, index_type, vector_index));
      vector_index = kir::var(name, index_type);
    }
    const Expr w = index_type == kir::ScalarType::u32 ? kir::u32(static_cast<std::int64_t>(width))
                                                      : kir::i32(static_cast<std::int64_t>(width));
    auto element = [&](std::size_t c) {
      if (c == 0) return vector_index * w;
      const Expr c_expr = index_type == kir::ScalarType::u32 ? kir::u32(static_cast<std::int64_t>(c))
                                                             : kir::i32(static_cast<std::int64_t>(c));
      return vector_index * w + c_expr;
    };
    if (!vector_consumer_) {
      for (std::size_t c = 0; c < width; ++c) inline_at(kir::store(kir::Buf{store.buffer}, element(c), store.values[c]), out);
      return;
    }
    std::vector<std::string> prefixes;
    for (std::size_t c = 0; c < width; ++c) prefixes.push_back(fresh_prefix());
    hoist_lane_loads(width, vector_index, element(0), prefixes, out);
    std::vector<Expr> results;
    for (std::size_t c = 0; c < width; ++c) {
      prefix_ = prefixes[c];
      component_ = static_cast<int>(c);
      index_ = element(c);
      if (index_.type() != kir::ScalarType::i32) index_ = kir::cast(kir::ScalarType::i32, index_);
      if (consumer_uses_index_) {
        out.push_back(kir::declare(prefix_ + "idx", kir::ScalarType::i32, index_));
        index_ = kir::var(prefix_ + "idx", kir::ScalarType::i32);
      }
      value_ = store.values[c];
      if (value_->kind != ExprKind::var && value_->kind != ExprKind::constant) {
        out.push_back(kir::declare(prefix_ + "val", value_.type(), value_));
        value_ = kir::var(prefix_ + "val", value_.type());
      }
      for (const Stmt& s : consumer_.kernel.body) {
        if (s.kind != StmtKind::store) {
          out.push_back(substitute(s));
          continue;
        }
        const kir::ScalarType type = kir::value_type(consumer_.kernel.buffers[static_cast<std::size_t>(a_.consumer_output)].type);
        out.push_back(kir::declare(prefix_ + "out", type, substitute(s.value)));
        results.push_back(kir::var(prefix_ + "out", type));
      }
    }
    component_ = -1;
    hoisted_.clear();
    out.push_back(kir::store_vector(kir::Buf{a_.producer_slot}, vector_index, std::move(results)));
  }

  // How an index of the consumer varies over the components of a vector
  // store of `width` (its global index = width * v + c for component c):
  // the same for all (a per-channel operand), or element 0 + c with element
  // 0 a multiple of width (an operand along the last axis, such as a
  // MatMul's bias), or neither.
  enum class Lanes : std::uint8_t { unknown, uniform, consecutive };

  static bool multiple_of(const Expr& e, std::int64_t width, bool positive) {
    return e->kind == ExprKind::constant && e->type != kir::ScalarType::boolean &&
           (positive ? e->ivalue > 0 : e->ivalue >= 0) && e->ivalue % width == 0;
  }

  static Lanes lanes(const Expr& e, std::int64_t width) {
    if (!e) return Lanes::unknown;
    switch (e->kind) {
      case ExprKind::constant:
      case ExprKind::param: return Lanes::uniform;
      case ExprKind::global_index: return Lanes::consecutive;
      case ExprKind::cast: {
        const Lanes inner = lanes(e->args[0], width);
        const bool integer = e->type == kir::ScalarType::i32 || e->type == kir::ScalarType::u32;
        return inner == Lanes::uniform || integer ? inner : Lanes::unknown;
      }
      case ExprKind::binary: {
        const Lanes a = lanes(e->args[0], width), b = lanes(e->args[1], width);
        if (a == Lanes::uniform && b == Lanes::uniform) return Lanes::uniform;
        const kir::BinaryOp op = e->binary;
        if (op == kir::BinaryOp::add && a == Lanes::consecutive && multiple_of(e->args[1], width, false))
          return Lanes::consecutive;
        if (op == kir::BinaryOp::add && b == Lanes::consecutive && multiple_of(e->args[0], width, false))
          return Lanes::consecutive;
        // (w v + c) % N = (w v) % N + c and (w v + c) / D = (w v) / D when
        // N and D are multiples of w.
        if (op == kir::BinaryOp::mod && a == Lanes::consecutive && multiple_of(e->args[1], width, true))
          return Lanes::consecutive;
        if (op == kir::BinaryOp::div && a == Lanes::consecutive && multiple_of(e->args[1], width, true))
          return Lanes::uniform;
        return Lanes::unknown;
      }
      case ExprKind::unary:
      case ExprKind::select:
        for (const Expr& arg : e->args)
          if (lanes(arg, width) != Lanes::uniform) return Lanes::unknown;
        return Lanes::uniform;
      default: return Lanes::unknown;
    }
  }

  // `e` with the consumer's declared variables replaced by their values, or
  // empty where it uses one that is assigned (or a loop variable).
  Expr expand(const Expr& e) const {
    if (!e) return e;
    if (e->kind == ExprKind::var) {
      const auto it = definitions_.find(e->name);
      return it != definitions_.end() ? expand(it->second) : Expr{};
    }
    if (e->args.empty()) return e;
    kir::ExprNode node = *e;
    for (Expr& arg : node.args) {
      arg = expand(arg);
      if (!arg) return Expr{};
    }
    return Expr(std::make_shared<const kir::ExprNode>(std::move(node)));
  }

  static Expr with_global_index(const Expr& e, const Expr& index) {
    if (!e) return e;
    if (e->kind == ExprKind::global_index) return index;
    if (e->args.empty()) return e;
    kir::ExprNode node = *e;
    for (Expr& arg : node.args) arg = with_global_index(arg, index);
    return Expr(std::make_shared<const kir::ExprNode>(std::move(node)));
  }

  // Before the components of a vector store: the consumer's loads whose
  // index is the same for every component (one load) or consecutive from an
  // aligned element (one vector load: a residual read at the consumer's own
  // index is vector `vector_index`), read once; substitute() then uses them
  // (hoisted_). The consumer is straight-line, so each would be read anyway.
  void hoist_lane_loads(std::size_t width, const Expr& vector_index, const Expr& element0,
                        const std::vector<std::string>& prefixes, std::vector<Stmt>& out) {
    Expr first = element0;
    if (first.type() != kir::ScalarType::i32) first = kir::cast(kir::ScalarType::i32, first);
    const auto w = static_cast<std::int64_t>(width);
    int next = 0;
    for (const kir::ExprNode* node : lane_loads_) {
      const Expr index = expand(node->args[0]);
      const Lanes kind = lanes(index, w);
      if (kind == Lanes::unknown) continue;
      const Expr at = with_global_index(index, first);
      const kir::Buf buffer{buffer_map_[static_cast<std::size_t>(node->buffer)]};
      const std::string suffix = "ld" + std::to_string(next++);
      std::vector<Expr> per_component;
      const bool vector_type = node->type == kir::ScalarType::f32 || node->type == kir::ScalarType::i32 ||
                               node->type == kir::ScalarType::u32;
      if (kind == Lanes::uniform) {
        out.push_back(kir::declare(prefixes[0] + suffix, node->type, kir::load(buffer, at, node->type)));
        per_component.assign(width, kir::var(prefixes[0] + suffix, node->type));
      } else if (!vector_type) {
        // Consecutive elements of a type kernels cannot load as a vector
        // (bool, 16-bit storage, 64-bit): one load per component.
        for (std::size_t c = 0; c < width; ++c) {
          const std::string name = prefixes[c] + suffix;
          const Expr component = at.type() == kir::ScalarType::u32 ? at + kir::u32(static_cast<std::uint32_t>(c))
                                                                   : at + kir::i32(static_cast<std::int32_t>(c));
          out.push_back(kir::declare(name, node->type, kir::load(buffer, component, node->type)));
          per_component.push_back(kir::var(name, node->type));
        }
      } else {
        std::vector<std::string> names;
        for (std::size_t c = 0; c < width; ++c) {
          names.push_back(prefixes[c] + suffix);
          per_component.push_back(kir::var(names.back(), node->type));
        }
        const Expr vector_at = node->args[0]->kind == ExprKind::global_index ? vector_index
                               : at.type() == kir::ScalarType::u32 ? at / kir::u32(w)
                                                                   : at / kir::i32(w);
        out.push_back(kir::load_vector(std::move(names), buffer, vector_at, node->type));
      }
      hoisted_[node] = std::move(per_component);
    }
  }

  // Whether the consumer can be inlined at a vector store as a vector
  // (vector_consumer_), whether it uses its global index other than as the
  // index of a load (consumer_uses_index_), and its loads of buffers other
  // than the value (lane_loads_).
  void analyse_vector_consumer() {
    int stores = 0;
    bool straight = true;
    for (const Stmt& s : consumer_.kernel.body) {
      if (s.kind == StmtKind::store) ++stores;
      else if (s.kind != StmtKind::declare && s.kind != StmtKind::assign) straight = false;
    }
    vector_consumer_ = straight && stores == 1;
    std::function<void(const Expr&)> visit = [&](const Expr& e) {
      if (!e) return;
      if (e->kind == ExprKind::global_index) consumer_uses_index_ = true;
      if (e->kind == ExprKind::load && e->args[0]->kind == ExprKind::global_index) return;  // hoisted or the value
      for (const Expr& arg : e->args) visit(arg);
    };
    for (const Stmt& s : consumer_.kernel.body) {
      visit(s.value);
      if (s.kind != StmtKind::store) visit(s.index);  // a store's index is the global index (analyze)
    }
    if (!vector_consumer_) return;
    // Declared values, for expand(); an assigned variable has none.
    for (const Stmt& s : consumer_.kernel.body)
      if (s.kind == StmtKind::declare) definitions_[s.var] = s.value;
    for (const Stmt& s : consumer_.kernel.body)
      if (s.kind == StmtKind::assign) definitions_.erase(s.var);
    // Loads of other buffers: candidates for hoist_lane_loads.
    for (const Stmt& s : consumer_.kernel.body)
      for_each_expr(s.value, [&](const kir::ExprNode& n) {
        if (n.kind != ExprKind::load || is_slot(a_.consumer_value_slots, n.buffer)) return;
        if (std::find(lane_loads_.begin(), lane_loads_.end(), &n) == lane_loads_.end()) lane_loads_.push_back(&n);
      });
  }

  std::string fresh_prefix() {
    std::vector<std::string> suffixes = {"idx", "val", "vidx", "out"};
    for (std::size_t r = 0; r < lane_loads_.size(); ++r) suffixes.push_back("ld" + std::to_string(r));
    suffixes.insert(suffixes.end(), consumer_names_.begin(), consumer_names_.end());
    return prefixes_.next(suffixes);
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
        if (component_ >= 0) {
          const auto hoisted = hoisted_.find(e.operator->());
          if (hoisted != hoisted_.end()) return hoisted->second[static_cast<std::size_t>(component_)];
        }
        return kir::load(kir::Buf{buffer_map_[static_cast<std::size_t>(e->buffer)]}, substitute(e->args[0]), e->type);
      default: {
        kir::ExprNode node = *e;
        for (Expr& arg : node.args) arg = substitute(arg);
        // The fused value first in a commutative add or multiply (exact in
        // IEEE arithmetic), for the same reason as the buffer names.
        const bool commutes = node.kind == ExprKind::binary &&
                              (node.binary == kir::BinaryOp::add || node.binary == kir::BinaryOp::mul);
        if (commutes && is_value(node.args[1]) && !is_value(node.args[0])) std::swap(node.args[0], node.args[1]);
        return Expr(std::make_shared<const kir::ExprNode>(std::move(node)));
      }
    }
  }

  // Whether `e` (substituted) is the fused value or computed from it alone.
  bool is_value(const Expr& e) const { return e.operator->() == value_.operator->(); }

  const BoundKernel& consumer_;
  const Analysis& a_;
  std::vector<int> buffer_map_;  // consumer buffer -> fused buffer (-1: the substituted value)
  FreshPrefixes prefixes_;
  std::vector<std::string> consumer_names_;
  std::string prefix_;
  Expr index_, value_;
  int component_ = -1;  // inlining component c of a vector store (vector reads substituted), else -1
  bool vector_consumer_ = false;
  bool consumer_uses_index_ = false;
  std::unordered_map<std::string, Expr> definitions_;  // the consumer's declared (never assigned) variables
  std::vector<const kir::ExprNode*> lane_loads_;       // its loads of other buffers at other indices
  std::unordered_map<const kir::ExprNode*, std::vector<Expr>> hoisted_;  // per component, during a vector store
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
    // A new input is named by role, not by the consumer's own name for it
    // (Add's "a" or "b" depends on which operand the producer made): fusions
    // that differ only in operand order then render alike and share a kernel.
    buffer_map[i] = bind_read(fused, consumer, i, "epilogue_in");
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
  return fused;
}

}  // namespace kiln::fuse
