// KILN_API marks what libkiln exports: the public API declared under
// include/kiln. libkiln is built with hidden visibility, so everything else
// compiled into it (the graph IR, passes, backends, the code it compiles in
// from other libraries) stays inside it and cannot clash with an
// application's own symbols. Applications never define it.
#pragma once

#define KILN_API __attribute__((visibility("default")))
