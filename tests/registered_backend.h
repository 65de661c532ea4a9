// The throwaway backend of tests/registered_backend.cpp: a program linked
// with that file has, besides the built-in backends, one named
// kRegisteredBackend that nothing else in kiln knows.
#pragma once

namespace kiln::testing {

inline constexpr const char* kRegisteredBackend = "throwaway";

}  // namespace kiln::testing
