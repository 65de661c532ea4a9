// Writing an output file so that readers never see half of it: every file
// kiln writes (reports, .npy outputs, pictures) goes through here.
#pragma once

#include <filesystem>
#include <string_view>

namespace kiln::tools {

// Writes `content` to a temporary file next to `path`, then renames it over
// `path`. Throws Error(Io) naming the file on failure.
void write_file_atomically(const std::filesystem::path& path, std::string_view content);

}  // namespace kiln::tools
