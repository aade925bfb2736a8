#pragma once
// The CUDA backend registers its allocators and copies with core/ (which
// does not depend on it) the first time something needs them.

namespace lt {

// Registers the CUDA backend once, when this build has one. default_allocator
// and copy_bytes call it: a program whose first device work is a copy into
// memory from another allocator (the streaming device's pinned slabs and
// slots, as streamed generation makes them) must still find the copies.
void ensure_device_backend();

}  // namespace lt
