// Measuring one graph-level candidate (graph_site.h) inside the tuning
// worker: the site's node alone as a one-node graph, compiled with
// build_plan (through the executor, everything but the site's choice as in
// default mode) with the candidate's option forced, checked against the
// graph's reference implementation on seeded random inputs, and timed call
// by call as MeasureOptions says (warm-up, repeats until the spread is small
// or the time cap, median; device time where the device has timestamps).
//
// It lives in the worker's own sources, not in libkiln's src/tune: it uses
// the executor and build_plan (src/runtime, src/compile), which use src/tune.
#pragma once

#include "src/tune/database.h"
#include "src/tune/measure.h"
#include "src/tune/site.h"

#include <kiln/tensor.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kiln::tune {

class GraphMeasurer {
 public:
  // The executor opens `backend` device `device` through the device pool
  // (with the default cache folder: the worker's own device).
  GraphMeasurer(std::string backend, int device);
  ~GraphMeasurer();

  // Computes the site's reference result now (measure() would on first use).
  void prepare(const Site& site, const MeasureOptions& options) { reference(site, options); }

  // Never throws for a candidate's own failure: that is the result's status.
  CandidateResult measure(const Site& site, const std::string& option, const MeasureOptions& options);

 private:
  struct Reference;
  const Reference& reference(const Site& site, const MeasureOptions& options);

  std::string backend_;
  int device_ = 0;
  std::map<std::string, std::unique_ptr<Reference>> references_;  // by site JSON and seed
};

}  // namespace kiln::tune
