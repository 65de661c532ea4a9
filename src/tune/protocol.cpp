#include "src/tune/protocol.h"

#include <kiln/error.h>

#include <array>
#include <utility>

namespace kiln::tune {

namespace {

constexpr std::array<std::pair<CandidateStatus, const char*>, 7> kStatusNames = {{
    {CandidateStatus::ok, "ok"},
    {CandidateStatus::wrong_result, "wrong_result"},
    {CandidateStatus::compile_failed, "compile_failed"},
    {CandidateStatus::crashed, "crashed"},
    {CandidateStatus::timed_out, "timed_out"},
    {CandidateStatus::out_of_memory, "out_of_memory"},
    {CandidateStatus::not_measured, "not_measured"},
}};

}  // namespace

std::string status_text(CandidateStatus status) {
  for (const auto& [value, name] : kStatusNames)
    if (value == status) return name;
  return "unknown";
}

CandidateStatus status_from_text(const std::string& text) {
  for (const auto& [value, name] : kStatusNames)
    if (text == name) return value;
  throw_error(ErrorKind::Corrupt, "unknown candidate status '" + text + "'");
}

nlohmann::json options_json(const MeasureOptions& o) {
  return {{"warmup", o.warmup},
          {"min_repeats", o.min_repeats},
          {"max_repeats", o.max_repeats},
          {"target_spread", o.target_spread},
          {"time_cap_s", o.time_cap_s},
          {"seed", o.seed},
          {"rotate_bytes", o.rotate_bytes},
          {"max_copies", o.max_copies},
          {"give_up_ms", o.give_up_ms},
          {"tolerance", o.tolerance},
          {"kernel_records", o.kernel_records}};
}

MeasureOptions options_from_json(const nlohmann::json& v) {
  try {
    MeasureOptions o;
    o.warmup = v.at("warmup").get<int>();
    o.min_repeats = v.at("min_repeats").get<int>();
    o.max_repeats = v.at("max_repeats").get<int>();
    o.target_spread = v.at("target_spread").get<double>();
    o.time_cap_s = v.at("time_cap_s").get<double>();
    o.seed = v.at("seed").get<std::uint64_t>();
    o.rotate_bytes = v.at("rotate_bytes").get<std::uint64_t>();
    o.max_copies = v.at("max_copies").get<int>();
    o.give_up_ms = v.at("give_up_ms").get<double>();
    o.tolerance = v.at("tolerance").get<double>();
    o.kernel_records = v.at("kernel_records").get<std::string>();
    return o;
  } catch (const nlohmann::json::exception& error) {
    throw_error(ErrorKind::Corrupt, std::string("tuning worker: malformed measure options: ") + error.what());
  }
}

nlohmann::json result_json(const CandidateResult& r) {
  return {{"knobs", r.knobs},       {"status", status_text(r.status)}, {"detail", r.detail},
          {"times_ms", r.times_ms}, {"median_ms", r.median_ms},        {"spread", r.spread}};
}

CandidateResult result_from_json(const nlohmann::json& v) {
  try {
    CandidateResult r;
    r.knobs = v.at("knobs").get<std::string>();
    r.status = status_from_text(v.at("status").get<std::string>());
    r.detail = v.at("detail").get<std::string>();
    r.times_ms = v.at("times_ms").get<std::vector<double>>();
    r.median_ms = v.at("median_ms").get<double>();
    r.spread = v.at("spread").get<double>();
    return r;
  } catch (const nlohmann::json::exception& error) {
    throw_error(ErrorKind::Corrupt, std::string("tuning worker: malformed result: ") + error.what());
  }
}

}  // namespace kiln::tune
