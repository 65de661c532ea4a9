// Seeded weight initialisation for the built-in models.
//
// Same seed, same weights, bit for bit, on every platform: the generator is
// splitmix64 and the float math uses only IEEE-754 operations that are exactly
// rounded (+, -, *, /, sqrt), never libm's log/cos (whose last bits vary
// between C libraries) nor std::normal_distribution (whose algorithm does).
#pragma once

#include <kiln/tensor.h>

#include <cstdint>
#include <string_view>

namespace kiln::models::init {

class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}
  std::uint64_t next_u64();   // splitmix64
  double uniform();           // [0, 1), 53 random bits
  double normal();            // N(0, 1), Marsaglia's polar form of Box-Muller

 private:
  std::uint64_t state_;
  double spare_ = 0.0;
  bool has_spare_ = false;
};

// Natural logarithm of x > 0 from frexp and a fixed polynomial: portable to
// the last bit, unlike std::log.
double portable_log(double x);

// The seed of one tensor's stream: each named tensor draws from its own
// stream, so adding a layer does not change the weights of the others.
std::uint64_t tensor_seed(std::uint64_t model_seed, std::string_view tensor_name);

// f32 tensors filled from Rng(seed).
Tensor normal(Shape shape, double mean, double stddev, std::uint64_t seed);
Tensor uniform(Shape shape, double low, double high, std::uint64_t seed);

// torchvision's kaiming_normal_(mode="fan_out", nonlinearity="relu") for a
// conv weight [out, in/groups, kh, kw]: std = sqrt(2 / (out * kh * kw)).
Tensor kaiming_normal_fan_out(Shape shape, std::uint64_t seed);

}  // namespace kiln::models::init
