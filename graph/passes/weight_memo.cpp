#include "graph/passes/weight_memo.h"

#include <xxhash.h>

namespace kiln::graph::passes {

Tensor WeightMemo::get(std::string_view rewrite, const Tensor& weight, const std::function<Tensor()>& compute) {
  const std::span<const std::byte> bytes = weight.bytes();
  const XXH128_hash_t digest = XXH3_128bits(bytes.data(), bytes.size());
  Key key{std::string(rewrite), digest.high64, digest.low64, weight.shape(), weight.dtype()};
  {
    std::lock_guard lock(mutex_);
    if (auto it = rewritten_.find(key); it != rewritten_.end()) return it->second;
  }
  Tensor rewritten = compute();  // outside the lock: another plan's passes may compute it too
  std::lock_guard lock(mutex_);
  return rewritten_.try_emplace(std::move(key), std::move(rewritten)).first->second;
}

std::size_t WeightMemo::size() const {
  std::lock_guard lock(mutex_);
  return rewritten_.size();
}

}  // namespace kiln::graph::passes
