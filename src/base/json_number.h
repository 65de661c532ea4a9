// Numbers read from JSON or CBOR that a forger may have written (kiln's
// metadata in .kiln files and caches, tuning sites): nlohmann converts a
// float to an integer type, and an integer to a narrower one, without a
// check, and a float out of the target's range converts with undefined
// behaviour. These check first and throw nlohmann's type_error (which the
// readers already turn into a Corrupt error naming the file).
#pragma once

#include <nlohmann/json.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

namespace kiln::base {

template <class T>
T json_number(const nlohmann::json& value) {
  auto refuse = [&](const char* expected) -> T {
    throw nlohmann::json::type_error::create(
        302, std::string("type must be ") + expected + ", but is " + value.dump().substr(0, 40), &value);
  };
  if constexpr (std::is_same_v<T, bool>) {
    if (!value.is_boolean()) return refuse("a boolean");
    return value.get<bool>();
  } else if constexpr (std::is_integral_v<T>) {
    if (value.is_number_unsigned()) {
      const std::uint64_t v = value.get<std::uint64_t>();
      if (v > static_cast<std::uint64_t>(std::numeric_limits<T>::max())) return refuse("an integer in range");
      return static_cast<T>(v);
    }
    if (!value.is_number_integer()) return refuse("an integer");
    const std::int64_t v = value.get<std::int64_t>();
    if constexpr (std::is_signed_v<T>) {
      if (v < std::numeric_limits<T>::min() || v > std::numeric_limits<T>::max()) return refuse("an integer in range");
    } else {
      if (v < 0 || static_cast<std::uint64_t>(v) > static_cast<std::uint64_t>(std::numeric_limits<T>::max()))
        return refuse("an integer in range");
    }
    return static_cast<T>(v);
  } else {
    static_assert(std::is_floating_point_v<T>);
    if (!value.is_number()) return refuse("a number");
    return value.get<T>();
  }
}

// `out` = json_number<T>(value), T being out's type (nlohmann's get_to, checked).
template <class T>
void json_number_into(const nlohmann::json& value, T& out) {
  out = json_number<T>(value);
}

template <class T>
std::vector<T> json_numbers(const nlohmann::json& value) {
  if (!value.is_array())
    throw nlohmann::json::type_error::create(302, "type must be an array, but is " + std::string(value.type_name()),
                                             &value);
  std::vector<T> out;
  out.reserve(value.size());
  for (const nlohmann::json& element : value) out.push_back(json_number<T>(element));
  return out;
}

template <class T, std::size_t N>
std::array<T, N> json_number_array(const nlohmann::json& value) {
  if (!value.is_array() || value.size() != N)
    throw nlohmann::json::type_error::create(
        302, "type must be an array of " + std::to_string(N) + " numbers, but is " + value.dump().substr(0, 40),
        &value);
  std::array<T, N> out{};
  for (std::size_t i = 0; i < N; ++i) out[i] = json_number<T>(value[i]);
  return out;
}

}  // namespace kiln::base
