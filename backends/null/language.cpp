// Plain C99 for the null backend, the template for new backends: one call of
// the generated function runs one invocation, given its global id and the
// number of workgroups (what a GPU's built-ins would provide).
#include "backends/null/language.h"

namespace kiln::backend {

const LanguageTable& null_language() {
  static const LanguageTable table = c99_language();
  return table;
}

}  // namespace kiln::backend
