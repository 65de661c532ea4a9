// Matrix fragments of the kernel IR: declarations, statement helpers and the
// rounding of multiply inputs (the rules are at the top of ir.h).
#include "src/kernel/ir.h"
#include "src/kernel/type_rules.h"

#include <kiln/float16.h>

#include <bit>
#include <cmath>
#include <cstdint>
#include <string>

namespace kiln::kir {

const char* fragment_role_name(FragmentRole role) {
  switch (role) {
    case FragmentRole::a: return "a";
    case FragmentRole::b: return "b";
    case FragmentRole::accumulator: return "accumulator";
  }
  return "?";
}

const char* matrix_precision_name(MatrixPrecision precision) {
  switch (precision) {
    case MatrixPrecision::tf32: return "tf32";
    case MatrixPrecision::f16: return "f16";
    case MatrixPrecision::bf16: return "bf16";
  }
  return "?";
}

std::optional<MatrixPrecision> matrix_precision_of(const std::string& name) {
  for (const MatrixPrecision p : {MatrixPrecision::tf32, MatrixPrecision::f16, MatrixPrecision::bf16})
    if (name == matrix_precision_name(p)) return p;
  return std::nullopt;
}

std::uint32_t fragment_rows(const Fragment& fragment) {
  return fragment.role == FragmentRole::b ? fragment.shape.k : fragment.shape.m;
}

std::uint32_t fragment_cols(const Fragment& fragment) {
  return fragment.role == FragmentRole::a ? fragment.shape.k : fragment.shape.n;
}

float round_to_precision(float value, MatrixPrecision precision) {
  switch (precision) {
    case MatrixPrecision::f16: return f16_value(f16_bits(value));
    case MatrixPrecision::bf16: return bf16_value(bf16_bits(value));
    case MatrixPrecision::tf32: {
      // TF32 keeps f32's exponent and 10 of its 23 mantissa bits. Adding half
      // of the dropped part's unit rounds ties away from zero (the magnitude
      // grows); a carry moves into the exponent, or to infinity, correctly.
      if (std::isnan(value)) return value;
      std::uint32_t bits = std::bit_cast<std::uint32_t>(value);
      if ((bits & 0x7f800000u) == 0x7f800000u) return value;  // infinity
      bits = (bits + 0x1000u) & 0xffffe000u;
      return std::bit_cast<float>(bits);
    }
  }
  return value;
}

Frag Kernel::add_fragment(const std::string& fragment_name, FragmentRole role, FragmentShape shape,
                          MatrixPrecision precision) {
  if (!is_identifier(fragment_name))
    fail("kernel '" + name + "': fragment name '" + fragment_name + "' is not an identifier");
  for (const Fragment& f : fragments)
    if (f.name == fragment_name) fail("kernel '" + name + "': duplicate fragment name '" + fragment_name + "'");
  fragments.push_back({fragment_name, role, shape, precision});
  return Frag{static_cast<int>(fragments.size()) - 1, fragment_name};
}

bool is_fragment_stmt(StmtKind kind) {
  return kind == StmtKind::fragment_fill || kind == StmtKind::fragment_load || kind == StmtKind::fragment_mma ||
         kind == StmtKind::fragment_store;
}

namespace {

bool stmts_use_fragments(const std::vector<Stmt>& stmts) {
  for (const Stmt& s : stmts)
    if (is_fragment_stmt(s.kind) || stmts_use_fragments(s.body) || stmts_use_fragments(s.else_body)) return true;
  return false;
}

bool stmts_move_fragments_through_buffers(const std::vector<Stmt>& stmts) {
  for (const Stmt& s : stmts)
    if (((s.kind == StmtKind::fragment_load || s.kind == StmtKind::fragment_store) && !s.shared_memory) ||
        stmts_move_fragments_through_buffers(s.body) || stmts_move_fragments_through_buffers(s.else_body))
      return true;
  return false;
}

void check_handle(const Frag& f, const char* what) {
  if (f.index < 0 || f.name.empty()) fail(std::string("kir: ") + what + " is an invalid fragment handle");
}

void check_i32(const Expr& e, const std::string& what) {
  if (!e) fail("kir: " + what + " is a null expression");
  if (e.type() != ScalarType::i32)
    fail("kir: " + what + " must be i32, got " + scalar_type_name(e.type()));
}

Stmt tile_access(StmtKind kind, const Frag& fragment, int target, bool shared_memory, Expr index, Expr stride,
                 Expr rows, Expr cols, bool column_major) {
  const char* what = kind == StmtKind::fragment_load ? "fragment load" : "fragment store";
  check_handle(fragment, what);
  if (target < 0) fail(std::string("kir: ") + what + " of an invalid " + (shared_memory ? "shared array" : "buffer") +
                       " handle");
  check_i32(index, std::string(what) + " index");
  check_i32(stride, std::string(what) + " stride");
  check_i32(rows, std::string(what) + " rows");
  check_i32(cols, std::string(what) + " cols");
  Stmt s{};
  s.kind = kind;
  s.var = fragment.name;
  s.buffer = target;
  s.shared_memory = shared_memory;
  s.column_major = column_major;
  s.index = std::move(index);
  s.values = {std::move(stride), std::move(rows), std::move(cols)};
  return s;
}

}  // namespace

bool uses_fragments(const Kernel& kernel) { return stmts_use_fragments(kernel.body); }

bool fragments_touch_buffers(const Kernel& kernel) { return stmts_move_fragments_through_buffers(kernel.body); }

Stmt fragment_fill(Frag accumulator, Expr value) {
  check_handle(accumulator, "fragment fill");
  if (!value) fail("kir: fragment fill value is a null expression");
  if (value.type() != ScalarType::f32)
    fail(std::string("kir: fragment fill value must be f32, got ") + scalar_type_name(value.type()));
  Stmt s{};
  s.kind = StmtKind::fragment_fill;
  s.var = accumulator.name;
  s.value = std::move(value);
  return s;
}

Stmt fragment_load(Frag fragment, Buf buffer, Expr index, Expr stride, Expr rows, Expr cols, bool column_major) {
  return tile_access(StmtKind::fragment_load, fragment, buffer.index, false, std::move(index), std::move(stride),
                     std::move(rows), std::move(cols), column_major);
}

Stmt fragment_load(Frag fragment, Shared array, Expr index, Expr stride, Expr rows, Expr cols, bool column_major) {
  return tile_access(StmtKind::fragment_load, fragment, array.index, true, std::move(index), std::move(stride),
                     std::move(rows), std::move(cols), column_major);
}

Stmt fragment_mma(Frag d, Frag a, Frag b, Frag c) {
  for (const Frag* f : {&d, &a, &b, &c}) check_handle(*f, "fragment multiply-add");
  Stmt s{};
  s.kind = StmtKind::fragment_mma;
  s.var = d.name;
  s.vars = {a.name, b.name, c.name};
  return s;
}

Stmt fragment_store(Frag accumulator, Buf buffer, Expr index, Expr stride, Expr rows, Expr cols, bool column_major) {
  return tile_access(StmtKind::fragment_store, accumulator, buffer.index, false, std::move(index), std::move(stride),
                     std::move(rows), std::move(cols), column_major);
}

Stmt fragment_store(Frag accumulator, Shared array, Expr index, Expr stride, Expr rows, Expr cols,
                    bool column_major) {
  return tile_access(StmtKind::fragment_store, accumulator, array.index, true, std::move(index), std::move(stride),
                     std::move(rows), std::move(cols), column_major);
}

}  // namespace kiln::kir
