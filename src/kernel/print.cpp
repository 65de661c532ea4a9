// print(): the kernel IR's target-neutral text form, stable enough to hash
// (parameterise.cpp keys kernel structure on it) and to diff.
#include "src/base/check.h"
#include "src/kernel/ir.h"

#include <kiln/error.h>

#include <charconv>
#include <cmath>
#include <string>
#include <system_error>

namespace kiln::kir {

namespace {

// Shortest text that reads back as the same f32, always with a '.' or an
// exponent so it cannot be mistaken for an integer.
std::string float_text(double value) {
  const float f = static_cast<float>(value);
  if (std::isnan(f)) return "nan";
  if (std::isinf(f)) return f < 0 ? "-inf" : "inf";
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, f);
  KILN_ASSERT(ec == std::errc());
  std::string text(buf, end);
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  return text;
}


const char* access_name(Access access) {
  switch (access) {
    case Access::read: return "read";
    case Access::write: return "write";
    case Access::read_write: return "read_write";
  }
  return "?";
}

class Printer {
 public:
  explicit Printer(const Kernel& kernel) : kernel_(kernel) {}

  std::string run() {
    // Parameter values are per instance, not part of the kernel's text.
    const std::string global_size = kernel_.global_size_param
                                        ? "param(" + std::to_string(*kernel_.global_size_param) + ")"
                                        : std::to_string(kernel_.global_size);
    out_ += "kernel " + kernel_.name + " (global_size " + global_size + ", workgroup_size " +
            std::to_string(kernel_.workgroup_size);
    if (!kernel_.params.empty()) out_ += ", params " + std::to_string(kernel_.params.size());
    if (kernel_.subgroup_size != 0) out_ += ", subgroup_size " + std::to_string(kernel_.subgroup_size);
    out_ += ")\n";
    for (std::size_t i = 0; i < kernel_.buffers.size(); ++i) {
      const BufferParam& b = kernel_.buffers[i];
      out_ += "buffer " + std::to_string(i) + " " + b.name + ": " + scalar_type_name(b.type) + " " +
              access_name(b.access) + (b.texel_width ? " texel" + std::to_string(b.texel_width) : "") + "\n";
    }
    for (std::size_t i = 0; i < kernel_.shared.size(); ++i) {
      const SharedArray& a = kernel_.shared[i];
      out_ += "shared " + std::to_string(i) + " " + a.name + ": " + scalar_type_name(a.type) + "[" +
              std::to_string(a.count) + "]\n";
    }
    for (std::size_t i = 0; i < kernel_.fragments.size(); ++i) {
      const Fragment& f = kernel_.fragments[i];
      out_ += "fragment " + std::to_string(i) + " " + f.name + ": " + fragment_role_name(f.role) + " " +
              std::to_string(f.shape.m) + "x" + std::to_string(f.shape.n) + "x" + std::to_string(f.shape.k) +
              (f.role == FragmentRole::accumulator ? std::string(" f32") : std::string(" ") + matrix_precision_name(f.precision)) +
              "\n";
    }
    block(kernel_.body, 0);
    return std::move(out_);
  }

 private:
  std::string buffer_name(int index) const {
    if (index >= 0 && static_cast<std::size_t>(index) < kernel_.buffers.size())
      return kernel_.buffers[static_cast<std::size_t>(index)].name;
    return "buffer#" + std::to_string(index);  // print() also serves to debug malformed kernels
  }

  // A fragment load's or store's tile: "NAME.tile[INDEX, stride S, rows R, cols C]".
  void tile(const Stmt& s) {
    out_ += (s.shared_memory ? "shared " + shared_name(s.buffer) : buffer_name(s.buffer)) +
            (s.column_major ? ".tile_col_major[" : ".tile[");
    expr(s.index);
    const char* labels[] = {", stride ", ", rows ", ", cols "};
    for (std::size_t i = 0; i < s.values.size() && i < 3; ++i) {
      out_ += labels[i];
      expr(s.values[i]);
    }
    out_ += "]";
  }

  std::string shared_name(int index) const {
    if (index >= 0 && static_cast<std::size_t>(index) < kernel_.shared.size())
      return kernel_.shared[static_cast<std::size_t>(index)].name;
    return "shared#" + std::to_string(index);
  }

  void block(const std::vector<Stmt>& stmts, int depth) {
    for (const Stmt& s : stmts) statement(s, depth);
  }

  void statement(const Stmt& s, int depth) {
    const std::string indent(static_cast<std::size_t>(depth) * 2, ' ');
    out_ += indent;
    switch (s.kind) {
      case StmtKind::declare:
        out_ += std::string(scalar_type_name(s.type)) + " " + s.var + " = ";
        expr(s.value);
        break;
      case StmtKind::assign:
        out_ += s.var + " = ";
        expr(s.value);
        break;
      case StmtKind::store:
        out_ += buffer_name(s.buffer) + "[";
        expr(s.index);
        out_ += "] = ";
        expr(s.value);
        break;
      case StmtKind::loop:
        out_ += "for (i32 " + s.var + " = ";
        expr(s.begin);
        out_ += "; " + s.var + " < ";
        expr(s.end);
        out_ += "; " + s.var + " += " + std::to_string(s.step) + ") {\n";
        block(s.body, depth + 1);
        out_ += indent + "}";
        break;
      case StmtKind::load_vector:
        out_ += std::string(scalar_type_name(s.type)) + " ";
        for (std::size_t c = 0; c < s.vars.size(); ++c) out_ += (c ? ", " : "") + s.vars[c];
        out_ += " = " + buffer_name(s.buffer) + ".vec" + std::to_string(s.vars.size()) + "[";
        expr(s.index);
        out_ += "]";
        break;
      case StmtKind::store_vector:
        out_ += buffer_name(s.buffer) + ".vec" + std::to_string(s.values.size()) + "[";
        expr(s.index);
        out_ += "] = (";
        for (std::size_t c = 0; c < s.values.size(); ++c) {
          if (c) out_ += ", ";
          expr(s.values[c]);
        }
        out_ += ")";
        break;
      case StmtKind::shared_store:
        out_ += "shared " + shared_name(s.buffer) + "[";
        expr(s.index);
        out_ += "] = ";
        expr(s.value);
        break;
      case StmtKind::barrier: out_ += "barrier()"; break;
      case StmtKind::fragment_fill:
        out_ += "fragment " + s.var + " = fill(";
        expr(s.value);
        out_ += ")";
        break;
      case StmtKind::fragment_load:
        out_ += "fragment " + s.var + " = ";
        tile(s);
        break;
      case StmtKind::fragment_mma:
        out_ += "fragment " + s.var + " = mma(";
        for (std::size_t i = 0; i < s.vars.size(); ++i) out_ += (i ? ", " : "") + s.vars[i];
        out_ += ")";
        break;
      case StmtKind::fragment_store:
        tile(s);
        out_ += " = fragment " + s.var;
        break;
      case StmtKind::branch:
        out_ += "if (";
        expr(s.value);
        out_ += ") {\n";
        block(s.body, depth + 1);
        if (!s.else_body.empty()) {
          out_ += indent + "} else {\n";
          block(s.else_body, depth + 1);
        }
        out_ += indent + "}";
        break;
    }
    out_ += "\n";
  }

  void expr(const Expr& e) {
    if (!e) {
      out_ += "<null>";
      return;
    }
    const ExprNode& n = *e;
    auto arg = [&](std::size_t i) { expr(i < n.args.size() ? n.args[i] : Expr()); };
    switch (n.kind) {
      case ExprKind::constant:
        switch (n.type) {
          case ScalarType::f32: out_ += float_text(n.fvalue); break;
          case ScalarType::i32: out_ += std::to_string(n.ivalue); break;
          case ScalarType::u32: out_ += std::to_string(n.ivalue) + "u"; break;
          case ScalarType::boolean: out_ += n.ivalue ? "true" : "false"; break;
          case ScalarType::i64: out_ += std::to_string(n.ivalue) + "l"; break;
          case ScalarType::f16:
          case ScalarType::bf16: out_ += "?"; break;  // verify() rejects 16-bit values
        }
        return;
      case ExprKind::var: out_ += n.name; return;
      case ExprKind::global_index: out_ += "global_index()"; return;
      case ExprKind::param: out_ += "param(" + std::to_string(n.param) + ")"; return;
      case ExprKind::local_index: out_ += "local_index()"; return;
      case ExprKind::workgroup_index: out_ += "workgroup_index()"; return;
      case ExprKind::subgroup_lane: out_ += "subgroup_lane()"; return;
      case ExprKind::subgroup_id: out_ += "subgroup_id()"; return;
      case ExprKind::subgroup_broadcast:
        out_ += "subgroup_broadcast(";
        arg(0);
        out_ += ", lane " + std::to_string(n.ivalue) + ")";
        return;
      case ExprKind::shared_load:
        out_ += "shared " + shared_name(n.buffer) + "[";
        arg(0);
        out_ += "]";
        return;
      case ExprKind::load:
        out_ += buffer_name(n.buffer) + "[";
        arg(0);
        out_ += "]";
        return;
      case ExprKind::unary:
        out_ += std::string(unary_op_name(n.unary)) + "(";
        arg(0);
        out_ += ")";
        return;
      case ExprKind::binary:
        if (const char* symbol = infix_symbol(n.binary)) {
          out_ += "(";
          arg(0);
          out_ += std::string(" ") + symbol + " ";
          arg(1);
          out_ += ")";
        } else {
          out_ += std::string(binary_op_name(n.binary)) + "(";
          arg(0);
          out_ += ", ";
          arg(1);
          out_ += ")";
        }
        return;
      case ExprKind::select:
        out_ += "select(";
        arg(0);
        out_ += ", ";
        arg(1);
        out_ += ", ";
        arg(2);
        out_ += ")";
        return;
      case ExprKind::cast:
        out_ += std::string(scalar_type_name(n.type)) + "(";
        arg(0);
        out_ += ")";
        return;
    }
    out_ += "<unknown expression kind " + std::to_string(static_cast<int>(n.kind)) + ">";
  }

  const Kernel& kernel_;
  std::string out_;
};

}  // namespace

std::string print(const Kernel& kernel) { return Printer(kernel).run(); }

}  // namespace kiln::kir
