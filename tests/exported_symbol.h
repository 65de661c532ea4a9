// Whose a symbol in a shared library's dynamic symbol table is, read from
// its mangled name (Itanium C++ ABI), for the linkage suite's check that the
// shared libkiln exports its public API and nothing of its insides.
//
// The mangled name, not nm -C's text: a demangled function template carries
// its return type first ("void std::vector<...>::_M_realloc_insert<...>",
// "std::span<float> kiln::Tensor::values<float>()"), so where it belongs is
// not the start of the text.
#pragma once

#include <string>
#include <string_view>

namespace exported_symbol {

enum class Owner {
  kiln_public,       // in namespace kiln outside the internal namespaces: the API (and its classes' members)
  kiln_internal,     // kiln::graph::, kiln::runtime::, ..., or a standard-library template over them
  standard_library,  // std::, __gnu_cxx:: instantiations over public or standard types; typeinfo of builtin-made types
  elf_housekeeping,  // _init, _fini, _edata, _end, __bss_start: every shared library defines them
  foreign,           // anything else: C symbols (sqlite3_*, XXH64), other libraries' C++ (glslang::, spvtools::)
};

std::string_view owner_name(Owner owner);

struct Symbol {
  std::string demangled;  // for messages; the mangled name itself when it is not C++
  Owner owner;
};

// `mangled` as nm -D prints it without -C (a "@VERSION" suffix is ignored).
Symbol classify(std::string_view mangled);

}  // namespace exported_symbol
