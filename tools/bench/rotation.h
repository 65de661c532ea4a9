// The order `kiln bench` calls the modes of one model and batch in, round by
// round: every mode once per round, the first place moving on by one each
// round, so over any n consecutive rounds each of n modes is called once in
// each position (first, second, ...). Header-only: the tests use it directly.
#pragma once

#include <cstddef>
#include <vector>

namespace kiln::tools::bench {

// Positions 0..count-1 in round `round`'s calling order.
inline std::vector<std::size_t> rotated_order(std::size_t count, std::size_t round) {
  std::vector<std::size_t> order(count);
  for (std::size_t k = 0; k < count; ++k) order[k] = (round + k) % count;
  return order;
}

}  // namespace kiln::tools::bench
