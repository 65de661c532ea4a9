// An SVG bar chart of each compiled mode's speed-up over eager, per model
// and batch size, with eager's 1x marked.
#pragma once

#include "results.h"

#include <string>

namespace kiln::tools::bench {

// A standalone SVG document (valid XML; every text escaped). Cells without a
// speed-up are labelled with their status instead of a bar; wrong outputs
// are marked in red.
std::string speedup_chart_svg(const Results& results);

}  // namespace kiln::tools::bench
