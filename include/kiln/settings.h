// Compiler settings: one table, every setting one row (name, kind, default,
// environment variable, one-line doc). A mode is a patch over the defaults
// (as torch.compile's modes are over Inductor's config). Settings are resolved
// once, when a model is compiled, from lowest to highest precedence:
//
//   the table's default < the mode's patch < the environment < CompileOptions::settings
//
// and handed to the compiler as a value: no pass reads the environment.
// `kiln explain` prints every setting with its value and where it came from.
//
//   kiln::compile(model, {.settings = {{"winograd", "off"}, {"tune_budget", "30s"}}});
//   KILN_WINOGRAD=off kiln run --model resnet18 ...
#pragma once

#include <kiln/export.h>

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace kiln {

enum class Mode {
  default_,         // fused kernels, recorded on every call
  reduce_overhead,  // the whole model recorded once into static buffers and replayed
  max_autotune,     // kernel variants timed on the device, kept in the tuning database
};
KILN_API std::string_view mode_name(Mode mode);  // "default", "reduce-overhead", "max-autotune"
// Every mode, in the order above (for tools and tests that cross them all).
KILN_API std::span<const Mode> all_modes();
// Parses "default", "reduce-overhead", "max-autotune"; throws InvalidArgument.
KILN_API Mode parse_mode(std::string_view text);

enum class SettingKind {
  flag,      // on | off (also true/false, 1/0, yes/no)
  choice,    // one of SettingDef::choices
  integer,   // a whole number >= 0
  duration,  // "90s", "10m", "1h", "500ms", or plain seconds
  text,      // free text (a path)
};

struct KILN_API SettingDef {
  std::string_view name;           // "winograd"
  SettingKind kind;
  std::string_view default_value;  // "on"
  std::string_view env;            // "KILN_WINOGRAD"
  std::string_view doc;            // one line
  std::string_view choices = {};   // kind choice: "auto|2|4"
  // Whether the value changes what the compiler builds (part of fingerprint());
  // false for where things are kept and how long tuning may take.
  bool changes_code = true;
};

// Every setting, in the order `kiln explain` prints them.
KILN_API std::span<const SettingDef> setting_table();

enum class SettingSource { default_value, mode, environment, options };
KILN_API std::string_view setting_source_name(SettingSource source);  // "default", "mode", "environment", "options"

using SettingOverrides = std::vector<std::pair<std::string, std::string>>;

class KILN_API Settings {
 public:
  struct Entry {
    const SettingDef* def = nullptr;
    std::string value;     // normalised: flags "on"/"off", durations as given
    SettingSource source = SettingSource::default_value;
    std::string origin;    // "default", "mode max-autotune", "KILN_WINOGRAD=off", "CompileOptions::settings"
  };

  // Every setting at its default.
  Settings();

  // Looks a variable up in the environment (nullptr: unset); tests pass their own.
  using EnvLookup = const char* (*)(const char* name);
  static const char* process_environment(const char* name);

  // Resolves every setting for `mode` (see the top of this file). Throws
  // InvalidArgument naming the setting (and the variable, for the
  // environment) for an unknown setting or a value its kind does not accept.
  static Settings resolve(Mode mode, const SettingOverrides& overrides = {},
                          EnvLookup env = &Settings::process_environment);

  // Typed reads; throw Internal for a name not in the table or of another kind.
  bool flag(std::string_view name) const;
  const std::string& choice(std::string_view name) const;
  std::int64_t integer(std::string_view name) const;
  double seconds(std::string_view name) const;  // duration settings
  const std::string& text(std::string_view name) const;

  const Entry& entry(std::string_view name) const;
  std::span<const Entry> entries() const { return entries_; }
  Mode mode() const { return mode_; }

  // This value with one setting changed (source `options`); validates as resolve().
  Settings with(std::string_view name, std::string_view value) const;

  // "name=value;..." over every setting that changes what the compiler
  // builds, in table order: part of the keys of cached plans.
  std::string fingerprint() const;
  // One line per setting: name, value, source, doc; for `kiln explain`.
  std::string describe() const;

 private:
  Entry& mutable_entry(std::string_view name);
  std::vector<Entry> entries_;
  Mode mode_ = Mode::default_;
};

}  // namespace kiln
