// Files the graph layer writes (.npy, .safetensors) appear whole or not at
// all: written to a temporary file beside the target, then renamed over it.
#pragma once

#include <functional>
#include <ostream>
#include <string>

namespace kiln::graph {

// Calls `write` with a stream on a temporary file next to `path` (the
// process id in its name, so that concurrent writers do not share it), then
// renames it to `path`. Throws Error(Io) naming the file on failure, having
// removed the temporary file.
void write_file_atomically(const std::string& path, const std::function<void(std::ostream&)>& write);

}  // namespace kiln::graph
