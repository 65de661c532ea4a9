// Tree-walking interpreter over a pre-resolved kernel: variable names become
// slots and expressions become nodes in one array, once per interpret() call,
// so the per-invocation work is a switch per node. Kernels with shared memory
// run a workgroup at a time with one slot array per invocation (see
// Machine::run_group).
#include "src/kernel/interpreter.h"

#include "src/base/check.h"

#include <kiln/error.h>
#include <kiln/float16.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <span>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

namespace kiln::kir {
namespace {

// One scalar; booleans are stored as u == 0 or 1. Every value is zeroed
// before it is set, so a 4-byte member read back as l is its zero extension.
union Value {
  float f;
  std::int32_t i;
  std::uint32_t u;
  std::int64_t l;
};

Value of_f32(float v) { Value x{.l = 0}; x.f = v; return x; }
Value of_i32(std::int32_t v) { Value x{.l = 0}; x.i = v; return x; }
Value of_u32(std::uint32_t v) { Value x{.l = 0}; x.u = v; return x; }
Value of_i64(std::int64_t v) { return {.l = v}; }
Value of_bool(bool v) { return of_u32(v ? 1u : 0u); }

// An f32 rounded to the nearest f16 (ties to even), as an f32: the value of
// f16 arithmetic (ir.h).
float to_f16(float v) { return f16_value(f16_bits(v)); }

// Wrap-around i32 arithmetic without signed overflow in C++.
std::int32_t wrap(std::uint32_t bits) { return static_cast<std::int32_t>(bits); }
std::uint32_t bits(std::int32_t v) { return static_cast<std::uint32_t>(v); }
std::int64_t wrap64(std::uint64_t bits) { return static_cast<std::int64_t>(bits); }
std::uint64_t bits64(std::int64_t v) { return static_cast<std::uint64_t>(v); }

// A buffer element as its buffer stores it (element_bytes of its type); a
// 16-bit element is read as the f32 it widens to and written rounded.
Value read_element(const std::byte* data, ScalarType type) {
  Value v{.l = 0};
  std::uint16_t half = 0;
  switch (type) {
    case ScalarType::boolean: v.u = std::to_integer<std::uint32_t>(*data) != 0 ? 1u : 0u; break;
    case ScalarType::f16: std::memcpy(&half, data, 2); v.f = f16_value(half); break;
    case ScalarType::bf16: std::memcpy(&half, data, 2); v.f = bf16_value(half); break;
    default: std::memcpy(&v, data, element_bytes(type));
  }
  return v;
}

void write_element(std::byte* data, ScalarType type, Value v) {
  std::uint16_t half = 0;
  switch (type) {
    case ScalarType::boolean: *data = std::byte{static_cast<unsigned char>(v.u != 0 ? 1 : 0)}; return;
    case ScalarType::f16: half = f16_bits(v.f); std::memcpy(data, &half, 2); return;
    case ScalarType::bf16: half = bf16_bits(v.f); std::memcpy(data, &half, 2); return;
    default: std::memcpy(data, &v, element_bytes(type));
  }
}

struct Node {
  ExprKind kind = ExprKind::constant;
  ScalarType type = ScalarType::f32;     // result type
  ScalarType operand = ScalarType::f32;  // type of args[0] (binary, cast, load index)
  UnaryOp unary = UnaryOp::neg;
  BinaryOp binary = BinaryOp::add;
  int ref = -1;  // var: slot; load: buffer; shared_load: shared array; subgroup_broadcast: source lane
  int broadcast = -1;  // subgroup_broadcast: its row of Machine::broadcast_values_
  int a = -1, b = -1, c = -1;
  Value constant{};
};

struct Op {
  StmtKind kind = StmtKind::declare;
  int slot = -1;  // declare, assign, loop variable
  std::vector<int> slots;  // load_vector: one per declared variable
  std::vector<int> values;  // store_vector: one node per stored value
  int buffer = -1;  // store, load_vector: buffer; shared_store: shared array
  // A barrier, a statement with a subgroup broadcast, or a loop or branch
  // containing one: the workgroup runs it together (Machine::exec_group).
  bool has_barrier = false;
  std::vector<int> broadcasts;  // subgroup_broadcast nodes of this statement's own expressions, innermost first
  int value = -1, index = -1, begin = -1, end = -1;
  std::int32_t step = 1;
  std::string var;  // loop variable, for messages; a fragment statement's fragment
  std::vector<Op> body, else_body;
  // Fragment statements: `slot` is the fragment written (or stored), `slots`
  // a multiply-add's a, b and c (indices into Kernel::fragments); `values`
  // a tile access's stride, rows and cols.
  bool shared_memory = false, column_major = false;
};

// Resolves names to slots and flattens expressions. The kernel is verified,
// so every name resolves and every type is consistent.
class Compiler {
 public:
  std::vector<Node> nodes;
  std::vector<Op> body;
  int num_slots = 0;
  int num_broadcasts = 0;

  explicit Compiler(const Kernel& kernel) : params_(kernel.params) {
    for (std::size_t f = 0; f < kernel.fragments.size(); ++f) fragments_[kernel.fragments[f].name] = static_cast<int>(f);
    body = block(kernel.body);
  }

 private:
  std::vector<Op> block(const std::vector<Stmt>& stmts) {
    std::vector<std::string> declared;
    std::vector<Op> ops;
    ops.reserve(stmts.size());
    for (const Stmt& s : stmts) {
      Op op;
      op.kind = s.kind;
      broadcasts_ = &op.broadcasts;
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
        case StmtKind::store_vector:
          op.buffer = s.buffer;
          op.index = expr(s.index);
          for (const Expr& value : s.values) op.values.push_back(expr(value));
          break;
        case StmtKind::branch:
          op.value = expr(s.value);
          op.body = block(s.body);
          op.else_body = block(s.else_body);
          break;
        case StmtKind::shared_store:
          op.buffer = s.buffer;
          op.index = expr(s.index);
          op.value = expr(s.value);
          break;
        case StmtKind::barrier: op.has_barrier = true; break;
        case StmtKind::fragment_fill:
        case StmtKind::fragment_load:
        case StmtKind::fragment_mma:
        case StmtKind::fragment_store:
          // A subgroup's statement: the workgroup runs it together.
          op.has_barrier = true;
          op.var = s.var;
          op.slot = fragments_.at(s.var);
          for (const std::string& name : s.vars) op.slots.push_back(fragments_.at(name));
          if (s.value) op.value = expr(s.value);
          if (s.index) op.index = expr(s.index);
          for (const Expr& value : s.values) op.values.push_back(expr(value));
          op.buffer = s.buffer;
          op.shared_memory = s.shared_memory;
          op.column_major = s.column_major;
          break;
      }
      broadcasts_ = nullptr;
      op.has_barrier = op.has_barrier || !op.broadcasts.empty();
      for (const Op& inner : op.body) op.has_barrier = op.has_barrier || inner.has_barrier;
      for (const Op& inner : op.else_body) op.has_barrier = op.has_barrier || inner.has_barrier;
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
        else if (src.type == ScalarType::i64)
          n.constant = of_i64(src.ivalue);
        else
          n.constant = of_u32(static_cast<std::uint32_t>(src.ivalue));
        break;
      case ExprKind::param:
        // A parameter is a constant of this instance (verify() checked the index).
        n.kind = ExprKind::constant;
        n.constant = of_i32(params_[static_cast<std::size_t>(src.param)]);
        break;
      case ExprKind::var: n.ref = slot_of(src.name); break;
      case ExprKind::load:
      case ExprKind::shared_load: n.ref = src.buffer; break;
      default: break;
    }
    if (src.args.size() > 0) n.a = expr(src.args[0]);
    if (src.args.size() > 1) n.b = expr(src.args[1]);
    if (src.args.size() > 2) n.c = expr(src.args[2]);
    if (src.kind == ExprKind::subgroup_broadcast) {
      n.ref = static_cast<int>(src.ivalue);
      n.broadcast = num_broadcasts++;
    }
    nodes.push_back(n);
    const int id = static_cast<int>(nodes.size()) - 1;
    // Operands come first, so inner broadcasts precede outer ones.
    if (src.kind == ExprKind::subgroup_broadcast && broadcasts_) broadcasts_->push_back(id);
    return id;
  }

  const std::vector<std::int32_t>& params_;
  std::unordered_map<std::string, int> slots_;
  std::unordered_map<std::string, int> fragments_;  // name -> index in Kernel::fragments
  std::vector<int>* broadcasts_ = nullptr;  // the statement being compiled
};

struct BufferView {
  std::byte* data = nullptr;
  std::int64_t count = 0;  // elements that loads and stores may touch (a texel buffer's whole texels)
};

// When a shared element was last written and read, for race detection:
// epochs count barriers (and workgroup starts), so two accesses in one epoch
// by different invocations are unordered.
struct SharedStamp {
  std::int64_t written = -1, read = -1;  // epochs
  std::int64_t writer = -1, reader = -1;  // local indices; reader kManyReaders: several
};
constexpr std::int64_t kManyReaders = -2;

class Machine {
 public:
  Machine(const Kernel& kernel, const Compiler& program, std::vector<BufferView> buffers)
      : kernel_(kernel),
        nodes_(program.nodes),
        buffers_(std::move(buffers)),
        num_slots_(program.num_slots),
        num_broadcasts_(program.num_broadcasts) {}

  void run(const std::vector<Op>& body) {
    if (kernel_.shared.empty() && !has_barrier(kernel_) && num_broadcasts_ == 0 && kernel_.fragments.empty()) {
      // Independent invocations, one after another.
      slot_storage_.assign(static_cast<std::size_t>(num_slots_), Value{});
      slots_ = slot_storage_.data();
      for (invocation_ = 0; invocation_ < kernel_.global_size; ++invocation_) exec(body);
      return;
    }
    run_groups(body);
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
    return static_cast<std::size_t>(i) * element_bytes(kernel_.buffers[static_cast<std::size_t>(buffer)].type);
  }

  // Byte offset of vector `index` (width: the vars or values of op) of op.buffer:
  // the whole vector must lie in the buffer.
  std::size_t vector_offset(const Op& op, Value index) const {
    const ScalarType type = nodes_[static_cast<std::size_t>(op.index)].type;
    const std::int64_t i = type == ScalarType::u32 ? std::int64_t{index.u} : std::int64_t{index.i};
    const bool is_store = op.kind == StmtKind::store_vector;
    const auto width = static_cast<std::int64_t>(is_store ? op.values.size() : op.slots.size());
    const std::int64_t count = buffers_[static_cast<std::size_t>(op.buffer)].count;
    if (i < 0 || (i + 1) * width > count)
      error(std::string(is_store ? "vector store" : "vector load") + " of width " + std::to_string(width) +
            (is_store ? " to " : " from ") + buffer_label(op.buffer) + " at vector index " +
            std::to_string(i) + " (elements " + std::to_string(i * width) + ".." + std::to_string(i * width + width - 1) +
            ") is out of bounds (size " + std::to_string(count) + " elements)");
    return static_cast<std::size_t>(i * width) * element_bytes(kernel_.buffers[static_cast<std::size_t>(op.buffer)].type);
  }

  // A workgroup at a time, each invocation with its own slots. Statements
  // between barriers run invocation by invocation (one valid interleaving);
  // a barrier ends an epoch; a loop containing barriers runs its iterations
  // for the whole group together. Shared arrays start uninitialised: reading
  // an element no invocation of the group wrote is an error, as are two
  // accesses of one element by different invocations, at least one a write,
  // with no barrier between them.
  void run_groups(const std::vector<Op>& body) {
    const std::int64_t wg = kernel_.workgroup_size;
    const std::int64_t groups = (kernel_.global_size + wg - 1) / wg;
    slot_storage_.assign(static_cast<std::size_t>(wg * num_slots_), Value{});
    broadcast_values_.assign(static_cast<std::size_t>(wg * num_broadcasts_), Value{});
    shared_.clear();
    stamps_.clear();
    for (const SharedArray& a : kernel_.shared) {
      shared_.emplace_back(static_cast<std::size_t>(a.count));
      stamps_.emplace_back(static_cast<std::size_t>(a.count));
    }
    // Every subgroup's fragments, zero at each workgroup's start (reading one
    // unwritten is not an error: hardware holds some value; kernels fill first).
    fragment_values_.clear();
    if (!kernel_.fragments.empty())
      for (std::int64_t sg = 0; sg < wg / kernel_.subgroup_size; ++sg)
        for (const Fragment& f : kernel_.fragments)
          fragment_values_.emplace_back(static_cast<std::size_t>(fragment_rows(f)) * fragment_cols(f), 0.0f);
    for (std::int64_t g = 0; g < groups; ++g) {
      group_base_ = g * wg;
      active_ = std::min(wg, kernel_.global_size - group_base_);
      group_first_epoch_ = ++epoch_;
      for (std::vector<float>& values : fragment_values_) std::fill(values.begin(), values.end(), 0.0f);
      exec_group(body);
    }
  }

  void select_invocation(std::int64_t local) {
    local_ = local;
    invocation_ = group_base_ + local;
    slots_ = slot_storage_.data() + local * num_slots_;
  }

  void exec_group(const std::vector<Op>& ops) {
    std::size_t i = 0;
    while (i < ops.size()) {
      if (!ops[i].has_barrier) {
        std::size_t j = i;
        while (j < ops.size() && !ops[j].has_barrier) ++j;
        const std::span<const Op> stretch(ops.data() + i, j - i);
        for (std::int64_t local = 0; local < active_; ++local) {
          select_invocation(local);
          exec(stretch);
        }
        i = j;
        continue;
      }
      const Op& op = ops[i++];
      if (op.kind == StmtKind::barrier) {
        ++epoch_;
        continue;
      }
      if (op.kind == StmtKind::branch) {
        // Only broadcasts sit in branches, whose conditions verify() made uniform.
        exec_group(uniform_value(op.value, "condition of a branch").u ? op.body : op.else_body);
        continue;
      }
      if (is_fragment_stmt(op.kind)) {
        run_fragment_stmt(op);
        continue;
      }
      if (op.kind != StmtKind::loop) {
        run_with_broadcasts(op);
        continue;
      }
      // verify() allows barriers only in loops with uniform bounds (and never in branches).
      const Value begin = uniform_value(op.begin, "begin of loop '" + op.var + "'");
      for_each_invocation([&] { slots_[op.slot] = begin; });
      for (;;) {
        const Value end = uniform_value(op.end, "end of loop '" + op.var + "'");
        select_invocation(0);
        const std::int32_t k = slots_[op.slot].i;
        if (k >= end.i) break;
        exec_group(op.body);
        if (k > std::numeric_limits<std::int32_t>::max() - op.step)
          error("loop variable '" + op.var + "' overflows i32 after " + std::to_string(k));
        for_each_invocation([&] { slots_[op.slot].i = k + op.step; });
      }
    }
  }

  // A statement with subgroup broadcasts, for the whole group in lockstep:
  // every lane first evaluates the operand of each broadcast (inner ones
  // first), then every lane runs the statement, each broadcast reading the
  // operand its source lane evaluated.
  void run_with_broadcasts(const Op& op) {
    for (int id : op.broadcasts) {
      const Node& n = nodes_[static_cast<std::size_t>(id)];
      for (std::int64_t local = 0; local < active_; ++local) {
        select_invocation(local);
        broadcast_values_[static_cast<std::size_t>(n.broadcast * kernel_.workgroup_size + local)] = eval(n.a);
      }
    }
    for (std::int64_t local = 0; local < active_; ++local) {
      select_invocation(local);
      exec(std::span<const Op>(&op, 1));
    }
  }

  // A fragment statement, once per subgroup: its operands must agree
  // between the subgroup's lanes; its memory accesses are the first lane's
  // (for race detection in shared memory).
  void run_fragment_stmt(const Op& op) {
    const std::int64_t size = kernel_.subgroup_size;
    for (std::int64_t first = 0; first < active_; first += size) {
      auto operand = [&](int id, const char* what) {
        select_invocation(first);
        const Value v = eval(id);
        for (std::int64_t lane = 1; lane < size && first + lane < active_; ++lane) {
          select_invocation(first + lane);
          if (eval(id).u != v.u)
            error(std::string("the ") + what + " of a fragment statement on '" + op.var +
                  "' differs between lanes of one subgroup");
        }
        select_invocation(first);
        return v;
      };
      const std::size_t base = static_cast<std::size_t>(first / size) * kernel_.fragments.size();
      auto values_of = [&](int fragment) -> std::vector<float>& {
        return fragment_values_[base + static_cast<std::size_t>(fragment)];
      };
      const Fragment& f = kernel_.fragments[static_cast<std::size_t>(op.slot)];
      const std::int64_t rows = fragment_rows(f), cols = fragment_cols(f);
      switch (op.kind) {
        case StmtKind::fragment_fill: {
          const float v = operand(op.value, "fill value").f;
          std::fill(values_of(op.slot).begin(), values_of(op.slot).end(), v);
          break;
        }
        case StmtKind::fragment_load:
        case StmtKind::fragment_store: {
          const bool store = op.kind == StmtKind::fragment_store;
          const std::int64_t index = operand(op.index, "index").i;
          const std::int64_t stride = operand(op.values[0], "stride").i;
          const std::int64_t valid_rows = std::clamp<std::int64_t>(operand(op.values[1], "rows").i, 0, rows);
          const std::int64_t valid_cols = std::clamp<std::int64_t>(operand(op.values[2], "cols").i, 0, cols);
          std::vector<float>& tile = values_of(op.slot);
          for (std::int64_t r = 0; r < rows; ++r)
            for (std::int64_t c = 0; c < cols; ++c) {
              float& element = tile[static_cast<std::size_t>(r * cols + c)];
              if (r >= valid_rows || c >= valid_cols) {
                if (!store) element = 0.0f;
                continue;
              }
              const std::int64_t at = index + (op.column_major ? c * stride + r : r * stride + c);
              if (at < std::numeric_limits<std::int32_t>::min() || at > std::numeric_limits<std::int32_t>::max())
                error("a fragment " + std::string(store ? "store" : "load") + " of '" + op.var + "' reaches element " +
                      std::to_string(at) + ", outside i32");
              const Value offset = of_i32(static_cast<std::int32_t>(at));
              if (store) {
                tile_write(op, offset, element);
              } else {
                const float v = tile_read(op, offset);
                element = f.role == FragmentRole::accumulator ? v : round_to_precision(v, f.precision);
              }
            }
          break;
        }
        case StmtKind::fragment_mma: {
          const Fragment& a = kernel_.fragments[static_cast<std::size_t>(op.slots[0])];
          const std::vector<float>& av = values_of(op.slots[0]);
          const std::vector<float>& bv = values_of(op.slots[1]);
          const std::vector<float>& cv = values_of(op.slots[2]);
          const std::size_t m = a.shape.m, n = a.shape.n, k = a.shape.k;
          std::vector<float> d(m * n);
          for (std::size_t i = 0; i < m; ++i)
            for (std::size_t j = 0; j < n; ++j) {
              // Products of TF32, f16 or bf16 values are exact in double.
              double sum = cv[i * n + j];
              for (std::size_t p = 0; p < k; ++p)
                sum += static_cast<double>(av[i * k + p]) * static_cast<double>(bv[p * n + j]);
              d[i * n + j] = static_cast<float>(sum);
            }
          values_of(op.slot) = std::move(d);
          break;
        }
        default: KILN_ASSERT(false && "not a fragment statement");
      }
    }
  }

  float tile_read(const Op& op, Value offset) {
    if (op.shared_memory) {
      const std::size_t i = shared_element("fragment load from", op.buffer, offset, ScalarType::i32);
      return shared_read(op.buffer, i).f;
    }
    const std::size_t at = element_offset("fragment load from", op.buffer, offset, ScalarType::i32);
    return read_element(buffers_[static_cast<std::size_t>(op.buffer)].data + at,
                        kernel_.buffers[static_cast<std::size_t>(op.buffer)].type)
        .f;
  }

  void tile_write(const Op& op, Value offset, float value) {
    if (op.shared_memory) {
      const std::size_t i = shared_element("fragment store to", op.buffer, offset, ScalarType::i32);
      shared_write(op.buffer, i, of_f32(value));
      return;
    }
    const std::size_t at = element_offset("fragment store to", op.buffer, offset, ScalarType::i32);
    write_element(buffers_[static_cast<std::size_t>(op.buffer)].data + at,
                  kernel_.buffers[static_cast<std::size_t>(op.buffer)].type, of_f32(value));
  }

  template <typename F>
  void for_each_invocation(F&& f) {
    for (std::int64_t local = 0; local < active_; ++local) {
      select_invocation(local);
      f();
    }
  }

  // The value of node `id`, which must be the same in every invocation of the group.
  Value uniform_value(int id, const std::string& what) {
    select_invocation(0);
    const Value first = eval(id);
    for (std::int64_t local = 1; local < active_; ++local) {
      select_invocation(local);
      if (eval(id).u != first.u)
        error("the " + what + " around a barrier differs between invocations of one workgroup");
    }
    return first;
  }

  std::size_t shared_element(const char* what, int array, Value index, ScalarType type) const {
    const std::int64_t i = type == ScalarType::u32 ? std::int64_t{index.u} : std::int64_t{index.i};
    const std::int64_t count = kernel_.shared[static_cast<std::size_t>(array)].count;
    if (i < 0 || i >= count)
      error(std::string(what) + " " + shared_label(array) + " at index " + std::to_string(i) +
            " is out of bounds (size " + std::to_string(count) + " elements)");
    return static_cast<std::size_t>(i);
  }

  std::string shared_label(int array) const {
    return "shared array '" + kernel_.shared[static_cast<std::size_t>(array)].name + "'";
  }

  Value shared_read(int array, std::size_t i) {
    SharedStamp& stamp = stamps_[static_cast<std::size_t>(array)][i];
    if (stamp.written < group_first_epoch_)
      error("reads element " + std::to_string(i) + " of " + shared_label(array) +
            " before any invocation of its workgroup wrote it");
    if (stamp.written == epoch_ && stamp.writer != local_)
      error("reads element " + std::to_string(i) + " of " + shared_label(array) + ", written by invocation " +
            std::to_string(stamp.writer) + " of its workgroup with no barrier between (a race)");
    if (stamp.read == epoch_ && stamp.reader != local_) {
      stamp.reader = kManyReaders;
    } else if (stamp.read != epoch_) {
      stamp.read = epoch_;
      stamp.reader = local_;
    }
    return shared_[static_cast<std::size_t>(array)][i];
  }

  void shared_write(int array, std::size_t i, Value v) {
    SharedStamp& stamp = stamps_[static_cast<std::size_t>(array)][i];
    if (stamp.written == epoch_ && stamp.writer != local_)
      error("writes element " + std::to_string(i) + " of " + shared_label(array) + ", also written by invocation " +
            std::to_string(stamp.writer) + " of its workgroup with no barrier between (a race)");
    if (stamp.read == epoch_ && stamp.reader != local_)
      error("writes element " + std::to_string(i) + " of " + shared_label(array) + ", read by " +
            (stamp.reader == kManyReaders ? std::string("other invocations")
                                          : "invocation " + std::to_string(stamp.reader)) +
            " of its workgroup with no barrier between (a race)");
    stamp.written = epoch_;
    stamp.writer = local_;
    shared_[static_cast<std::size_t>(array)][i] = v;
  }

  void exec(std::span<const Op> ops) {
    for (const Op& op : ops) {
      switch (op.kind) {
        case StmtKind::declare:
        case StmtKind::assign: slots_[static_cast<std::size_t>(op.slot)] = eval(op.value); break;
        case StmtKind::store: {
          const Value index = eval(op.index);
          const std::size_t offset =
              element_offset("store to", op.buffer, index, nodes_[static_cast<std::size_t>(op.index)].type);
          write_element(buffers_[static_cast<std::size_t>(op.buffer)].data + offset,
                        kernel_.buffers[static_cast<std::size_t>(op.buffer)].type, eval(op.value));
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
          const ScalarType type = kernel_.buffers[static_cast<std::size_t>(op.buffer)].type;
          for (std::size_t c = 0; c < op.slots.size(); ++c)
            slots_[static_cast<std::size_t>(op.slots[c])] = read_element(data + c * element_bytes(type), type);
          break;
        }
        case StmtKind::store_vector: {
          const std::size_t offset = vector_offset(op, eval(op.index));
          std::byte* data = buffers_[static_cast<std::size_t>(op.buffer)].data + offset;
          const ScalarType type = kernel_.buffers[static_cast<std::size_t>(op.buffer)].type;
          for (std::size_t c = 0; c < op.values.size(); ++c)
            write_element(data + c * element_bytes(type), type, eval(op.values[c]));
          break;
        }
        case StmtKind::branch: exec(eval(op.value).u ? op.body : op.else_body); break;
        case StmtKind::shared_store: {
          const Value index = eval(op.index);
          const std::size_t i =
              shared_element("store to", op.buffer, index, nodes_[static_cast<std::size_t>(op.index)].type);
          shared_write(op.buffer, i, eval(op.value));
          break;
        }
        case StmtKind::barrier:
        case StmtKind::fragment_fill:
        case StmtKind::fragment_load:
        case StmtKind::fragment_mma:
        case StmtKind::fragment_store:
          // Only run_groups() reaches these: a stretch never contains one.
          KILN_ASSERT(false && "a workgroup statement outside a workgroup run");
          break;
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
      case ExprKind::local_index: return of_i32(static_cast<std::int32_t>(invocation_ % kernel_.workgroup_size));
      case ExprKind::workgroup_index: return of_i32(static_cast<std::int32_t>(invocation_ / kernel_.workgroup_size));
      case ExprKind::subgroup_lane:
        return of_i32(static_cast<std::int32_t>(invocation_ % kernel_.workgroup_size % kernel_.subgroup_size));
      case ExprKind::subgroup_id:
        return of_i32(static_cast<std::int32_t>(invocation_ % kernel_.workgroup_size / kernel_.subgroup_size));
      case ExprKind::subgroup_broadcast: {
        // run_with_broadcasts() evaluated the operand in every lane.
        const std::int64_t source = local_ / kernel_.subgroup_size * kernel_.subgroup_size + n.ref;
        return broadcast_values_[static_cast<std::size_t>(n.broadcast * kernel_.workgroup_size + source)];
      }
      case ExprKind::shared_load: {
        const std::size_t i = shared_element("load from", n.ref, eval(n.a), n.operand);
        return shared_read(n.ref, i);
      }
      case ExprKind::load: {
        const std::size_t offset = element_offset("load from", n.ref, eval(n.a), n.operand);
        return read_element(buffers_[static_cast<std::size_t>(n.ref)].data + offset,
                            kernel_.buffers[static_cast<std::size_t>(n.ref)].type);
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
    } else if (n.type == ScalarType::i64) {
      switch (n.unary) {
        case UnaryOp::neg: return of_i64(wrap64(0u - bits64(a.l)));
        case UnaryOp::abs: return of_i64(a.l < 0 ? wrap64(0u - bits64(a.l)) : a.l);
        default: break;
      }
    } else if (n.type == ScalarType::f32) {
      return of_f32(unary_f32(n.unary, a.f));
    } else if (n.type == ScalarType::f16) {
      return of_f32(to_f16(unary_f32(n.unary, a.f)));  // computed in f32 and rounded once (ir.h)
    } else if (n.unary == UnaryOp::logical_not) {
      return of_bool(a.u == 0);
    }
    KILN_ASSERT(false && "unary op and type passed verify() but have no semantics");
    return {};
  }

  static float unary_f32(UnaryOp op, float x) {
    switch (op) {
      case UnaryOp::neg: return -x;
      case UnaryOp::exp: return std::exp(x);
      case UnaryOp::log: return std::log(x);
      case UnaryOp::sqrt: return std::sqrt(x);
      case UnaryOp::rsqrt: return 1.0f / std::sqrt(x);
      case UnaryOp::tanh: return std::tanh(x);
      case UnaryOp::erf: return std::erf(x);
      case UnaryOp::abs: return std::fabs(x);
      case UnaryOp::floor: return std::floor(x);
      case UnaryOp::ceil: return std::ceil(x);
      case UnaryOp::logical_not: break;
    }
    KILN_ASSERT(false && "float unary op without semantics");
    return 0;
  }

  Value binary(const Node& n, Value a, Value b) const {
    switch (n.operand) {
      case ScalarType::f32: return binary_f32(n.binary, a.f, b.f);
      case ScalarType::i32: return binary_signed<std::int32_t>(n.binary, a.i, b.i, "i32");
      case ScalarType::u32: return binary_u32(n.binary, a.u, b.u);
      case ScalarType::i64: return binary_signed<std::int64_t>(n.binary, a.l, b.l, "i64");
      case ScalarType::boolean:
        if (n.binary == BinaryOp::eq) return of_bool(a.u == b.u);
        if (n.binary == BinaryOp::ne) return of_bool(a.u != b.u);
        break;
      case ScalarType::f16: {
        // Computed in f32 and rounded once (ir.h); comparisons are exact.
        const Value wide = binary_f32(n.binary, a.f, b.f);
        return n.type == ScalarType::f16 ? of_f32(to_f16(wide.f)) : wide;
      }
      case ScalarType::bf16: break;  // a storage type: verify() rejects bf16 values
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

  // Signed integer ops (i32, i64) as two's complement: add/sub/mul wrap,
  // division truncates (the lowest value / -1 wraps to itself).
  template <class T>
  Value binary_signed(BinaryOp op, T a, T b, const char* type) const {
    using U = std::make_unsigned_t<T>;
    auto wrapped = [](U bits) { return static_cast<T>(bits); };
    auto value = [](T v) {
      if constexpr (sizeof(T) == 8) return of_i64(v);
      else return of_i32(v);
    };
    switch (op) {
      case BinaryOp::add: return value(wrapped(static_cast<U>(a) + static_cast<U>(b)));
      case BinaryOp::sub: return value(wrapped(static_cast<U>(a) - static_cast<U>(b)));
      case BinaryOp::mul: return value(wrapped(static_cast<U>(a) * static_cast<U>(b)));
      case BinaryOp::div:
        if (b == 0) error(std::string(type) + " division " + std::to_string(a) + " / 0");
        if (b == -1) return value(wrapped(U{0} - static_cast<U>(a)));
        return value(static_cast<T>(a / b));
      case BinaryOp::mod:
        if (a < 0 || b <= 0)
          error(std::string(type) + " mod " + std::to_string(a) + " % " + std::to_string(b) +
                " needs a >= 0 and b > 0");
        return value(static_cast<T>(a % b));
      case BinaryOp::min: return value(std::min(a, b));
      case BinaryOp::max: return value(std::max(a, b));
      case BinaryOp::lt: return of_bool(a < b);
      case BinaryOp::le: return of_bool(a <= b);
      case BinaryOp::gt: return of_bool(a > b);
      case BinaryOp::ge: return of_bool(a >= b);
      case BinaryOp::eq: return of_bool(a == b);
      case BinaryOp::ne: return of_bool(a != b);
      default: break;
    }
    KILN_ASSERT(false && "signed integer binary op without semantics");
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
        if (from == ScalarType::f32 || from == ScalarType::f16) return a;  // f16 values are exact f32 ones
        if (from == ScalarType::i32) return of_f32(static_cast<float>(a.i));
        if (from == ScalarType::u32) return of_f32(static_cast<float>(a.u));
        if (from == ScalarType::i64) return of_f32(static_cast<float>(a.l));
        return of_f32(a.u ? 1.0f : 0.0f);
      case ScalarType::i32:
        if (from == ScalarType::f32)
          return of_i32(static_cast<std::int32_t>(checked_trunc(a.f, "i32", -2147483648.0, 2147483648.0)));
        if (from == ScalarType::boolean) return of_i32(a.u ? 1 : 0);
        if (from == ScalarType::i64) return of_i32(wrap(static_cast<std::uint32_t>(bits64(a.l))));  // the low bits
        return of_i32(wrap(a.u));  // i32 or u32: same bits
      case ScalarType::i64:
        if (from == ScalarType::f32)
          return of_i64(static_cast<std::int64_t>(checked_trunc(a.f, "i64", -9223372036854775808.0, 9223372036854775808.0)));
        if (from == ScalarType::i32) return of_i64(a.i);
        if (from == ScalarType::u32) return of_i64(a.u);
        if (from == ScalarType::boolean) return of_i64(a.u ? 1 : 0);
        return a;
      case ScalarType::u32:
        if (from == ScalarType::f32)
          return of_u32(static_cast<std::uint32_t>(checked_trunc(a.f, "u32", 0.0, 4294967296.0)));
        if (from == ScalarType::boolean) return of_u32(a.u ? 1u : 0u);
        if (from == ScalarType::i64) return of_u32(static_cast<std::uint32_t>(bits64(a.l)));
        return of_u32(a.u);
      case ScalarType::boolean:
        if (from == ScalarType::f32) return of_bool(a.f != 0.0f);
        if (from == ScalarType::i64) return of_bool(a.l != 0);
        return of_bool(a.u != 0);
      case ScalarType::f16: return of_f32(to_f16(a.f));  // verify() allows only f32 (or f16) operands
      case ScalarType::bf16: break;                       // a storage type: verify() rejects bf16 values
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
  int num_slots_ = 0;
  int num_broadcasts_ = 0;
  std::vector<Value> broadcast_values_;  // per broadcast node, per local index: its operand there
  std::vector<Value> slot_storage_;  // one slot array, or one per invocation of a workgroup
  Value* slots_ = nullptr;           // the running invocation's slots
  std::int64_t invocation_ = 0;
  // Workgroup runs (kernels with shared arrays).
  std::int64_t group_base_ = 0, active_ = 0, local_ = 0;
  std::int64_t epoch_ = 0, group_first_epoch_ = 0;
  std::vector<std::vector<Value>> shared_;
  std::vector<std::vector<SharedStamp>> stamps_;
  std::vector<std::vector<float>> fragment_values_;  // [subgroup * fragments + fragment], row-major
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
    const std::size_t bytes = element_bytes(kernel.buffers[i].type);
    if (buffers[i].size() % bytes != 0)
      throw_error(ErrorKind::Internal, "kernel '" + kernel.name + "': buffer " + std::to_string(i) + " '" +
                                           kernel.buffers[i].name + "' has " + std::to_string(buffers[i].size()) +
                                           " bytes, not a whole number of " + scalar_type_name(kernel.buffers[i].type) +
                                           " elements");
    // A width-4 texel buffer reads whole texels only: the view ends at the last one.
    const auto count = static_cast<std::int64_t>(buffers[i].size() / bytes);
    const std::int64_t width = std::max<std::int64_t>(kernel.buffers[i].texel_width, 1);
    views.push_back({buffers[i].data(), count / width * width});
  }
  const Compiler program(kernel);
  Machine(kernel, program, std::move(views)).run(program.body);
}

}  // namespace kiln::kir
