#include "results.h"

namespace kiln::tools::bench {

const char* status_name(CellStatus status) {
  switch (status) {
    case CellStatus::ok: return "ok";
    case CellStatus::mismatch: return "mismatch";
    case CellStatus::failed: return "failed";
    case CellStatus::skipped: return "skipped";
  }
  return "unknown";
}

}  // namespace kiln::tools::bench
