#include "src/tune/search.h"

#include <algorithm>
#include <cctype>
#include <iterator>
#include <limits>
#include <tuple>

namespace kiln::tune {

std::set<std::string> knob_fields(const std::string& knobs) {
  std::set<std::string> out;
  std::string text = knobs;
  const std::size_t colon = text.find(':');
  if (colon != std::string::npos) {
    out.insert("algorithm=" + text.substr(0, colon));
    text = text.substr(colon + 1);
  }
  std::size_t start = 0;
  bool first = true;
  while (start <= text.size()) {
    const std::size_t end = std::min(text.find('_', start), text.size());
    const std::string token = text.substr(start, end - start);
    const std::size_t x = token.find('x');
    if (first && x != std::string::npos) {
      out.insert("m" + token.substr(0, x));
      out.insert("n" + token.substr(x + 1));
    } else {
      // Fields without separators ("r2c64k4v4"): a field ends where a digit meets a letter.
      std::size_t field_start = 0;
      for (std::size_t i = 1; i <= token.size(); ++i)
        if (i == token.size() || (std::isdigit(static_cast<unsigned char>(token[i - 1])) &&
                                  !std::isdigit(static_cast<unsigned char>(token[i])))) {
          out.insert(token.substr(field_start, i - field_start));
          field_start = i;
        }
    }
    first = false;
    start = end + 1;
  }
  return out;
}

std::string knob_family(const std::string& knobs) {
  std::set<std::string> names;
  for (std::string name : knob_fields(knobs)) {
    if (name.rfind("algorithm=", 0) != 0)
      while (!name.empty() && std::isdigit(static_cast<unsigned char>(name.back()))) name.pop_back();
    names.insert(name);
  }
  std::string family;
  for (const std::string& name : names) family += (family.empty() ? "" : " ") + name;
  return family;
}

CandidateSearch::CandidateSearch(std::vector<std::string> knobs)
    : knobs_(std::move(knobs)),
      measured_(knobs_.size(), false) {
  for (const std::string& k : knobs_) {
    fields_.push_back(knob_fields(k));
    families_.push_back(knob_family(k));
  }
}

std::size_t CandidateSearch::distance(std::size_t a, std::size_t b) const {
  std::vector<std::string> only_a, only_b;
  std::set_difference(fields_[a].begin(), fields_[a].end(), fields_[b].begin(), fields_[b].end(),
                      std::back_inserter(only_a));
  std::set_difference(fields_[b].begin(), fields_[b].end(), fields_[a].begin(), fields_[a].end(),
                      std::back_inserter(only_b));
  return std::max(only_a.size(), only_b.size());
}

std::optional<std::size_t> CandidateSearch::unmeasured_neighbour_of(std::size_t index) const {
  for (std::size_t i = 0; i < knobs_.size(); ++i)
    if (!measured_[i] && distance(i, index) <= 1) return i;
  return std::nullopt;
}

std::optional<std::size_t> CandidateSearch::next() {
  if (measured_count_ == knobs_.size()) return std::nullopt;
  if (!measured_[0]) return 0;
  for (std::size_t i = 0; i < knobs_.size(); ++i)
    if (!measured_[i] && measured_families_.count(families_[i]) == 0) return i;
  // Alternate: climb from the best (when it has unmeasured neighbours), explore.
  const bool climb = steps_after_families_ % 2 == 0;
  ++steps_after_families_;
  const std::size_t anchor = best_.value_or(0);
  if (climb)
    if (std::optional<std::size_t> i = unmeasured_neighbour_of(anchor)) return i;
  // Exploring: a knob value never measured, nearest to the best; then more
  // such values; then the list's order.
  std::optional<std::size_t> pick;
  std::size_t pick_novel = 0, pick_distance = 0;
  for (std::size_t i = 0; i < knobs_.size(); ++i) {
    if (measured_[i]) continue;
    std::size_t novel = 0;
    for (const std::string& field : fields_[i]) novel += seen_fields_.count(field) == 0 ? 1 : 0;
    const std::size_t d = distance(i, anchor);
    const auto key = [](std::size_t n, std::size_t dist) { return std::make_tuple(n == 0, dist, ~n); };
    if (!pick || key(novel, d) < key(pick_novel, pick_distance)) {
      pick = i;
      pick_novel = novel;
      pick_distance = d;
    }
  }
  return pick;
}

void CandidateSearch::measured(std::size_t index, std::optional<double> median_ms) {
  if (index >= knobs_.size() || measured_[index]) return;
  measured_[index] = true;
  ++measured_count_;
  seen_fields_.insert(fields_[index].begin(), fields_[index].end());
  measured_families_.insert(families_[index]);
  if (median_ms && (!best_ || *median_ms < best_ms_)) {
    best_ = index;
    best_ms_ = *median_ms;
  }
}

}  // namespace kiln::tune
