#pragma once
// StageTimes' fields as tables (stage_times.h has the struct). Kept out of
// stage_times.h because that header reaches CUDA translation units
// (plan/profile_cuda.cu through profile.h), and nvcc's host pass rewrites
// pointer-to-member declarations with parentheses that -Werror=parentheses
// refuses.
#include "plan/stage_times.h"

namespace lt::plan {

// The model's shape, the five times and the two working sets, each field
// named once, in the order the YAML writes them: for_model, from_yaml,
// to_yaml, check_model and the profiler walk these, so a field added here
// reaches all of them.
struct StageTimesShapeField {
  const char* name;
  int64_t StageTimes::*member;
  int64_t models::ModelConfig::*config;  // where for_model takes it from
};
inline constexpr StageTimesShapeField kStageTimesShape[] = {
    {"hidden_size", &StageTimes::hidden_size, &models::ModelConfig::hidden_size},
    {"intermediate_size", &StageTimes::intermediate_size, &models::ModelConfig::intermediate_size},
    {"num_attention_heads", &StageTimes::num_attention_heads,
     &models::ModelConfig::num_attention_heads},
    {"num_key_value_heads", &StageTimes::num_key_value_heads,
     &models::ModelConfig::num_key_value_heads},
    {"head_dim", &StageTimes::head_dim, &models::ModelConfig::head_dim},
    {"vocab_size", &StageTimes::vocab_size, &models::ModelConfig::vocab_size},
};

struct StageTimesCurveField {
  const char* name;
  StageCurve StageTimes::*member;
};
inline constexpr StageTimesCurveField kStageTimeCurves[] = {
    {"embed_forward", &StageTimes::embed_forward}, {"embed_backward", &StageTimes::embed_backward},
    {"block_forward", &StageTimes::block_forward}, {"block_backward", &StageTimes::block_backward},
    {"head_step", &StageTimes::head_step},
};
struct StageTimesFitField {
  const char* name;
  LinearFit StageTimes::*member;
};
// The measured working sets: optional keys, written after the times.
inline constexpr StageTimesFitField kStageBytesFits[] = {
    {"block_backward_bytes", &StageTimes::block_backward_bytes},
    {"head_step_bytes", &StageTimes::head_step_bytes},
};

}  // namespace lt::plan
