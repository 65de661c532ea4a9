// libFuzzer target: tuning-database exports (`kiln tune export`'s JSON),
// imported into a database in memory; what was imported is exported and
// imported again into another, which must hold as many records.
#include "fuzz_readers.h"
#include "src/tune/database.h"

#include <cstdint>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  kiln::fuzz::expect_result_or_user_error("a tuning export", [&] {
    kiln::tune::Database db = kiln::tune::Database::in_memory();
    db.import_json(text);
    kiln::tune::Database again = kiln::tune::Database::in_memory();
    again.import_json(db.export_json());
    if (again.size() != db.size()) std::abort();
  });
  return 0;
}
