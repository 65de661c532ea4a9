// Building blocks of the disk caches' keys (kernels, plans): a key is the text
// of every field it depends on, and its file name the text's digest.
#pragma once

#include <xxhash.h>

#include <string>

namespace kiln::base {

// An XXH3-128 digest as 32 hex digits.
std::string hex_digest(XXH128_hash_t digest);

// Appends `field` to a key's text, length-prefixed so that no two different
// field lists give the same text.
void append_key_field(std::string& key, const std::string& field);

}  // namespace kiln::base
