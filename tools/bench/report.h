// `kiln bench` results as text: a markdown table in the reference
// benchmark's shape, CSV and JSON with one record per cell.
#pragma once

#include "results.h"

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace kiln::tools::bench {

// The geometric mean of a compiled mode's speed-ups over eager, over every
// model whose cell matched eager (mismatches and failures are left out).
struct SpeedupMean {
  std::string mode;
  std::optional<std::int64_t> batch;  // nullopt: over every batch size
  double geomean = 0;
  int cells = 0;
};
std::vector<SpeedupMean> speedup_geomeans(const Results& results);

// Header (device, backend, driver, iters, image, date, the command that
// reproduces it), one row per model and batch with each mode's mean time,
// speed-up, cold/warm compile and peak memory, the geometric means per mode
// and batch, then notes for every mismatched, failed or skipped cell.
std::string markdown_report(const Results& results);

// One line per cell after a header line; fields as in the JSON cells.
std::string csv_report(const Results& results);

// {"metadata": {...}, "cells": [...], "geomean_speedups": [...]}; times in ms.
std::string json_report(const Results& results);

}  // namespace kiln::tools::bench
