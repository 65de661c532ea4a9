// The settings table: defaults, mode patches, the environment and explicit
// options in order of precedence; bad values named; what explain shows.
#define BOOST_TEST_MODULE settings
#include <boost/test/unit_test.hpp>

#include <kiln/kiln.h>

#include "src/compile/plan.h"
#include "backends/registry.h"
#include "src/runtime/internal_access.h"

#include <algorithm>
#include <map>
#include <set>
#include <string>

namespace {

using kiln::Mode;
using kiln::Settings;
using kiln::SettingSource;

// A fake environment for one test.
std::map<std::string, std::string>& fake_env() {
  static std::map<std::string, std::string> env;
  return env;
}
const char* lookup(const char* name) {
  const auto it = fake_env().find(name);
  return it == fake_env().end() ? nullptr : it->second.c_str();
}
const char* empty_env(const char*) { return nullptr; }

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

}  // namespace

BOOST_AUTO_TEST_CASE(every_row_is_complete_and_unique) {
  std::set<std::string> names, variables;
  for (const kiln::SettingDef& def : kiln::setting_table()) {
    BOOST_TEST_CONTEXT(def.name) {
      BOOST_TEST(!def.name.empty());
      BOOST_TEST(!def.doc.empty());
      BOOST_TEST(def.env.starts_with("KILN_"));
      BOOST_TEST(names.insert(std::string(def.name)).second);
      BOOST_TEST(variables.insert(std::string(def.env)).second);
      // The default is a value its own kind accepts.
      BOOST_CHECK_NO_THROW(Settings().with(def.name, def.default_value));
    }
  }
}

BOOST_AUTO_TEST_CASE(modes_are_patches_over_the_defaults) {
  const Settings plain = Settings::resolve(Mode::default_, {}, &empty_env);
  const Settings replay = Settings::resolve(Mode::reduce_overhead, {}, &empty_env);
  const Settings tuned = Settings::resolve(Mode::max_autotune, {}, &empty_env);
  BOOST_TEST(!plain.flag("replay"));
  BOOST_TEST(replay.flag("replay"));
  BOOST_TEST((replay.entry("replay").source == SettingSource::mode));
  BOOST_TEST(replay.entry("replay").origin == "mode reduce-overhead");
  BOOST_TEST(tuned.flag("autotune"));
  BOOST_TEST(tuned.flag("replay"));  // as torch.compile's max-autotune includes CUDA graphs
  BOOST_TEST(tuned.entry("replay").origin == "mode max-autotune");
  // Everything else stays at its default.
  int differing = 0;
  for (std::size_t i = 0; i < plain.entries().size(); ++i)
    differing += plain.entries()[i].value != tuned.entries()[i].value ? 1 : 0;
  BOOST_TEST(differing == 2);  // autotune and replay
}

BOOST_AUTO_TEST_CASE(precedence_default_mode_environment_options) {
  fake_env() = {{"KILN_REPLAY", "off"}, {"KILN_WINOGRAD", "0"}, {"KILN_TUNE_BUDGET", "90s"}};
  const Settings s = Settings::resolve(Mode::reduce_overhead, {{"winograd", "on"}}, &lookup);
  // The environment beats the mode...
  BOOST_TEST(!s.flag("replay"));
  BOOST_TEST(s.entry("replay").origin == "KILN_REPLAY=off");
  // ...and explicit options beat the environment.
  BOOST_TEST(s.flag("winograd"));
  BOOST_TEST((s.entry("winograd").source == SettingSource::options));
  BOOST_TEST(s.seconds("tune_budget") == 90.0);
  BOOST_TEST((s.entry("fuse").source == SettingSource::default_value));
  fake_env().clear();
}

BOOST_AUTO_TEST_CASE(values_are_parsed_by_kind) {
  const Settings s = Settings()
                         .with("winograd", "FALSE")
                         .with("max_fused_nodes", "12")
                         .with("tune_budget", "10m")
                         .with("pack_matmul_weights", "on")
                         .with("tune_db", "/tmp/Some File.db");
  BOOST_TEST(s.entry("winograd").value == "off");
  BOOST_TEST(s.integer("max_fused_nodes") == 12);
  BOOST_TEST(s.seconds("tune_budget") == 600.0);
  BOOST_TEST(Settings().with("tune_budget", "500ms").seconds("tune_budget") == 0.5);
  BOOST_TEST(Settings().with("tune_budget", "1h").seconds("tune_budget") == 3600.0);
  BOOST_TEST(Settings().with("tune_budget", "45").seconds("tune_budget") == 45.0);
  BOOST_TEST(s.choice("pack_matmul_weights") == "on");
  BOOST_TEST(s.text("tune_db") == "/tmp/Some File.db");
}

BOOST_AUTO_TEST_CASE(bad_values_and_names_are_named) {
  auto message = [](auto&& f) -> std::string {
    try {
      f();
    } catch (const kiln::Error& e) {
      BOOST_TEST((e.kind() == kiln::ErrorKind::InvalidArgument));
      return e.what();
    }
    return "no error";
  };
  BOOST_TEST(contains(message([] { (void)Settings().with("winograd", "maybe"); }), "'winograd'='maybe' is not valid (on or off)"));
  BOOST_TEST(contains(message([] { (void)Settings().with("winograd_tile", "3"); }), "auto|2"));
  BOOST_TEST(contains(message([] { (void)Settings().with("max_fused_nodes", "-1"); }), "a whole number"));
  BOOST_TEST(contains(message([] { (void)Settings().with("tune_budget", "soon"); }), "a duration"));
  BOOST_TEST(contains(message([] { (void)Settings::resolve(Mode::default_, {{"no_such", "on"}}, &empty_env); }),
                      "unknown setting 'no_such' (settings: fold_constants"));
  fake_env() = {{"KILN_FUSE", "perhaps"}};
  BOOST_TEST(contains(message([] { (void)Settings::resolve(Mode::default_, {}, &lookup); }),
                      "environment variable KILN_FUSE='perhaps' is not a valid value of setting 'fuse'"));
  fake_env().clear();
  // Reading a setting as the wrong kind is kiln's bug, not the user's.
  BOOST_CHECK_THROW((void)Settings().integer("winograd"), kiln::Error);
}

BOOST_AUTO_TEST_CASE(fingerprint_changes_with_code_settings_only) {
  const Settings base;
  BOOST_TEST(base.fingerprint() != base.with("winograd", "off").fingerprint());
  BOOST_TEST(base.fingerprint() != base.with("max_fused_nodes", "8").fingerprint());
  // Where things are kept and how long tuning takes do not change the code.
  BOOST_TEST(base.fingerprint() == base.with("tune_db", "/elsewhere.db").fingerprint());
  BOOST_TEST(base.fingerprint() == base.with("tune_budget", "1h").fingerprint());
}

BOOST_AUTO_TEST_CASE(describe_lists_every_setting_with_its_origin) {
  const Settings s = Settings::resolve(Mode::max_autotune, {{"fuse", "off"}}, &empty_env);
  const std::string text = s.describe();
  for (const kiln::SettingDef& def : kiln::setting_table()) BOOST_TEST(contains(text, std::string(def.name)));
  BOOST_TEST(contains(text, "mode max-autotune"));
  BOOST_TEST(contains(text, "CompileOptions::settings"));
}

BOOST_AUTO_TEST_CASE(the_plan_follows_the_settings) {
  // One compile path: fuse=off makes one dispatch per node; max_fused_nodes bounds a group.
  kiln::Builder b("chain");
  auto x = b.input("x", kiln::DType::f32, {4, 64});
  auto y = x;
  for (int i = 0; i < 6; ++i) y = b.relu(y);
  const kiln::Model model = b.build({y});
  const kiln::backend::Backend& null_backend = kiln::backend::get_backend("null");
  const kiln::backend::TargetDesc target = null_backend.offline_targets().at(0);
  auto dispatches = [&](const Settings& settings) {
    return kiln::compiler::build_plan(kiln::internal::graph_ptr(model), null_backend, target, {.settings = settings})->dispatch_count();
  };
  BOOST_TEST(dispatches(Settings()) == 1);
  BOOST_TEST(dispatches(Settings().with("fuse", "off")) == 6);
  BOOST_TEST(dispatches(Settings().with("max_fused_nodes", "2")) == 3);
  const auto plan = kiln::compiler::build_plan(kiln::internal::graph_ptr(model), null_backend, target,
                                               {.settings = Settings().with("fold_constants", "off")});
  const auto fold = std::find_if(plan->pass_reports.begin(), plan->pass_reports.end(),
                                 [](const auto& report) { return report.pass == "fold_constants"; });
  BOOST_REQUIRE(fold != plan->pass_reports.end());
  BOOST_TEST(fold->details.at(0) == "off: setting fold_constants=off (CompileOptions::settings)");
}
