// Measuring: every model x batch x mode of a Config on one backend and device.
#pragma once

#include "results.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace kiln::tools::bench {

// Called as the run goes, for a progress display. Any may be empty.
struct Observer {
  std::function<void(const Cell&)> cell_started;  // building and compiling it; identity fields (model, batch, mode) filled
  std::function<void(const std::vector<const Cell*>&)> rounds_started;  // timing these cells (one model and batch) together
  std::function<void(int done, int total)> call_done;  // calls of those cells, all modes together
  std::function<void(const Cell&)> cell_finished;
};


// Throws Error(InvalidArgument) naming the first bad value: an unknown model
// or mode, a repeated one, batch <= 0, iters <= 0, warmup < 0, an image
// size out of range, tolerance <= 0. Throws Error(Io) if the image is missing.
void validate(const Config& config);

// Which device `config` runs on, with the run's settings. Throws
// Error(NotFound) for an unknown backend or device and
// Error(DeviceUnavailable) with the backend's reason when it cannot run here.
Metadata describe_run(const Config& config);

// Runs every cell, models and batches in order. Per model and batch, every
// mode's model is built (eager first: its output is the reference) and
// compiled, and all stay alive while they are timed together: one untimed
// first call each, --warmup untimed rounds, then --iters timed rounds, each
// round calling every mode once in an order that rotates by one per round,
// so drift and process state weigh on every mode alike. A cell that fails is
// recorded with its message and the run goes on; speed-ups are filled in at
// the end.
Results run_benchmark(const Config& config, const Observer& observer = {});

}  // namespace kiln::tools::bench
