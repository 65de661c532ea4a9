// The table of compiler settings and their resolution (include/kiln/settings.h).
#include "src/base/check.h"

#include <kiln/error.h>
#include <kiln/settings.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cstdlib>
#include <optional>

namespace kiln {
namespace {

using K = SettingKind;

// One row per setting. Pass switches are named after their pass.
constexpr std::array kTable = {
    // Graph passes (compiled mode), in pipeline order.
    SettingDef{"fold_constants", K::flag, "on", "KILN_FOLD_CONSTANTS", "evaluate nodes whose inputs are all constants once, at compile time"},
    SettingDef{"fold_batch_norm", K::flag, "on", "KILN_FOLD_BATCH_NORM", "fold a BatchNormalization into the Conv before it"},
    SettingDef{"fuse_activation", K::flag, "on", "KILN_FUSE_ACTIVATION", "give a Conv or Gemm the Relu that follows it"},
    SettingDef{"drop_identity_resize", K::flag, "on", "KILN_DROP_IDENTITY_RESIZE", "drop a Resize to its own size"},
    SettingDef{"conv_before_upsample", K::flag, "on", "KILN_CONV_BEFORE_UPSAMPLE", "move a 1x1 Conv of concatenated parts before each part's upsampling"},
    SettingDef{"trim_conv_window", K::flag, "on", "KILN_TRIM_CONV_WINDOW", "drop kernel taps of a Conv that read only padding"},
    SettingDef{"slice_strided_conv", K::flag, "on", "KILN_SLICE_STRIDED_CONV", "run a strided 1x1 Conv as a strided Slice and a stride-1 GEMM"},
    SettingDef{"winograd", K::flag, "on", "KILN_WINOGRAD", "compute qualifying 3x3 stride-1 convolutions as Winograd, weights transformed at compile time"},
    SettingDef{"winograd_tile", K::choice, "auto", "KILN_WINOGRAD_TILE", "Winograd output tile: auto (4x4 where the map allows, else 2x2) or 2 (always 2x2)", "auto|2"},
    SettingDef{"pack_weights", K::flag, "on", "KILN_PACK_WEIGHTS", "store direct-convolution weights as OIhw4o (one vec4 load per tap)"},
    SettingDef{"eliminate_dead_code", K::flag, "on", "KILN_ELIMINATE_DEAD_CODE", "remove nodes and constants no output depends on"},
    SettingDef{"recognise_layer_norm", K::flag, "on", "KILN_RECOGNISE_LAYER_NORM", "replace an exported LayerNorm's ops with one LayerNormalization"},
    SettingDef{"recognise_gelu", K::flag, "on", "KILN_RECOGNISE_GELU", "replace an exported exact GELU's ops with one Gelu"},
    SettingDef{"recognise_silu", K::flag, "on", "KILN_RECOGNISE_SILU", "replace x * Sigmoid(x) with one Silu"},
    SettingDef{"scale_conv_weights", K::flag, "on", "KILN_SCALE_CONV_WEIGHTS", "move a squeeze-and-excitation scale onto the next Conv's weight (batch 1)"},
    SettingDef{"recognise_attention", K::flag, "on", "KILN_RECOGNISE_ATTENTION", "replace scaled dot-product attention's ops with one Attention"},
    SettingDef{"narrow_gather", K::flag, "on", "KILN_NARROW_GATHER", "compute only the slice a one-index constant Gather keeps"},
    SettingDef{"transpose_to_reshape", K::flag, "on", "KILN_TRANSPOSE_TO_RESHAPE", "make a Transpose that moves only size-1 axes a view"},
    SettingDef{"pack_matmul_weights", K::choice, "auto", "KILN_PACK_MATMUL_WEIGHTS", "store constant MatMul weights as NK16n: auto (CPU devices only), on, off", "auto|on|off"},
    // Kernels.
    SettingDef{"fuse", K::flag, "on", "KILN_FUSE", "fuse pointwise ops into the kernels that produce or consume their values"},
    SettingDef{"max_fused_nodes", K::integer, "64", "KILN_MAX_FUSED_NODES", "most nodes one fused kernel may hold (keeps fusion linear and shaders small)"},
    SettingDef{"parameterise", K::flag, "on", "KILN_PARAMETERISE", "same-structure kernels share one source, differing constants passed per dispatch"},
    SettingDef{"parameterise_loop_bounds", K::choice, "auto", "KILN_PARAMETERISE_LOOP_BOUNDS", "loop bounds as parameters too: auto (CPU devices only), on, off", "auto|on|off"},
    // Precision, with PyTorch's names and defaults.
    SettingDef{"float32_matmul_precision", K::choice, "highest", "KILN_FLOAT32_MATMUL_PRECISION", "as torch.set_float32_matmul_precision: f32 matrix products in f32 (highest), TF32 where the device has it (high) or bf16 (medium)", "highest|high|medium"},
    SettingDef{"dtype", K::choice, "model", "KILN_DTYPE", "run the model's f32 tensors as f16 or bf16, as PyTorch's model.half() would: weights converted once, tensors between kernels 16-bit, kernels computing in f32; inputs and outputs keep their types (model: the model's own types)", "model|f16|bf16"},
    SettingDef{"f16_arithmetic", K::flag, "off", "KILN_F16_ARITHMETIC", "kernels storing f16 tensors compute their pointwise math in f16, as mobile GPUs run at twice the f32 rate (sums, accumulations and statistics stay f32; off: f32 arithmetic, PyTorch's rule); only where kernels compute f16 natively (Vulkan devices with shaderFloat16, HIP)"},
    SettingDef{"conv_allow_tf32", K::flag, "on", "KILN_CONV_ALLOW_TF32", "as torch.backends.cudnn.allow_tf32: f32 convolutions may use TF32 where the device has it"},
    // Running.
    SettingDef{"plan_cache", K::flag, "on", "KILN_PLAN_CACHE", "keep compiled plans in the cache folder so that a second process skips the graph passes (max-autotune: keyed by the tuning database's records)", {}, false},
    SettingDef{"replay", K::flag, "off", "KILN_REPLAY", "record each segment's commands once and replay them on every call"},
    // Tuning.
    SettingDef{"autotune", K::flag, "off", "KILN_AUTOTUNE", "use the tuning database's kernel choices, and tune kernels it has no record for"},
    SettingDef{"tune", K::choice, "now", "KILN_TUNE", "when sites the database lacks are tuned: now (during the compile), records (never), background (run on records, tune on a background thread, switch at a later call)", "now|records|background", false},
    SettingDef{"tune_budget", K::duration, "2m", "KILN_TUNE_BUDGET", "most time one compile (or background job) spends tuning kernels the database lacks (0: records only)", {}, false},
    SettingDef{"tune_db", K::text, "", "KILN_TUNE_DB", "the tuning database file (empty: tuning.db in the cache folder)", {}, false},
};

// Each mode's patch over the defaults.
struct Patch {
  Mode mode;
  std::string_view name;
  std::string_view value;
};
// max-autotune replays too, as torch.compile's max-autotune includes CUDA graphs.
constexpr std::array kModePatches = {
    Patch{Mode::reduce_overhead, "replay", "on"},
    Patch{Mode::max_autotune, "autotune", "on"},
    Patch{Mode::max_autotune, "replay", "on"},
};

std::string lowercase(std::string_view text) {
  std::string out(text);
  std::transform(out.begin(), out.end(), out.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

std::optional<double> parse_seconds(std::string_view text) {
  struct Unit {
    std::string_view suffix;
    double seconds;
  };
  static constexpr Unit kUnits[] = {{"ms", 1e-3}, {"s", 1}, {"m", 60}, {"h", 3600}};
  double scale = 1;
  for (const Unit& unit : kUnits)
    if (text.size() > unit.suffix.size() && text.ends_with(unit.suffix) &&
        !(unit.suffix == "s" && text.ends_with("ms"))) {
      scale = unit.seconds;
      text.remove_suffix(unit.suffix.size());
      break;
    }
  double value = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc{} || end != text.data() + text.size() || !(value >= 0) || value > 1e9) return std::nullopt;
  return value * scale;
}

// The value in normal form, or nullopt if the kind does not accept it.
std::optional<std::string> normalise(const SettingDef& def, std::string_view raw) {
  const std::string text = lowercase(raw);
  switch (def.kind) {
    case K::flag:
      if (text == "on" || text == "1" || text == "true" || text == "yes") return "on";
      if (text == "off" || text == "0" || text == "false" || text == "no") return "off";
      return std::nullopt;
    case K::choice: {
      std::string_view rest = def.choices;
      while (!rest.empty()) {
        const std::size_t bar = rest.find('|');
        if (rest.substr(0, bar) == text) return text;
        rest = bar == std::string_view::npos ? std::string_view{} : rest.substr(bar + 1);
      }
      return std::nullopt;
    }
    case K::integer: {
      std::int64_t value = 0;
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
      if (ec != std::errc{} || end != text.data() + text.size() || value < 0) return std::nullopt;
      return std::to_string(value);
    }
    case K::duration:
      if (!parse_seconds(text)) return std::nullopt;
      return text;
    case K::text: return std::string(raw);
  }
  return std::nullopt;
}

std::string accepted(const SettingDef& def) {
  switch (def.kind) {
    case K::flag: return "on or off";
    case K::choice: return std::string(def.choices);
    case K::integer: return "a whole number >= 0";
    case K::duration: return "a duration such as 90s, 10m, 1h or 500ms";
    case K::text: return "any text";
  }
  return "";
}

std::string known_names() {
  std::string names;
  for (const SettingDef& def : kTable) names += (names.empty() ? "" : ", ") + std::string(def.name);
  return names;
}

}  // namespace

std::string_view mode_name(Mode mode) {
  switch (mode) {
    case Mode::default_: return "default";
    case Mode::reduce_overhead: return "reduce-overhead";
    case Mode::max_autotune: return "max-autotune";
  }
  return "?";
}

std::span<const Mode> all_modes() {
  static constexpr Mode kModes[] = {Mode::default_, Mode::reduce_overhead, Mode::max_autotune};
  return kModes;
}

Mode parse_mode(std::string_view text) {
  std::string names;
  for (Mode mode : all_modes()) {
    if (text == mode_name(mode)) return mode;
    names += (names.empty() ? "" : ", ") + std::string(mode_name(mode));
  }
  throw_error(ErrorKind::InvalidArgument, "unknown mode '" + std::string(text) + "' (modes: " + names + ")");
}

std::span<const SettingDef> setting_table() { return kTable; }

std::string_view setting_source_name(SettingSource source) {
  switch (source) {
    case SettingSource::default_value: return "default";
    case SettingSource::mode: return "mode";
    case SettingSource::environment: return "environment";
    case SettingSource::options: return "options";
  }
  return "?";
}

const char* Settings::process_environment(const char* name) { return std::getenv(name); }

Settings::Settings() {
  entries_.reserve(kTable.size());
  for (const SettingDef& def : kTable) entries_.push_back({&def, std::string(def.default_value), SettingSource::default_value, "default"});
}

Settings Settings::resolve(Mode mode, const SettingOverrides& overrides, EnvLookup env) {
  Settings settings;
  settings.mode_ = mode;
  for (const Patch& patch : kModePatches) {
    if (patch.mode != mode) continue;
    Entry& e = settings.mutable_entry(patch.name);
    e.value = std::string(patch.value);
    e.source = SettingSource::mode;
    e.origin = "mode " + std::string(mode_name(mode));
  }
  for (Entry& e : settings.entries_) {
    const std::string variable(e.def->env);
    const char* raw = env ? env(variable.c_str()) : nullptr;
    if (raw == nullptr || *raw == '\0') continue;
    std::optional<std::string> value = normalise(*e.def, raw);
    KILN_CHECK(value.has_value(), ErrorKind::InvalidArgument,
               "environment variable " + variable + "='" + std::string(raw).substr(0, 200) + "' is not a valid value of setting '" +
                   std::string(e.def->name) + "' (" + accepted(*e.def) + ")");
    e.value = std::move(*value);
    e.source = SettingSource::environment;
    e.origin = variable + "=" + std::string(raw).substr(0, 200);
  }
  for (const auto& [name, raw] : overrides) {
    Entry& e = settings.mutable_entry(name);
    std::optional<std::string> value = normalise(*e.def, raw);
    KILN_CHECK(value.has_value(), ErrorKind::InvalidArgument,
               "setting '" + name + "'='" + raw.substr(0, 200) + "' is not valid (" + accepted(*e.def) + ")");
    e.value = std::move(*value);
    e.source = SettingSource::options;
    e.origin = "CompileOptions::settings";
  }
  return settings;
}

Settings::Entry& Settings::mutable_entry(std::string_view name) {
  for (Entry& e : entries_)
    if (e.def->name == name) return e;
  throw_error(ErrorKind::InvalidArgument,
              "unknown setting '" + std::string(name).substr(0, 200) + "' (settings: " + known_names() + ")");
}

const Settings::Entry& Settings::entry(std::string_view name) const {
  for (const Entry& e : entries_)
    if (e.def->name == name) return e;
  throw_error(ErrorKind::Internal, "no setting named '" + std::string(name) + "' in the settings table");
}

namespace {
const Settings::Entry& typed(const Settings& s, std::string_view name, SettingKind kind) {
  const Settings::Entry& e = s.entry(name);
  KILN_CHECK(e.def->kind == kind, ErrorKind::Internal, "setting '" + std::string(name) + "' read as another kind");
  return e;
}
}  // namespace

bool Settings::flag(std::string_view name) const { return typed(*this, name, K::flag).value == "on"; }
const std::string& Settings::choice(std::string_view name) const { return typed(*this, name, K::choice).value; }
std::int64_t Settings::integer(std::string_view name) const { return std::stoll(typed(*this, name, K::integer).value); }
double Settings::seconds(std::string_view name) const { return *parse_seconds(typed(*this, name, K::duration).value); }
const std::string& Settings::text(std::string_view name) const { return typed(*this, name, K::text).value; }

Settings Settings::with(std::string_view name, std::string_view value) const {
  Settings copy = *this;
  Entry& e = copy.mutable_entry(name);
  std::optional<std::string> normal = normalise(*e.def, value);
  KILN_CHECK(normal.has_value(), ErrorKind::InvalidArgument,
             "setting '" + std::string(name) + "'='" + std::string(value).substr(0, 200) + "' is not valid (" +
                 accepted(*e.def) + ")");
  e.value = std::move(*normal);
  e.source = SettingSource::options;
  e.origin = "CompileOptions::settings";
  return copy;
}

std::string Settings::fingerprint() const {
  std::string text;
  for (const Entry& e : entries_)
    if (e.def->changes_code) text += std::string(e.def->name) + "=" + e.value + ";";
  return text;
}

std::string Settings::describe() const {
  std::size_t name_width = 0, value_width = 0;
  for (const Entry& e : entries_) {
    name_width = std::max(name_width, e.def->name.size());
    value_width = std::max(value_width, std::max<std::size_t>(e.value.size(), 7));
  }
  std::string text;
  for (const Entry& e : entries_) {
    std::string line = std::string(e.def->name);
    line.resize(name_width + 2, ' ');
    line += e.value.empty() ? "(empty)" : e.value;
    line.resize(name_width + 2 + value_width + 2, ' ');
    line += e.origin;
    text += line + "\n";
  }
  return text;
}

}  // namespace kiln
