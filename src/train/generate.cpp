#include "train/generate.h"

#include "autograd/grad_mode.h"

namespace lt::train {

std::vector<int32_t> greedy_generate(const models::CausalLM& model,
                                     const std::vector<int32_t>& prompt, int64_t max_new_tokens,
                                     int32_t stop_id) {
  NoGradGuard no_grad;
  std::vector<int32_t> tokens = prompt;
  std::vector<int32_t> generated;
  const int64_t limit = model.config().exact_context();
  for (int64_t i = 0; i < max_new_tokens && static_cast<int64_t>(tokens.size()) < limit; ++i) {
    std::vector<int64_t> ids(tokens.begin(), tokens.end());
    const int64_t t = static_cast<int64_t>(ids.size());
    // The ids go to the model's device; only the last position's logits
    // (one row of the vocabulary) come back for the argmax.
    Tensor logits = model.logits(Tensor::from_vector(ids, {1, t}).to(model.device()));
    Tensor last =
        logits.select(0, 0).select(0, t - 1).to(Device::cpu()).to(DType::F32).contiguous();
    const float* p = last.data<float>();
    int32_t best = 0;
    for (int64_t v = 1; v < last.numel(); ++v) {
      if (p[v] > p[best]) best = static_cast<int32_t>(v);
    }
    if (best == stop_id) break;
    tokens.push_back(best);
    generated.push_back(best);
  }
  return generated;
}

}  // namespace lt::train
