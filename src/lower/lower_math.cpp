// Lowerings of the math op family (issue: Models); filled in by its author.
#include "src/lower/lowerings.h"

namespace kiln::lower {

std::span<const OpLowering> math_lowerings() { return {}; }

}  // namespace kiln::lower
