// Internal to src/zoo: the per-family tables of built-in models, each
// kept in its family's file, and the backbones families share.
#pragma once

#include <kiln/builder.h>
#include <kiln/models.h>

#include <span>
#include <string_view>

namespace kiln::models {

struct ModelEntry {
  std::string_view name;
  Model (*factory)(const ModelOptions&);
};

std::span<const ModelEntry> classification_models();  // classification.cpp
std::span<const ModelEntry> segmentation_models();    // segmentation.cpp
std::span<const ModelEntry> detection_models();       // detection.cpp

}  // namespace kiln::models
