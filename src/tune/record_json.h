// Records as JSON: the export format, the candidates column of the database,
// and the canonical text merge breaks ties with. Also the checks every record
// passes before it is stored.
#pragma once

#include "src/tune/database.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace kiln::tune {

nlohmann::json candidates_to_json(const std::vector<CandidateResult>& candidates);
// Throws Error(Corrupt) naming `where` and the problem.
std::vector<CandidateResult> candidates_from_json(const nlohmann::json& json, const std::string& where);

nlohmann::json record_to_json(const Record& record);
Record record_from_json(const nlohmann::json& json, const std::string& where);

// The record as one canonical line (sorted keys, shortest round-trip
// doubles): equal text if and only if equal records.
std::string canonical_text(const Record& record);

// Throws Error(InvalidArgument) naming the problem: an empty kernel,
// template or device name; a date not of the form 2026-12-01T16:30:00Z (so
// that comparing dates as text orders them in time); a time that is
// negative or not finite.
void check_record(const Record& record);

}  // namespace kiln::tune
