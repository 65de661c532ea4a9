// Cached plans: a second process compiling the same model for the same device
// with the same settings reads the plan the first one built (the graph after
// passes, kernels rendered, the memory plan) instead of running the graph
// passes, lowering and fusion again; its kernels then come from the kernel
// cache. Entries live in <cache dir>/plans/, one container file (kind "PLAN")
// per key, named by the key's digest; the file stores the whole key and is
// used only for that key. Constants of 4 KiB or more are not in it: each
// goes to plans/weights/<digest>.weights (kind "WGTS", one blob), named by
// its contents, which every plan holding it shares (a model's shape sets,
// modes and settings). A corrupt or unreadable entry (or one whose weights
// are gone) is reported, removed and rebuilt. Reads mark entries used; stores prune the folder to its limit
// (src/cache/cache_maintenance.h).
#pragma once

#include "graph/ir.h"
#include "src/compile/plan.h"

#include <kiln/settings.h>

#include <filesystem>
#include <memory>
#include <string>

namespace kiln::artifact {

// A digest of everything about a graph a plan depends on: its structure,
// names, types, attributes and constants' bytes (hex XXH3-128).
std::string graph_digest(const graph::Graph& graph);

struct PlanKey {
  std::string text;    // every field the plan depends on
  std::string digest;  // XXH3-128 of text: the file name
};

class PlanCache {
 public:
  // `dir` as CompileOptions::cache_dir ("" the default, "off" none).
  explicit PlanCache(const std::string& dir);
  bool enabled() const { return !dir_.empty(); }

  // `extra`: anything else the plan depends on (the tuning database's state
  // for max-autotune).
  static PlanKey key(const graph::Graph& model, const std::string& model_name, bool compiled, bool fullgraph,
                     const Settings& settings, const backend::TargetDesc& target, const std::string& extra);
  std::filesystem::path path_for(const PlanKey& key) const;
  // Where the weight of this digest lives (plans/weights/).
  std::filesystem::path weights_path_for(const std::string& digest) const;

  // nullptr on a miss; an unusable entry is logged and removed.
  std::shared_ptr<const compiler::Plan> load(const PlanKey& key) const;
  // Best effort: a failure is logged, never thrown.
  void store(const PlanKey& key, const compiler::Plan& plan) const;
  // Logs why the entry at `path` (a loaded plan's read_from) is unusable and
  // removes it: a plan that decoded but whose kernels do not build or load.
  void remove_entry(const std::filesystem::path& path, const std::string& why) const;

 private:
  std::filesystem::path dir_;
};

}  // namespace kiln::artifact
