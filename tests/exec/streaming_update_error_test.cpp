// An optimizer update that throws on the streaming executor's optimizer
// thread: the error reaches the caller from step() or sync(), naming the
// stage whose update failed, every later step refuses with the same error,
// and teardown waits for the updates still queued before it frees what they
// use (the trace recorder, the gradient slabs). Run these under ASan and
// UBSan (`make sanitize`): a task that outlives what it points at is a
// heap-use-after-free there, and often nothing visible in a plain build.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <thread>

#include "core/random.h"
#include "exec/stand_in_device.h"
#include "exec/streaming.h"
#include "io/hf_model.h"
#include "optim/adamw.h"
#include "support/errors.h"
#include "support/failing_optimizer.h"
#include "support/random_batch.h"

namespace lt::exec {
namespace {

namespace fs = std::filesystem;

models::CausalLM llama() {
  return io::load_hf_model(fs::path(LT_SOURCE_DIR) / "tests/models/fixtures/families/llama");
}

// The index of the first parameter of stage `stage` (model order).
size_t first_parameter_of(const models::CausalLM& model, size_t stage) {
  size_t first = 0;
  for (size_t s = 0; s < stage; ++s) {
    nn::NamedParameters own;
    model.stages()[s]->collect(own);
    first += own.size();
  }
  return first;
}

std::vector<data::Batch> batch(const models::CausalLM& model, uint64_t seed) {
  Generator gen(seed);
  return {lt::testing::random_token_batch(gen, 2, 7, model.config().vocab_size, {1})};
}

StepOptions step_options() {
  StepOptions o;
  o.lr = 1e-3;
  o.max_grad_norm = 1.0;
  return o;
}

constexpr const char* kBlock0Failed =
    "the optimizer update of stage 'block.0' failed: injected failure";

// Overlapped with the next step, the update of step 1 fails after step 1
// has returned; step 2 waits for it before block.0's forward and throws.
TEST(StreamingUpdateError, SurfacesFromTheNextStepNamingTheStage) {
  models::CausalLM model = llama();
  FailingOptimizer optimizer(model.parameters(), 1, first_parameter_of(model, 1));
  ::testing::internal::CaptureStderr();
  {
    StreamingExecutor streaming(model, optimizer, std::make_unique<StandInDevice>(), {});
    streaming.step(batch(model, 1), step_options());
    streaming.step(batch(model, 2), step_options());
    const std::string message =
        testing::error_of([&] { streaming.step(batch(model, 3), step_options()); });
    EXPECT_NE(message.find(kBlock0Failed), std::string::npos) << message;
    // The stage's parameters may be partly updated: the executor stops.
    EXPECT_EQ(testing::error_of([&] { streaming.step(batch(model, 4), step_options()); }), message);
    EXPECT_EQ(testing::error_of([&] { streaming.sync(); }), message);
  }
  // Reported already, so teardown says nothing more.
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

TEST(StreamingUpdateError, WithoutOverlapTheFailingStepThrows) {
  models::CausalLM model = llama();
  FailingOptimizer optimizer(model.parameters(), 1, first_parameter_of(model, 1));
  StreamingOptions options;
  options.overlap_optimizer = false;
  StreamingExecutor streaming(model, optimizer, std::make_unique<StandInDevice>(), options);
  streaming.step(batch(model, 1), step_options());
  const std::string message =
      testing::error_of([&] { streaming.step(batch(model, 2), step_options()); });
  EXPECT_NE(message.find(kBlock0Failed), std::string::npos) << message;
  EXPECT_EQ(testing::error_of([&] { streaming.step(batch(model, 3), step_options()); }), message);
}

TEST(StreamingUpdateError, SyncReportsAFailureOfTheLastStep) {
  models::CausalLM model = llama();
  const size_t head = model.stages().size() - 1;
  FailingOptimizer optimizer(model.parameters(), 0, first_parameter_of(model, head));
  StreamingExecutor streaming(model, optimizer, std::make_unique<StandInDevice>(), {});
  streaming.step(batch(model, 1), step_options());
  const std::string message = testing::error_of([&] { streaming.sync(); });
  EXPECT_NE(message.find("the optimizer update of stage 'head' failed: injected failure"),
            std::string::npos)
      << message;
}

// Note [Stages on the device]: the update of a stage kept on the device
// runs on the compute thread, so the failing step itself throws, naming the
// stage; later steps refuse; and teardown puts the masters back in host
// memory (the device, owned by the executor, goes with it; a master left
// on it would be freed memory, which ASan reports when the model goes).
TEST(StreamingUpdateError, AStageOnTheDeviceFailsTheStepAndComesBackToTheHost) {
  models::CausalLM model = llama();
  FailingOptimizer optimizer(model.parameters(), 1, first_parameter_of(model, 1));
  StreamingOptions options;
  options.schedule = Schedule::all_gpu(static_cast<int>(model.config().num_hidden_layers));
  options.schedule.stages_on_device = {0, 1};
  {
    StreamingExecutor streaming(model, optimizer, std::make_unique<StandInDevice>(), options);
    streaming.step(batch(model, 1), step_options());
    const std::string message =
        testing::error_of([&] { streaming.step(batch(model, 2), step_options()); });
    EXPECT_NE(message.find("the optimizer update of stage 'block.0' on the device failed: "
                           "injected failure"),
              std::string::npos)
        << message;
    EXPECT_EQ(testing::error_of([&] { streaming.step(batch(model, 3), step_options()); }), message);
  }
  for (const auto& [name, p] : model.parameters()) {
    ASSERT_TRUE(p.device().is_cpu()) << name;
    EXPECT_TRUE(std::isfinite(p.to_vector<float>().front())) << name;
  }
}

// The embedding's update fails and every later stage's update is slow, so
// they are all still queued when the executor is destroyed straight after
// the step, with tracing on (each update records a span). Teardown must
// wait for them, with the recorder alive, write the trace, and say on
// stderr what failed, since no step() or sync() reported it.
TEST(StreamingUpdateError, TeardownWaitsForQueuedUpdatesAndSaysWhatFailed) {
  models::CausalLM model = llama();
  FailingOptimizer optimizer(model.parameters(), 0, 0);
  optimizer.slow_down_updates_after_the_failure(std::chrono::milliseconds(20));
  const fs::path trace =
      fs::temp_directory_path() / ("lt_update_error_trace_" + std::to_string(getpid()) + ".json");
  fs::remove(trace);
  StreamingOptions options;
  options.trace_path = trace.string();
  ::testing::internal::CaptureStderr();
  {
    StreamingExecutor streaming(model, optimizer, std::make_unique<StandInDevice>(), options);
    streaming.step(batch(model, 1), step_options());
  }
  const std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(err.find("the optimizer update of stage 'embed' failed: injected failure"),
            std::string::npos)
      << err;
  // Every stage after the embedding was updated before teardown finished.
  EXPECT_EQ(optimizer.parameters_updated(),
            static_cast<int>(model.parameters().size() - first_parameter_of(model, 1)));
  EXPECT_TRUE(fs::exists(trace));
  fs::remove(trace);
}

}  // namespace
}  // namespace lt::exec
