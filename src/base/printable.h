// Text from a file or a user, made safe to print in an error message: bytes
// that a terminal would act on (ASCII controls such as ESC, DEL, the C1
// controls U+0080-U+009F) and bytes that are not UTF-8 are written as \xNN;
// printable ASCII and the rest of valid UTF-8 (a file name in Greek) stay.
#pragma once

#include <string>
#include <string_view>

namespace kiln::base {

std::string printable(std::string_view text);

// Whether `text` is valid UTF-8 (no overlong forms, surrogates or code
// points past U+10FFFF): what JSON text must be.
bool is_valid_utf8(std::string_view text);

}  // namespace kiln::base
