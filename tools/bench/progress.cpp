#include "progress.h"

#include <algorithm>
#include <cmath>

namespace kiln::tools::bench {
namespace {

constexpr int kBarWidth = 24;
constexpr auto kRedrawInterval = std::chrono::milliseconds(200);

std::string label_of(const Cell& cell) {
  return cell.model + ", batch " + std::to_string(cell.batch) + ", " + cell.mode;
}

}  // namespace

Progress::Progress(int total_cells, std::FILE* out, bool interactive)
    : total_(total_cells), out_(out), interactive_(interactive) {}

std::string Progress::duration_text(double seconds) {
  const long total = std::lround(std::max(0.0, seconds));
  char text[32];
  if (total >= 3600) std::snprintf(text, sizeof text, "%ld:%02ld:%02ld", total / 3600, total / 60 % 60, total % 60);
  else std::snprintf(text, sizeof text, "%ld:%02ld", total / 60, total % 60);
  return text;
}

double Progress::elapsed_s() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

// Cells differ a lot in cost (models, batch sizes), so this is the average
// so far, a rough guide that improves as the run goes.
std::string Progress::estimate_text() const {
  const double done = done_ + cell_fraction_;
  if (done <= 0) return "estimating";
  return "~" + duration_text(elapsed_s() / done * (total_ - done)) + " left";
}

void Progress::redraw() {
  last_draw_ = Clock::now();
  const double fraction = total_ > 0 ? (done_ + cell_fraction_) / total_ : 1.0;
  const int filled = static_cast<int>(fraction * kBarWidth);
  const std::string bar = std::string(static_cast<std::size_t>(filled), '#') + std::string(static_cast<std::size_t>(kBarWidth - filled), '.');
  std::fprintf(out_, "\r\033[K[%s] %d/%d  %s  %s elapsed, %s", bar.c_str(), done_, total_, current_.c_str(),
               duration_text(elapsed_s()).c_str(), estimate_text().c_str());
  std::fflush(out_);
}

void Progress::cell_started(const Cell& cell) {
  current_ = label_of(cell) + ": preparing";
  cells_in_flight_ = 0;
  cell_fraction_ = 0;
  if (interactive_) redraw();
}

void Progress::rounds_started(const std::vector<const Cell*>& cells) {
  if (cells.empty()) return;
  std::string modes;
  for (const Cell* c : cells) modes += (modes.empty() ? "" : "/") + c->mode;
  current_ = cells.front()->model + ", batch " + std::to_string(cells.front()->batch) + ", timing " + modes;
  cells_in_flight_ = static_cast<int>(cells.size());
  cell_fraction_ = 0;
  if (interactive_) redraw();
}

void Progress::call_done(int done, int total) {
  // Compiling came before the calls, so the calls never claim all of their cells' share.
  cell_fraction_ = total > 0 ? 0.99 * cells_in_flight_ * done / total : 0;
  if (interactive_ && Clock::now() - last_draw_ >= kRedrawInterval) redraw();
}

void Progress::cell_finished(const Cell& cell) {
  ++done_;
  // Cells timed together finish one after another: this one's share moves into done_.
  if (cells_in_flight_ > 0) --cells_in_flight_;
  cell_fraction_ = std::max(0.0, cell_fraction_ - 1.0);
  if (interactive_) {
    redraw();
    return;
  }
  std::string outcome = status_name(cell.status);
  if (cell.measured()) {
    char text[64];
    std::snprintf(text, sizeof text, "%.2f ms", cell.host_ms.mean);
    outcome = text + std::string(cell.status == CellStatus::mismatch ? " WRONG OUTPUT" : "");
  }
  std::fprintf(out_, "kiln bench: [%d/%d] %s: %s (%s elapsed, %s)\n", done_, total_, label_of(cell).c_str(),
               outcome.c_str(), duration_text(elapsed_s()).c_str(), estimate_text().c_str());
  std::fflush(out_);
}

void Progress::finish() {
  if (interactive_) {
    std::fprintf(out_, "\n");
    std::fflush(out_);
  }
}

}  // namespace kiln::tools::bench
