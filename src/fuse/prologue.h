// Prologue fusion in the kernel IR: a pointwise producer kernel is inlined
// into its consumer at every load of the value they share, so the value is
// never written to memory. The consumer may read it at any index (a softmax
// or layer norm reads a row several times): the producer's body is computed
// there, at that index, once per load.
//
// The consumer may bind a view of the produced value (a Reshape or Flatten
// that moves no data): the element at a linear index is the same in both.
#pragma once

#include "src/fuse/epilogue.h"

#include <cstdint>
#include <optional>
#include <string>

namespace kiln::fuse {

// Why `producer` (writing `produced`, `elements` elements) cannot be inlined
// into `consumer`'s loads of `consumed` (`produced` or a view of it), or
// nullopt when it can. Inlinable means: the producer runs one invocation per
// element, straight-line code (no loops or branches) ending in its only
// store, of `produced` at its global index, and reads nothing else it writes;
// the consumer only reads `consumed`, with scalar loads that are always
// evaluated (not under a select, which evaluates only the chosen operand).
std::optional<std::string> prologue_unfusable_reason(const BoundKernel& producer, const BoundKernel& consumer,
                                                     graph::ValueId produced, graph::ValueId consumed,
                                                     std::int64_t elements);

// The consumer with the producer's body inlined before each statement that
// loads `consumed` (its global index replaced by the load index, its store by
// a variable the load becomes); the value's buffers are dropped and the
// producer's inputs appended (or shared with a buffer the consumer already
// reads for the same value). Throws Error(Internal) if
// prologue_unfusable_reason is not nullopt.
BoundKernel fuse_prologue(const BoundKernel& producer, const BoundKernel& consumer, graph::ValueId produced,
                          graph::ValueId consumed, std::int64_t elements);

}  // namespace kiln::fuse
