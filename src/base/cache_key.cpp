#include "src/base/cache_key.h"

#include <cstdio>

namespace kiln::base {

std::string hex_digest(XXH128_hash_t digest) {
  char text[33];
  std::snprintf(text, sizeof text, "%016llx%016llx", static_cast<unsigned long long>(digest.high64),
                static_cast<unsigned long long>(digest.low64));
  return text;
}

void append_key_field(std::string& key, const std::string& field) {
  key += std::to_string(field.size());
  key += ':';
  key += field;
}

}  // namespace kiln::base
