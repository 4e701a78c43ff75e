//! Nesting limits and stack sizes, shared by the encoder and the decoder so that whatever one
//! writes natively the other reads.

/// Deepest nesting followed natively; the stack grows on the heap as needed up to this.
pub const MAX_DEPTH: usize = 200_000;

/// Deepest nesting of tuples and frozensets (the hashable containers). CPython hashes them
/// recursively on the C stack, so a deeper dict key or set item could overflow it: the encoder
/// sends deeper ones through pickle, and the decoder refuses them.
pub const MAX_HASHABLE_DEPTH: usize = 4096;

/// Stack kept free at every level of nesting for the Python and numpy calls made there (hashing
/// a key, building a datetime, a serializer's code)...
pub const RED_ZONE: usize = 1 << 20;
/// ...and the size of each new stack segment once it runs low.
pub const STACK_SEGMENT: usize = 16 << 20;
