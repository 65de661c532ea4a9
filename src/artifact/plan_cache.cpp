#include "src/artifact/plan_cache.h"

#include "src/artifact/kiln_source_digest.h"
#include "src/base/check.h"

#include "src/artifact/container.h"
#include "src/artifact/graph_codec.h"
#include "src/artifact/plan_codec.h"
#include "src/base/cache_key.h"
#include "src/base/log.h"
#include "src/cache/cache_maintenance.h"
#include "src/cache/compile_cache.h"
#include "src/tune/tuner.h"

#include <kiln/error.h>

#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace kiln::artifact {
namespace {

using base::append_key_field;
using base::hex_digest;

using nlohmann::json;

constexpr const char* kPlanEntryKind = "PLAN";
constexpr const char* kWeightsKind = "WGTS";
// Bump when a plan's meaning changes without its inputs changing.
// 2: i64 and bool tensors lower to kernels (plans from 1 broke on the host there).
constexpr int kPlanCacheVersion = 3;  // (3: weights in files of their own, plans/weights/)
// Constants of this many bytes or more go to the shared weights file; the
// small ones (a folded mask or shape that depends on the input's extents)
// stay in the plan, so shape sets of one model share one weights file.
constexpr std::uint64_t kSharedWeightBytes = 4096;



std::string ms_since(std::chrono::steady_clock::time_point start) {
  char text[32];
  std::snprintf(text, sizeof text, "%.1f ms",
                std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  return text;
}

}  // namespace

std::string graph_digest(const graph::Graph& g) {
  XXH3_state_t* state = XXH3_createState();
  KILN_ASSERT(state != nullptr);
  XXH3_128bits_reset(state);
  auto add = [&](const std::string& field) {
    const std::string size = std::to_string(field.size()) + ":";
    XXH3_128bits_update(state, size.data(), size.size());
    XXH3_128bits_update(state, field.data(), field.size());
  };
  for (const graph::Value& v : g.values()) {
    add(v.name);
    add(graph::type_str(v.type));
    add(std::to_string(v.producer));
    if (v.constant) {
      add(std::string(dtype_name(v.constant->dtype())) + shape_str(v.constant->shape()));
      const std::span<const std::byte> bytes = v.constant->bytes();
      add(std::to_string(bytes.size()));
      XXH3_128bits_update(state, bytes.data(), bytes.size());
    } else {
      add("-");
    }
  }
  for (const graph::Node& n : g.nodes()) {
    json attrs = json::object();
    // Not a structured binding: clang 15 cannot capture one in a lambda.
    for (const auto& entry : n.attrs.all()) {
      const auto& a = entry.second;
      std::visit([&](const auto& value) { attrs[entry.first] = {a.index(), value}; }, a);
    }
    add(json{n.op, n.name, n.inputs, n.outputs, attrs}.dump());
    for (const auto& sub : n.subgraphs) add(graph_digest(*sub));
  }
  add(json(g.inputs()).dump());
  add(json(g.outputs()).dump());
  const XXH128_hash_t digest = XXH3_128bits_digest(state);
  XXH3_freeState(state);
  return hex_digest(digest);
}

PlanCache::PlanCache(const std::string& dir) {
  const std::string resolved = dir.empty() ? cache::default_cache_dir() : dir;
  if (resolved == "off") return;
  dir_ = std::filesystem::path(resolved) / "plans";
}

PlanKey PlanCache::key(const graph::Graph& model, const std::string& model_name, bool compiled, bool fullgraph,
                       const Settings& settings, const backend::TargetDesc& target, const std::string& extra) {
  PlanKey key;
  append_key_field(key.text, std::to_string(kPlanCacheVersion));
  append_key_field(key.text, tune::kiln_version());
  // Another build of the same version (a developer's) plans differently.
  append_key_field(key.text, KILN_SOURCE_DIGEST);
  const auto digest_start = std::chrono::steady_clock::now();
  append_key_field(key.text, graph_digest(model));
  base::log(base::LogLevel::debug, "plan cache: digest of " + model_name + " in " + ms_since(digest_start));
  append_key_field(key.text, model_name);
  append_key_field(key.text, compiled ? "compiled" : "eager");
  append_key_field(key.text, fullgraph ? "fullgraph" : "breaks allowed");
  append_key_field(key.text, std::string(mode_name(settings.mode())));
  append_key_field(key.text, settings.fingerprint());
  append_key_field(key.text, target.fingerprint());
  append_key_field(key.text, extra);
  key.digest = hex_digest(XXH3_128bits(key.text.data(), key.text.size()));
  return key;
}

std::filesystem::path PlanCache::path_for(const PlanKey& key) const { return dir_ / (key.digest + ".plan"); }

std::filesystem::path PlanCache::weights_path_for(const std::string& digest) const {
  std::string name = digest;  // "<xxh3-128>:<bytes>"
  std::replace(name.begin(), name.end(), ':', '-');
  return dir_ / "weights" / (name + ".weights");
}

std::shared_ptr<const compiler::Plan> PlanCache::load(const PlanKey& key) const {
  if (!enabled()) return nullptr;
  const std::filesystem::path path = path_for(key);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return nullptr;
  try {
    const auto start = std::chrono::steady_clock::now();
    Container file = read_container(path, kPlanEntryKind, FileHolding::map);  // replaced only by rename
    const bool same_key = decoding(file, [&] { return file.metadata().at("key").get<std::string>() == key.text; });
    KILN_CHECK(same_key, ErrorKind::Corrupt, "'" + path.string() + "' is another key's plan");
    const auto weights =
        decoding(file, [&] { return file.metadata().at("weights").get<std::vector<std::string>>(); });
    std::vector<std::shared_ptr<const Container>> shared;
    for (const std::string& digest : weights) {
      const std::filesystem::path weight_path = weights_path_for(digest);
      shared.push_back(std::make_shared<const Container>(read_container(weight_path, kWeightsKind, FileHolding::map)));
      const Container& weight = *shared.back();
      const bool named = decoding(weight, [&] { return weight.metadata().at("digest").get<std::string>() == digest; });
      KILN_CHECK(named, ErrorKind::Corrupt, "'" + weight_path.string() + "' holds another weight than its name says");
      cache::mark_used(weight_path);
    }
    file.attach_external(std::move(shared));
    cache::mark_used(path);
    const std::string read_ms = ms_since(start);
    const auto decode_start = std::chrono::steady_clock::now();
    std::shared_ptr<const compiler::Plan> plan =
        decode_plan(decoding(file, [&]() -> const json& { return file.metadata().at("plan"); }), file);
    base::log(base::LogLevel::debug, "plan cache: " + path.string() + " read and checked in " + read_ms +
                                               ", decoded in " + ms_since(decode_start));
    return plan;
  } catch (const Error& e) {
    // An entry that does not decode is removed whatever the error (an
    // entry that passes its checksum yet breaks an invariant of the decoder
    // was not written by this kiln): only running out of memory is the
    // caller's.
    if (e.kind() == ErrorKind::OutOfMemory) throw;
    remove_entry(path, e.what());
    return nullptr;
  }
}

void PlanCache::remove_entry(const std::filesystem::path& path, const std::string& why) const {
  // The first line says what failed (a compiler's error carries its whole log).
  const std::string first_line = why.substr(0, why.find('\n'));
  base::log(base::LogLevel::warning, "plan cache: " + path.string() + ": " + first_line + (first_line.size() < why.size() ? " (...)" : "") +
                                         "; removed it, planning again");
  std::error_code ec;
  std::filesystem::remove(path, ec);
}

void PlanCache::store(const PlanKey& key, const compiler::Plan& plan) const {
  if (!enabled()) return;
  try {
    std::error_code ec;
    std::filesystem::create_directories(dir_, ec);
    KILN_CHECK(!ec, ErrorKind::Io, "cannot create '" + dir_.string() + "': " + ec.message());
    // Each weight goes to a file named by its contents, which every plan
    // holding it shares (the model's other shape sets, modes and settings).
    // A built plan's binaries stay in the kernel cache: none are stored here.
    BlobWriter weights;
    BlobWriter blobs(&weights, kSharedWeightBytes);
    json metadata = {{"key", key.text}, {"plan", encode_plan(plan, blobs)}};
    std::vector<std::string> digests;
    for (std::size_t i = 0; i < weights.size(); ++i) {
      digests.push_back(weights.digest(i));
      const std::filesystem::path weight_path = weights_path_for(digests.back());
      if (std::filesystem::is_regular_file(weight_path, ec)) {
        cache::mark_used(weight_path);
        continue;
      }
      std::filesystem::create_directories(weight_path.parent_path(), ec);
      BlobWriter one;
      one.add(weights.bytes(i));
      write_container(weight_path, kWeightsKind, {{"digest", digests.back()}}, one);
    }
    metadata["weights"] = digests;
    write_container(path_for(key), kPlanEntryKind, metadata, blobs);
    cache::after_store(dir_.parent_path());
  } catch (const Error& e) {
    if (e.kind() == ErrorKind::Internal) throw;
    base::log_once(base::LogLevel::warning, "plan cache store " + dir_.string(),
                   std::string("plan cache: not stored: ") + e.what() +
                       " (kiln runs on without storing; later failures here are logged at debug level)");
  }
}

}  // namespace kiln::artifact
