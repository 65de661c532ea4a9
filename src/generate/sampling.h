// The sampling rule's checks, shared by pick_token and the Generator (which
// checks a config before any work).
#pragma once

#include <kiln/generate.h>

namespace kiln::generation {

// Throws InvalidArgument for a negative temperature or top_k, or top_p outside (0, 1].
void check_sampling(const GenerationConfig& config);

}  // namespace kiln::generation
