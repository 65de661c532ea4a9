// Weight rewrites remembered across the plans of one model: the shape sets
// of a model with symbolic dims hold the same weights, and a pass such as
// Winograd's would transform each again per shape set, holding one copy
// per plan. With a memo they compute each once and share it.
#pragma once

#include "graph/ir.h"

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <tuple>

namespace kiln::graph::passes {

class WeightMemo {
 public:
  // `compute()` (the rewrite named `rewrite` of `weight`), or what it gave
  // before for a weight of the same contents (an XXH3-128 digest of its
  // bytes), shape and type. Keyed by contents, not storage: a weight an
  // earlier pass rewrote anew for each plan (a folded batch norm, a type
  // conversion) still finds its entry, and the memo holds no weight but
  // the rewritten ones. Thread-safe.
  Tensor get(std::string_view rewrite, const Tensor& weight, const std::function<Tensor()>& compute);
  std::size_t size() const;

 private:
  using Key = std::tuple<std::string, std::uint64_t, std::uint64_t, Shape, DType>;
  mutable std::mutex mutex_;
  std::map<Key, Tensor> rewritten_;
};

}  // namespace kiln::graph::passes
