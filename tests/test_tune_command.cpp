// `kiln tune` as a tuning job runs it: shards of an array job cover the
// sites exactly once and their merged databases hold what one unsharded run
// records; the budget bounds the run; a --resume rerun of a finished job
// measures nothing. Runs the built binary on ResNet-18 at 32 px, each site
// measured with one or two candidates so that the suite takes seconds. The
// same job as a library call (kiln::tune_models, include/kiln/tune.h).
#define BOOST_TEST_MODULE tune_command
#include <boost/test/unit_test.hpp>

#include "backends/registry.h"
#include "cli_runner.h"

#include <kiln/builder.h>
#include <kiln/tune.h>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <regex>
#include <set>
#include <sstream>
#include <string>

#include <unistd.h>

namespace fs = std::filesystem;
using cli_test::has;
using cli_test::run_kiln;

namespace {

bool have_vulkan() { return !kiln::backend::get_backend("vulkan").unavailable_reason(); }

// A folder removed at the end of the test.
struct TempDir {
  fs::path path;
  TempDir() : path(fs::temp_directory_path() / ("kiln_tune_command_" + std::to_string(::getpid()))) {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~TempDir() { fs::remove_all(path); }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

const std::string kModel = "--model resnet18 --image-size 32 --calls 0 --cache-dir off";

// The record keys (template, version, kernel text) of a database, through
// `kiln tune export`.
std::set<std::string> record_keys(const TempDir& dir, const std::string& db) {
  const std::string json_file = dir.file("export.json");
  const cli_test::Result exported = run_kiln("tune export --db " + db + " -o " + json_file);
  BOOST_REQUIRE_MESSAGE(exported.exit_code == 0, exported.output);
  std::ifstream in(json_file);
  const nlohmann::json document = nlohmann::json::parse(in);
  std::set<std::string> keys;
  for (const nlohmann::json& record : document.at("records")) {
    const nlohmann::json& key = record.at("key");
    keys.insert(key.at("template").get<std::string>() + "@" + std::to_string(key.at("template_version").get<int>()) +
                " " + key.at("kernel").get<std::string>());
  }
  return keys;
}

// The explain listing's site lines (two leading spaces, then the template).
std::vector<std::string> site_lines(const std::string& output) {
  std::vector<std::string> lines;
  std::istringstream in(output);
  for (std::string line; std::getline(in, line);)
    if (line.rfind("  ", 0) == 0 && line.size() > 2 && line[2] != ' ') lines.push_back(line);
  return lines;
}

// Seconds in "tuned N of M sites in 0m07s (budget ...)".
int tuned_seconds(const std::string& output) {
  const std::regex pattern(R"(tuned \d+ of \d+ sites in (\d+)m(\d\d)s)");
  std::smatch match;
  BOOST_REQUIRE_MESSAGE(std::regex_search(output, match, pattern), "no 'tuned ... in' line in:\n" + output);
  return std::stoi(match[1]) * 60 + std::stoi(match[2]);
}

}  // namespace

BOOST_AUTO_TEST_CASE(shards_cover_every_site_exactly_once_and_merge_to_the_unsharded_records) {
  if (!have_vulkan()) {
    BOOST_TEST_MESSAGE("skipped: no Vulkan device");
    return;
  }
  TempDir dir;
  // Listings first: each shard lists a disjoint part, together all of them.
  const cli_test::Result all = run_kiln("tune --explain " + kModel + " --db " + dir.file("none.db"));
  BOOST_REQUIRE_MESSAGE(all.exit_code == 0, all.output);
  const std::vector<std::string> every = site_lines(all.output);
  BOOST_REQUIRE_GE(every.size(), 4u);
  std::multiset<std::string> from_shards;
  for (int i = 0; i < 3; ++i) {
    const cli_test::Result part =
        run_kiln("tune --explain " + kModel + " --db " + dir.file("none.db") + " --shard " + std::to_string(i) + "/3");
    BOOST_REQUIRE_MESSAGE(part.exit_code == 0, part.output);
    BOOST_TEST(has(part, "shard " + std::to_string(i) + "/3"));
    for (const std::string& line : site_lines(part.output)) from_shards.insert(line);
  }
  BOOST_TEST(from_shards == std::multiset<std::string>(every.begin(), every.end()));

  // Then real runs: one unsharded, two shards merged.
  const std::string quick = " --max-candidates 1 --budget 5m";
  const cli_test::Result whole = run_kiln("tune " + kModel + quick + " --db " + dir.file("whole.db"));
  BOOST_REQUIRE_MESSAGE(whole.exit_code == 0, whole.output);
  for (int i = 0; i < 2; ++i) {
    const std::string db = dir.file("shard" + std::to_string(i) + ".db");
    const cli_test::Result part = run_kiln("tune " + kModel + quick + " --shard " + std::to_string(i) + "/2 --db " + db);
    BOOST_REQUIRE_MESSAGE(part.exit_code == 0, part.output);
  }
  const cli_test::Result merged = run_kiln("tune merge " + dir.file("shard0.db") + " " + dir.file("shard1.db") +
                                           " -o " + dir.file("merged.db"));
  BOOST_REQUIRE_MESSAGE(merged.exit_code == 0, merged.output);

  const std::set<std::string> whole_keys = record_keys(dir, dir.file("whole.db"));
  const std::set<std::string> shard0 = record_keys(dir, dir.file("shard0.db"));
  const std::set<std::string> shard1 = record_keys(dir, dir.file("shard1.db"));
  // Every site has its record, and so do the kernels that graph choices'
  // other options build (tuned before those choices).
  BOOST_TEST(whole_keys.size() >= every.size());
  BOOST_TEST(!shard0.empty());
  BOOST_TEST(!shard1.empty());
  for (const std::string& key : shard0) BOOST_TEST(shard1.count(key) == 0u, key << " is in both shards");
  BOOST_TEST(record_keys(dir, dir.file("merged.db")) == whole_keys);
}

BOOST_AUTO_TEST_CASE(a_resumed_finished_job_measures_nothing) {
  if (!have_vulkan()) {
    BOOST_TEST_MESSAGE("skipped: no Vulkan device");
    return;
  }
  TempDir dir;
  const std::string db = " --db " + dir.file("tuning.db");
  // One shard of two keeps the run short; --resume works within a shard.
  const std::string job = "tune " + kModel + " --max-candidates 1 --shard 0/2 --budget 5m --resume" + db;
  const cli_test::Result first = run_kiln(job);
  BOOST_REQUIRE_MESSAGE(first.exit_code == 0, first.output);
  BOOST_TEST(has(first, "0 already in"));
  const std::set<std::string> before = record_keys(dir, dir.file("tuning.db"));
  BOOST_REQUIRE(!before.empty());

  const cli_test::Result again = run_kiln(job);
  BOOST_REQUIRE_MESSAGE(again.exit_code == 0, again.output);
  const std::size_t holds = first.output.find(" holds ");
  BOOST_REQUIRE(holds != std::string::npos);
  const std::string sites = first.output.substr(holds + 7, first.output.find(';', holds) - holds - 7);
  BOOST_TEST(has(again, "holds " + sites + "; " + sites + " already in"));
  BOOST_TEST(has(again, "tuning 0 within"));
  BOOST_TEST(has(again, "tuned 0 of 0 sites in 0m00s"));
  BOOST_TEST(record_keys(dir, dir.file("tuning.db")) == before);
}

BOOST_AUTO_TEST_CASE(the_budget_bounds_the_run_and_keeps_what_finished) {
  if (!have_vulkan()) {
    BOOST_TEST_MESSAGE("skipped: no Vulkan device");
    return;
  }
  TempDir dir;
  // Every candidate of every site would take minutes; 6 s must stop it. The
  // candidate being measured at the deadline finishes first (its pipeline
  // compile and timing took up to 3 s on a loaded 2-core machine, 5 s with
  // a fuzzer and another suite beside it).
  const cli_test::Result run = run_kiln("tune " + kModel + " --budget 6s --db " + dir.file("tuning.db"));
  BOOST_REQUIRE_MESSAGE(run.exit_code == 0, run.output);
  const int spent = tuned_seconds(run.output);
  BOOST_TEST(spent >= 4);
  BOOST_TEST(spent <= 13, "tuning took " << spent << " s against a budget of 6 s");
  // What was measured before the budget ran out is in the database.
  BOOST_TEST(!record_keys(dir, dir.file("tuning.db")).empty());
}

BOOST_AUTO_TEST_CASE(ctrl_c_stops_the_run_and_keeps_what_the_site_being_tuned_finished) {
  if (!have_vulkan()) {
    BOOST_TEST_MESSAGE("skipped: no Vulkan device");
    return;
  }
  TempDir dir;
  const char* binary = std::getenv("KILN_BINARY");
  BOOST_REQUIRE(binary != nullptr);
  // SIGINT to kiln alone, a few seconds into tuning the first site (whose
  // space takes far longer): it must stop at once and keep that site's record.
  const std::string command = "cd '" + cli_test::source_root() + "' && '" + binary + "' tune " + kModel +
                              " --budget 5m --db " + dir.file("tuning.db") + " > " + dir.file("out.txt") +
                              " 2>&1 & pid=$!; sleep 12; kill -INT $pid; wait $pid; echo \"exit $?\" >> " +
                              dir.file("out.txt");
  const auto start = std::chrono::steady_clock::now();
  BOOST_REQUIRE(std::system(command.c_str()) == 0);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::ifstream in(dir.file("out.txt"));
  const std::string output((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  BOOST_TEST_MESSAGE(output);
  BOOST_TEST(output.find("stopped by Ctrl-C") != std::string::npos);
  BOOST_TEST(output.find("exit 0") != std::string::npos);
  BOOST_TEST(seconds < 40, "kiln took " << seconds << " s to stop");
  BOOST_TEST(record_keys(dir, dir.file("tuning.db")).size() >= 1u);
}

// The job from an application: progress for each stage, a report of what it
// tuned, records that explain_tuning then finds applying, a stop request
// honoured between candidates, and a bad shard refused.
BOOST_AUTO_TEST_CASE(the_job_is_a_library_call) {
  if (!have_vulkan()) {
    BOOST_TEST_MESSAGE("skipped: no Vulkan device");
    return;
  }
  TempDir dir;
  kiln::Builder b("one_product");
  auto x = b.input("x", kiln::DType::f32, {8, 64});
  kiln::Tensor w(kiln::DType::f32, {64, 64});
  for (std::size_t i = 0; i < w.values<float>().size(); ++i) w.values<float>()[i] = static_cast<float>(i % 7) - 3.0f;
  const kiln::Model model = b.build({b.relu(b.matmul(x, b.constant("w", w)))});

  kiln::TuneJobOptions job;
  job.compile.cache_dir = "off";
  job.compile.settings = {{"tune_db", dir.file("api.db")}};
  job.budget_s = 120;
  job.max_candidates = 1;
  std::set<kiln::TuneProgress::Stage> stages;
  job.on_progress = [&](const kiln::TuneProgress& p) { stages.insert(p.stage); };
  const kiln::TuneReport report = kiln::tune_models({model}, job);
  BOOST_TEST(report.database == dir.file("api.db"));
  BOOST_TEST(fs::exists(report.database));
  BOOST_TEST(report.models == 1u);
  BOOST_TEST(report.sites >= 1u);
  BOOST_TEST(report.to_tune == report.in_shard);
  BOOST_TEST(report.tuned.size() == report.to_tune);
  BOOST_TEST(!report.stopped);
  for (const kiln::TuneSite& site : report.tuned) {
    BOOST_TEST(!site.template_name.empty());
    BOOST_TEST(site.heuristic_ms > 0.0);
    BOOST_TEST(site.models == std::vector<std::string>{"one_product"});
  }
  for (auto stage : {kiln::TuneProgress::Stage::profiling, kiln::TuneProgress::Stage::planned,
                     kiln::TuneProgress::Stage::tuning})
    BOOST_TEST(stages.count(stage) == 1u);

  const kiln::TuneReport listed = kiln::explain_tuning({model}, job);
  BOOST_TEST(listed.listed.size() == report.in_shard);
  for (const kiln::TuneSite& site : listed.listed) BOOST_TEST(site.status == "applies", site.kernel);

  // Stopped before its first candidate: the first site's record keeps
  // nothing measured, no later site is started, and the report says so.
  job.compile.settings = {{"tune_db", dir.file("stopped.db")}};
  job.stop_requested = [] { return true; };
  const kiln::TuneReport stopped = kiln::tune_models({model}, job);
  BOOST_TEST(stopped.stopped);
  BOOST_TEST(stopped.tuned.size() == 1u);

  job.shard = 2;
  job.shards = 2;
  BOOST_CHECK_THROW(kiln::tune_models({model}, job), kiln::Error);
}
