// kiln::pick_token (include/kiln/generate.h): transformers' logits warpers
// (temperature, top-k, top-p) and a portable draw: SplitMix64 steps and
// 53-bit uniforms, so that a seed means the same tokens with any standard
// library.
#include "src/base/check.h"

#include <kiln/error.h>
#include <kiln/generate.h>

#include "src/generate/sampling.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace kiln {
namespace {

std::uint64_t splitmix64(std::uint64_t& state) {
  std::uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// A uniform double in [0, 1).
double uniform(std::uint64_t& state) { return static_cast<double>(splitmix64(state) >> 11) * 0x1.0p-53; }

}  // namespace

namespace generation {

void check_sampling(const GenerationConfig& config) {
  KILN_CHECK(config.temperature >= 0.0f, ErrorKind::InvalidArgument,
             "GenerationConfig::temperature " + std::to_string(config.temperature) + " is negative");
  KILN_CHECK(config.top_k >= 0, ErrorKind::InvalidArgument,
             "GenerationConfig::top_k " + std::to_string(config.top_k) + " is negative");
  KILN_CHECK(config.top_p > 0.0f && config.top_p <= 1.0f, ErrorKind::InvalidArgument,
             "GenerationConfig::top_p " + std::to_string(config.top_p) + " is outside (0, 1]");
}

}  // namespace generation

std::int64_t pick_token(std::span<const float> logits, const GenerationConfig& config, std::uint64_t& rng_state) {
  KILN_CHECK(!logits.empty(), ErrorKind::InvalidArgument, "pick_token: no logits");
  generation::check_sampling(config);
  if (config.temperature == 0.0f)  // greedy: the first of the largest, as torch.argmax
    return std::max_element(logits.begin(), logits.end()) - logits.begin();

  // Candidates by logit, largest first (ties: lower id first).
  std::vector<std::int64_t> order(logits.size());
  std::iota(order.begin(), order.end(), std::int64_t{0});
  std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) { return logits[a] > logits[b]; });
  std::size_t keep = order.size();
  if (config.top_k > 0) keep = std::min<std::size_t>(keep, static_cast<std::size_t>(config.top_k));
  // Softmax of logits / temperature over the kept candidates, in double.
  std::vector<double> probability(keep);
  const double top = static_cast<double>(logits[order[0]]) / config.temperature;
  double sum = 0.0;
  for (std::size_t i = 0; i < keep; ++i) {
    probability[i] = std::exp(static_cast<double>(logits[order[i]]) / config.temperature - top);
    sum += probability[i];
  }
  if (config.top_p < 1.0f) {
    // The smallest prefix whose probability reaches top_p (at least one token).
    double cumulative = 0.0;
    std::size_t prefix = 0;
    while (prefix < keep && cumulative < static_cast<double>(config.top_p) * sum) cumulative += probability[prefix++];
    keep = std::max<std::size_t>(prefix, 1);
    sum = std::accumulate(probability.begin(), probability.begin() + static_cast<std::ptrdiff_t>(keep), 0.0);
  }
  double draw = uniform(rng_state) * sum;
  for (std::size_t i = 0; i < keep; ++i) {
    if (draw < probability[i]) return order[i];
    draw -= probability[i];
  }
  return order[keep - 1];  // rounding left the draw past the last
}

}  // namespace kiln
