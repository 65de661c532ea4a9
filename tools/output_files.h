// Where `kiln run` writes: each output tensor as DIR/<output name>.npy and a
// picture as DIR/<model>_mask.png or DIR/<model>_detections.png. Model and
// output names come from files, so they are made safe and distinct as file
// names here, and the folder is checked before any work whose results go there.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

namespace kiln::tools {

// The most bytes of a file name kiln makes from a name (file systems allow
// 255; a "_<n>" suffix and the extension still fit).
inline constexpr std::size_t kMaxFileStemBytes = 200;

// `name` as a file name stem: characters other than letters, digits, '.',
// '-' and '_' become '_' (so '/' and ':' cannot leave the folder or name a
// stream), a leading '.' gets a '_' before it, an empty name becomes "_", and
// it is cut to kMaxFileStemBytes.
std::string file_stem_for(const std::string& name);

// One file name (stem + extension) per name, all distinct: when names give
// the same stem ("a/b" and "a:b" both give "a_b"), the first keeps it and the
// later ones get "_2", "_3", ... in order, skipping names already taken.
std::vector<std::string> distinct_file_names(const std::vector<std::string>& names, const std::string& extension);

// Creates `dir` (and its parents) if needed and checks that a file can be
// created in it. Throws Error(Io) naming the folder and the reason (a file in
// its place, no permission, a read-only file system).
void prepare_output_dir(const std::string& dir);

}  // namespace kiln::tools
