// The tuning worker's protocol: one JSON object per line each way over the
// worker's stdin and stdout (its own output goes to stderr).
//
//   tuner -> worker  {"backend": "vulkan", "device": 0}          once, first
//   worker -> tuner  {"ready": true} | {"error": "why"}           (then it exits)
//   tuner -> worker  {"prepare": "<site JSON>", "options": {...}}  the site's reference, once
//   worker -> tuner  {"ready": true} | {"error": "why"}
//   tuner -> worker  {"site": "<site JSON>", "knobs": "...", "options": {...}}
//                    optionally with "ahead": ["<knobs>", ...], "threads": N: kernel
//                    sites' candidates to compile with this one first, N at once
//   worker -> tuner  {"result": {"knobs", "status", "detail", "times_ms", "median_ms", "spread"}}
#pragma once

#include "src/tune/database.h"
#include "src/tune/measure.h"

#include <nlohmann/json.hpp>

#include <string>

namespace kiln::tune {

// "ok", "wrong_result", ...: the status names of the protocol (and of the
// database's candidate_status_name, which this does not link against).
std::string status_text(CandidateStatus status);
// Throws Error(Corrupt) for an unknown name.
CandidateStatus status_from_text(const std::string& text);

nlohmann::json options_json(const MeasureOptions& options);
MeasureOptions options_from_json(const nlohmann::json& value);

nlohmann::json result_json(const CandidateResult& result);
// Throws Error(Corrupt) naming what is malformed.
CandidateResult result_from_json(const nlohmann::json& value);

}  // namespace kiln::tune
