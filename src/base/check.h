// kiln's own checks, in terms of the public kiln::throw_error (kept out of the
// public error.h: applications have their own macros).
#pragma once

#include <kiln/error.h>

#include <string>

// Checks a condition that depends on user input; throws a user error if false.
#define KILN_CHECK(cond, kind, message)                   \
  do {                                                    \
    if (!(cond)) ::kiln::throw_error((kind), (message));  \
  } while (0)

// Checks an invariant of kiln itself; a failure is a bug (ErrorKind::Internal).
#define KILN_ASSERT(cond)                                                          \
  do {                                                                             \
    if (!(cond))                                                                   \
      ::kiln::throw_error(::kiln::ErrorKind::Internal,                             \
                          std::string("internal error: assertion '") + #cond +     \
                              "' failed at " + __FILE__ + ":" + std::to_string(__LINE__)); \
  } while (0)
