// Read-only traversals of kernel IR bodies and naming helpers, shared by the
// fusion rewrites (epilogue.cpp, prologue.cpp).
#pragma once

#include "src/kernel/ir.h"

#include <algorithm>
#include <functional>
#include <string>
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
    for (const kir::Expr& e : s.values) for_each_expr(e, on_expr);
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

// Fused kernel names stop growing here; the cache keys on source, not names.
inline constexpr std::size_t kMaxKernelName = 80;

// `base`, or `base_2`, `base_3`, ... : the first name no buffer in `buffers` has.
inline std::string unique_buffer_name(const std::vector<kir::BufferParam>& buffers, const std::string& base) {
  auto taken = [&](const std::string& name) {
    return std::any_of(buffers.begin(), buffers.end(), [&](const kir::BufferParam& b) { return b.name == name; });
  };
  if (!taken(base)) return base;
  for (int n = 2;; ++n)
    if (std::string name = base + "_" + std::to_string(n); !taken(name)) return name;
}

}  // namespace kiln::fuse
