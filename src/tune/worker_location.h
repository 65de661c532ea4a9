// Where kiln looks for the kiln-tune-worker executable when neither
// TuneOptions::worker_path nor $KILN_TUNE_WORKER names one, so max-autotune
// works from the build tree, from an installed kiln (the worker lives in
// <libexecdir>/kiln) and from an install that was moved or staged with
// DESTDIR (found relative to libkiln or to the program).
#pragma once

#include <string>
#include <vector>

namespace kiln::tune {

// The candidate paths, in the order they are tried:
//   1. beside the running executable (a program shipped with its worker);
//   2. relative to the shared object holding kiln's code (libkiln in <libdir>);
//   3. relative to the running executable, as from <bindir> (an installed kiln tool);
//   4. the build tree's worker (before 5, so that a build-tree kiln never
//      starts an older installed worker);
//   5. the configured install path (<prefix>/<libexecdir>/kiln), for a
//      program linked with a static libkiln.
std::vector<std::string> worker_search_path();

// The first of worker_search_path() that is a regular file; else the build
// tree's path, which the worker's start then reports as missing.
std::string find_worker();

// The same places for another file kiln installs beside its worker (the
// SentencePiece module, src/generate/sentencepiece_shim.cpp), and the first
// of them that is a regular file, else "".
std::vector<std::string> helper_search_path(const std::string& file_name);
std::string find_helper(const std::string& file_name);

}  // namespace kiln::tune
