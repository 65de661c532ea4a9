// A compiled plan (src/compile/plan.h) as file metadata and blobs: the graph
// after passes, the steps, the rendered kernels (with their binaries, for a
// compiled-model file), the storage plan and the pass reports. Not kept: the
// kernels' IR (a read plan renders nothing) and the autotuner's decisions
// (the kernels are built with them already).
#pragma once

#include "src/artifact/container.h"
#include "src/compile/plan.h"

#include <kiln/error.h>

#include <nlohmann/json.hpp>

#include <memory>

namespace kiln::artifact {

nlohmann::json encode_target(const backend::TargetDesc& target);
backend::TargetDesc decode_target(const nlohmann::json& j);

// A rendered kernel's source and what loading and launching it need.
nlohmann::json encode_source(const backend::KernelSource& source);
backend::KernelSource decode_source(const nlohmann::json& j);

nlohmann::json encode_plan(const compiler::Plan& plan, BlobWriter& blobs);
// Throws Corrupt naming the file and the problem: every index the plan holds
// is checked against the graph and the kernels, so a plan that decodes can be
// bound to a device without reading out of bounds.
std::shared_ptr<const compiler::Plan> decode_plan(const nlohmann::json& j, const Container& file);

// Runs `decode` and turns a malformed field (nlohmann's exceptions) into
// Corrupt naming the file.
template <class F>
auto decoding(const Container& file, F&& decode) -> decltype(decode()) {
  try {
    return decode();
  } catch (const nlohmann::json::exception& e) {
    throw_error(ErrorKind::Corrupt, "'" + file.path() + "' has malformed metadata: " + e.what());
  }
}

}  // namespace kiln::artifact
