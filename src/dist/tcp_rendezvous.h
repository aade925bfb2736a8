#pragma once
// The torchrun-style bootstrap's one exchange: rank 0 hands a few bytes (the
// NCCL unique id) to every other rank over TCP at MASTER_ADDR:MASTER_PORT.
// Rank 0 listens on the port and sends the bytes to each rank that
// connects; the others connect (retrying while rank 0 is not listening
// yet) and read them. Every wait is bounded by `timeout_s`; the error names
// the address, the port and the ranks still missing.
#include <string>
#include <vector>

#include "dist/world.h"

namespace lt::dist {

// Rank 0 passes `bytes` and gets them back; the others pass an empty vector
// and get rank 0's `size` bytes.
std::vector<char> share_from_rank0(const World& world, std::vector<char> bytes, size_t size,
                                   double timeout_s);

}  // namespace lt::dist
