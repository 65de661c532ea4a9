// Read-only traversals of kernel IR bodies, shared by the fusion rewrites.
#pragma once

#include "src/kernel/ir.h"

#include <functional>
#include <vector>

namespace kiln::fuse {

// Calls `fn` for `e` and every expression node below it.
inline void for_each_expr(const kir::Expr& e, const std::function<void(const kir::ExprNode&)>& fn) {
  if (!e) return;
  fn(*e);
  for (const kir::Expr& arg : e->args) for_each_expr(arg, fn);
}

// Calls `on_stmt` for every statement (nested ones too) and `on_expr` for
// every expression node they contain.
inline void walk(const std::vector<kir::Stmt>& body, const std::function<void(const kir::Stmt&)>& on_stmt,
                 const std::function<void(const kir::ExprNode&)>& on_expr) {
  for (const kir::Stmt& s : body) {
    on_stmt(s);
    for (const kir::Expr* e : {&s.value, &s.index, &s.begin, &s.end}) for_each_expr(*e, on_expr);
    walk(s.body, on_stmt, on_expr);
    walk(s.else_body, on_stmt, on_expr);
  }
}

// The names every declare, loop and vector load of `body` introduces.
inline std::vector<std::string> declared_names(const std::vector<kir::Stmt>& body) {
  std::vector<std::string> names;
  walk(
      body,
      [&](const kir::Stmt& s) {
        if (s.kind == kir::StmtKind::declare || s.kind == kir::StmtKind::loop) names.push_back(s.var);
        if (s.kind == kir::StmtKind::load_vector) names.insert(names.end(), s.vars.begin(), s.vars.end());
      },
      [](const kir::ExprNode&) {});
  return names;
}

}  // namespace kiln::fuse
