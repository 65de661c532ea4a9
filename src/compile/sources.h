// The kernels compiled mode builds for a model, rendered for one backend's
// language without a device: what `kiln dump` writes. The plan is the one
// the executor makes, sized for the backend's first device when it has one,
// else its first offline target.
#pragma once

#include "backends/backend.h"

#include <kiln/model.h>
#include <kiln/settings.h>
#include <kiln/sources.h>

#include <memory>

#include <string>
#include <utility>
#include <vector>

namespace kiln::compiler {

struct Plan;

// The sources of one backend (kiln::kernel_sources takes a source target
// name). Throws NotFound for a backend that is not built in. The plan is
// compiler::build_plan's (src/compile/plan.h), as the executor builds it for
// the backend's first device: the sources are the ones the device compiles.
KernelSources generate_sources(const Model& model, const std::string& backend, const Settings& settings = {});

// The plan compiled mode builds for `target` where nothing is tuned (no
// device, or ahead of time): max-autotune takes the tuning database's
// records (tune::database_path(settings, cache_dir)) and tunes nothing.
std::shared_ptr<const Plan> plan_from_records(const Model& model, const backend::Backend& backend,
                                              const backend::TargetDesc& target, const Settings& settings,
                                              const std::string& cache_dir);

// Every built-in backend's name, in preference order.
std::vector<std::string> source_backends();

}  // namespace kiln::compiler
