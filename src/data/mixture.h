#pragma once
// Several datasets mixed into one training stream by weight, and a held-out
// evaluation split, as `data.sources` and `data.eval_split` ask.
//
// Mixing (the convention of Hugging Face `interleave_datasets` with
// probabilities, which LLaMA-Factory's `interleave_probs` and axolotl use):
// every sample the Batcher takes is a draw. Draw k comes from source s with
// probability weight_s / sum(weights), decided by a hash of (seed, k) alone,
// so the sequence of sources is a pure function of the seed and needs no
// saved state beyond how many draws were made. Within a source, its n-th
// draw is element n % size of that source's own seeded permutation for
// epoch n / size: each source cycles through all its samples before
// repeating any, independently of the others (a small source repeats
// sooner; a large one is not read to its end before a small one repeats).
// Weights count samples, not tokens.
//
// Held-out split: a sample goes to evaluation when a seeded 64-bit hash of
// its token ids, read as a fraction of 2^64, is below `eval_split`. The
// split depends on the sample's content only: it does not change when the
// file's rows are reordered or other rows are added, and duplicated rows
// land on the same side, so no copy of an evaluation row is trained on.
#include <cstdint>
#include <string>
#include <vector>

#include "data/batching.h"

namespace lt::data {

// One entry of `data.sources`. Empty format or template: the data.* key's.
struct DataSource {
  std::string path;
  std::string format;
  double weight = 1.0;
  std::string template_name;    // key "template"
  std::string split = "train";  // train: mixed into training | eval: evaluation rows only
  bool operator==(const DataSource&) const = default;
};

// The source of draw `draw` for the given weights (each > 0): the first s
// whose running sum of weights passes u x total, u uniform in [0, 1) from a
// hash of (seed, draw). One weight: always 0.
size_t mixture_source(uint64_t seed, uint64_t draw, const std::vector<double>& weights);

// True when `sample` belongs to the held-out fraction (0 <= fraction < 1)
// for `seed`.
bool is_held_out(const Sample& sample, double fraction, uint64_t seed);

// Moves the held-out samples of `train` to the end of `eval`, keeping the
// order of both.
void split_off_held_out(std::vector<Sample>& train, std::vector<Sample>& eval, double fraction,
                        uint64_t seed);

}  // namespace lt::data
