// Progress of a long `kiln bench` run on stderr: the current cell, cells
// done out of the total, time elapsed and an estimate of what remains. On a
// terminal one line is redrawn in place; otherwise (a log, CI) one line is
// printed per finished cell.
#pragma once

#include "results.h"

#include <chrono>
#include <cstdio>
#include <string>
#include <vector>

namespace kiln::tools::bench {

class Progress {
 public:
  // interactive: redraw with carriage returns (stderr is a terminal).
  Progress(int total_cells, std::FILE* out, bool interactive);

  void cell_started(const Cell& cell);  // building (and compiling) its model
  // The cells of one model and batch are timed together from here on.
  void rounds_started(const std::vector<const Cell*>& cells);
  void call_done(int done, int total);  // of the cells timed together; redraws at most a few times a second
  void cell_finished(const Cell& cell);
  // Ends the redrawn line, if any.
  void finish();

  // "1:02:03" or "4:05" for a number of seconds.
  static std::string duration_text(double seconds);

 private:
  using Clock = std::chrono::steady_clock;
  double elapsed_s() const;
  std::string estimate_text() const;
  void redraw();

  int total_;
  int done_ = 0;
  std::FILE* out_;
  bool interactive_;
  Clock::time_point start_ = Clock::now();
  Clock::time_point last_draw_{};
  std::string current_;  // "resnet18, batch 4, default: preparing"
  int cells_in_flight_ = 0;  // cells being timed together
  double cell_fraction_ = 0;  // cells' worth of progress within those in flight
};

}  // namespace kiln::tools::bench
