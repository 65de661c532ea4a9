#include "src/tune/record_json.h"

#include "src/base/check.h"

#include <kiln/error.h>

#include <cctype>
#include <cmath>
#include <limits>

namespace kiln::tune {
namespace {

using nlohmann::json;

constexpr CandidateStatus kStatuses[] = {
    CandidateStatus::ok,          CandidateStatus::wrong_result,  CandidateStatus::compile_failed,
    CandidateStatus::crashed,     CandidateStatus::timed_out,     CandidateStatus::out_of_memory,
    CandidateStatus::not_measured,
};

[[noreturn]] void malformed(const std::string& where, const std::string& problem) {
  throw_error(ErrorKind::Corrupt, where + ": " + problem);
}

const json& member(const json& object, const char* name, const std::string& where) {
  if (!object.is_object()) malformed(where, "not a JSON object");
  auto it = object.find(name);
  if (it == object.end()) malformed(where, std::string("'") + name + "' is missing");
  return *it;
}

std::string get_string(const json& object, const char* name, const std::string& where) {
  const json& value = member(object, name, where);
  if (!value.is_string()) malformed(where, std::string("'") + name + "' is not a string");
  return value.get<std::string>();
}

double get_number(const json& object, const char* name, const std::string& where) {
  const json& value = member(object, name, where);
  if (!value.is_number()) malformed(where, std::string("'") + name + "' is not a number");
  return value.get<double>();
}

int get_int(const json& object, const char* name, const std::string& where) {
  const json& value = member(object, name, where);
  if (!value.is_number_integer()) malformed(where, std::string("'") + name + "' is not an integer");
  const auto v = value.get<std::int64_t>();
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max())
    malformed(where, std::string("'") + name + "' is out of range");
  return static_cast<int>(v);
}

CandidateStatus status_from_name(const std::string& name, const std::string& where) {
  for (CandidateStatus s : kStatuses)
    if (name == candidate_status_name(s)) return s;
  malformed(where, "unknown candidate status '" + name.substr(0, 64) + "'");
}

bool is_utc_date(const std::string& date) {
  // YYYY-MM-DDTHH:MM:SSZ: the one spelling, so text order is time order.
  static constexpr char kPattern[] = "dddd-dd-ddTdd:dd:ddZ";
  if (date.size() != sizeof kPattern - 1) return false;
  for (std::size_t i = 0; i < date.size(); ++i) {
    const bool digit = std::isdigit(static_cast<unsigned char>(date[i])) != 0;
    if (kPattern[i] == 'd' ? !digit : date[i] != kPattern[i]) return false;
  }
  return true;
}

void check_time(double ms, const std::string& what) {
  KILN_CHECK(std::isfinite(ms) && ms >= 0, ErrorKind::InvalidArgument,
             "tuning record: " + what + " is " + std::to_string(ms) + ", not a finite time >= 0");
}

}  // namespace

json candidates_to_json(const std::vector<CandidateResult>& candidates) {
  json out = json::array();
  for (const CandidateResult& c : candidates)
    out.push_back({{"knobs", c.knobs}, {"status", candidate_status_name(c.status)}, {"detail", c.detail},
                   {"times_ms", c.times_ms}, {"median_ms", c.median_ms}, {"spread", c.spread}});
  return out;
}

std::vector<CandidateResult> candidates_from_json(const json& candidates, const std::string& where) {
  if (!candidates.is_array()) malformed(where, "'candidates' is not an array");
  std::vector<CandidateResult> out;
  out.reserve(candidates.size());
  for (std::size_t i = 0; i < candidates.size(); ++i) {
    const std::string at = where + ", candidate " + std::to_string(i);
    const json& c = candidates[i];
    CandidateResult r;
    r.knobs = get_string(c, "knobs", at);
    r.status = status_from_name(get_string(c, "status", at), at);
    r.detail = get_string(c, "detail", at);
    const json& times = member(c, "times_ms", at);
    if (!times.is_array()) malformed(at, "'times_ms' is not an array");
    for (const json& t : times) {
      if (!t.is_number()) malformed(at, "'times_ms' holds something other than a number");
      r.times_ms.push_back(t.get<double>());
    }
    r.median_ms = get_number(c, "median_ms", at);
    r.spread = get_number(c, "spread", at);
    out.push_back(std::move(r));
  }
  return out;
}

json record_to_json(const Record& r) {
  return {
      {"key",
       {{"kernel", r.key.kernel},
        {"template", r.key.template_name},
        {"template_version", r.key.template_version},
        {"backend", r.key.device.backend},
        {"device", r.key.device.device},
        {"driver", r.key.device.driver}}},
      {"heuristic", {{"knobs", r.heuristic_knobs}, {"ms", r.heuristic_ms}}},
      {"winner", {{"knobs", r.winner_knobs}, {"ms", r.winner_ms}}},
      {"candidates", candidates_to_json(r.candidates)},
      {"provenance",
       {{"date", r.provenance.date},
        {"host", r.provenance.host},
        {"kiln_version", r.provenance.kiln_version},
        {"budget_s", r.provenance.budget_s}}},
  };
}

Record record_from_json(const json& j, const std::string& where) {
  Record r;
  const json& key = member(j, "key", where);
  r.key.kernel = get_string(key, "kernel", where + ", key");
  r.key.template_name = get_string(key, "template", where + ", key");
  r.key.template_version = get_int(key, "template_version", where + ", key");
  r.key.device.backend = get_string(key, "backend", where + ", key");
  r.key.device.device = get_string(key, "device", where + ", key");
  r.key.device.driver = get_string(key, "driver", where + ", key");
  const json& heuristic = member(j, "heuristic", where);
  r.heuristic_knobs = get_string(heuristic, "knobs", where + ", heuristic");
  r.heuristic_ms = get_number(heuristic, "ms", where + ", heuristic");
  const json& winner = member(j, "winner", where);
  r.winner_knobs = get_string(winner, "knobs", where + ", winner");
  r.winner_ms = get_number(winner, "ms", where + ", winner");
  r.candidates = candidates_from_json(member(j, "candidates", where), where);
  const json& provenance = member(j, "provenance", where);
  r.provenance.date = get_string(provenance, "date", where + ", provenance");
  r.provenance.host = get_string(provenance, "host", where + ", provenance");
  r.provenance.kiln_version = get_string(provenance, "kiln_version", where + ", provenance");
  r.provenance.budget_s = get_number(provenance, "budget_s", where + ", provenance");
  return r;
}

std::string canonical_text(const Record& record) { return record_to_json(record).dump(); }

void check_record(const Record& r) {
  KILN_CHECK(!r.key.kernel.empty(), ErrorKind::InvalidArgument, "tuning record: the kernel text is empty");
  const std::string what = "tuning record for '" + r.key.kernel.substr(0, 200) + "': ";
  KILN_CHECK(!r.key.template_name.empty(), ErrorKind::InvalidArgument, what + "the template name is empty");
  KILN_CHECK(!r.key.device.backend.empty() && !r.key.device.device.empty(), ErrorKind::InvalidArgument,
             what + "the device fingerprint has no backend or device name");
  KILN_CHECK(is_utc_date(r.provenance.date), ErrorKind::InvalidArgument,
             what + "date '" + r.provenance.date.substr(0, 64) + "' is not of the form 2026-12-01T16:30:00Z (UTC)");
  check_time(r.heuristic_ms, "the heuristic's time");
  check_time(r.winner_ms, "the winner's time");
  KILN_CHECK(std::isfinite(r.provenance.budget_s) && r.provenance.budget_s >= 0, ErrorKind::InvalidArgument,
             what + "the budget is not a finite number of seconds >= 0");
  for (const CandidateResult& c : r.candidates) {
    const std::string knobs = "candidate " + c.knobs.substr(0, 64);
    for (double t : c.times_ms) check_time(t, knobs + "'s time");
    check_time(c.median_ms, knobs + "'s median");
    KILN_CHECK(std::isfinite(c.spread) && c.spread >= 0, ErrorKind::InvalidArgument,
               what + knobs + "'s spread is not a finite number >= 0");
  }
}

}  // namespace kiln::tune
