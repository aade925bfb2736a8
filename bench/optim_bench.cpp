// CPU optimizer throughput and memory: fp32 AdamW against the hybrid 8-bit
// AdamW (issues 7 and 9), each with and without the bf16 shadow written in
// the same pass, in parameters per second; and the bytes of optimizer
// state per parameter with the host-memory totals for the Qwen2.5-7B shape.
//
//   build/optim_bench [--params N] [--tensors T] [--runs R] [--compiled]
//
// --compiled adds rows with the updates train.compile runs (the fusion
// compiler's kernels, optim::Optimizer::use_compiled_updates; compiled once,
// in memory, before the warm-up), beside the hand-written ones.
//
// Without LT_NUM_THREADS set it re-runs itself with 1, 2 and all hardware
// threads (the thread pool's size is fixed per process). Each row: 2
// warm-up steps (first touch of the state pages, code tables), then R
// timed steps (default 7); the median is reported, min and max beside it.
// The model: N f32 parameters (default 64M) as T equal tensors (default 8),
// f32 gradients, so nothing fits in cache. Many small tensors (a model has
// hundreds: Qwen2.5-3B 434, 868 with a rank's shards) show the cost of each
// parameter's call rather than of each element. The instruction set is the best the
// CPU has unless LT_OPTIM_ISA says otherwise (scalar, avx2, avx512).
//
// As the streaming executor on a GPU updates (issue 27: its rate in the
// run's traces was ~25% under the profile's): --bf16-grads (the gradients
// it downloads), --pinned (gradients and bf16 shadows in page-locked memory
// from a PinnedHostPool, as its slabs and upload sources), --spin N (N
// threads busy beside the update, as threads waiting on CUDA by spinning).
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "compile/kernel_cache.h"
#include "core/error.h"
#include "core/pinned_pool.h"
#include "core/random.h"
#include "core/thread_pool.h"
#include "nn/module.h"
#include "optim/adamw.h"
#include "optim/adamw8bit.h"
#include "optim/simd.h"

namespace {

using lt::DType;
using lt::Tensor;

struct AsStreaming {
  bool bf16_grads = false;
  bool pinned = false;
  int spin = 0;
};
AsStreaming as_streaming;

lt::PinnedHostPool& pinned_pool() {
  static auto* pool = new lt::PinnedHostPool();  // never destroyed: tensors outlive statics
  return *pool;
}

// A host tensor like `t`, in page-locked memory with --pinned.
Tensor host_empty(const lt::Shape& shape, DType dtype) {
  return as_streaming.pinned ? Tensor::empty(shape, dtype, pinned_pool())
                             : Tensor::empty(shape, dtype);
}

lt::nn::NamedParameters make_model(int64_t params, int64_t tensors) {
  lt::Generator gen(1);
  lt::nn::NamedParameters out;
  const int64_t each = params / tensors;
  for (int64_t i = 0; i < tensors; ++i) {
    const std::string name = "layer" + std::to_string(i) + ".weight";
    Tensor p = lt::nn::make_parameter(Tensor::randn({each}, gen), name);
    Tensor g = Tensor::randn({each}, gen);
    float* gv = g.data<float>();
    for (int64_t e = 0; e < each; ++e) gv[e] *= 1e-3f;
    Tensor grad = host_empty(g.shape(), as_streaming.bf16_grads ? DType::BF16 : DType::F32);
    grad.copy_(as_streaming.bf16_grads ? g.to(DType::BF16) : g);
    p.set_grad(grad);
    out.emplace_back(name, p);
  }
  return out;
}

struct Timing {
  double median_s, min_s, max_s;
};

Timing time_steps(lt::optim::Optimizer& opt, int runs) {
  for (int w = 0; w < 2; ++w) opt.step(1e-4, 0.5);
  std::atomic<bool> stop{false};
  std::vector<std::thread> spinners;
  for (int k = 0; k < as_streaming.spin; ++k)
    spinners.emplace_back([&stop] {
      while (!stop.load(std::memory_order_relaxed)) {
      }
    });
  std::vector<double> s;
  for (int r = 0; r < runs; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    opt.step(1e-4, 0.5);
    s.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  stop = true;
  for (std::thread& t : spinners) t.join();
  std::sort(s.begin(), s.end());
  return {s[s.size() / 2], s.front(), s.back()};
}

// Bytes each update moves per parameter (reads + writes), f32 gradients:
// fp32 AdamW reads p g m v, writes p m v (28); 8-bit reads p g and two
// code bytes, writes p and two code bytes (16; the scales are 8 bytes per
// block); the shadow adds a 2-byte write.
void child(int64_t params, int64_t tensors, int runs, bool compiled) {
  const int threads = lt::thread_pool().num_threads();
  const char* isa = lt::optim::isa_name(lt::optim::active_isa());
  struct Row {
    const char* name;
    bool eight_bit, shadow;
    double bytes;
    bool compiled = false;
  };
  std::vector<Row> rows = {{"adamw", false, false, 28},
                           {"adamw + bf16 shadow", false, true, 30},
                           {"adamw8bit", true, false, 16},
                           {"adamw8bit + bf16 shadow", true, true, 18}};
  if (compiled) {
    rows.push_back({"adamw, compiled", false, false, 28, true});
    rows.push_back({"adamw8bit, compiled", true, false, 16, true});
  }
  for (const Row& row : rows) {
    lt::nn::NamedParameters model = make_model(params, tensors);
    std::unique_ptr<lt::optim::Optimizer> opt;
    if (row.eight_bit) {
      opt = std::make_unique<lt::optim::AdamW8bit>(
          model, lt::optim::AdamWOptions{.lr = 1e-4, .weight_decay = 0.1});
    } else {
      opt = std::make_unique<lt::optim::AdamW>(
          model, lt::optim::AdamWOptions{.lr = 1e-4, .weight_decay = 0.1});
    }
    std::vector<Tensor> shadows;
    if (row.shadow) {
      for (size_t i = 0; i < model.size(); ++i) {
        shadows.push_back(host_empty(model[i].second.shape(), DType::BF16));
        opt->set_bf16_shadow(i, shadows.back());
      }
    }
    if (row.compiled) {
      LT_CHECK(opt->use_compiled_updates(std::make_shared<lt::compile::KernelCache>()),
               "optim_bench: ", row.name, " has no compiled updates");
    }
    const Timing t = time_steps(*opt, runs);
    // A compiled row that quietly ran the hand-written kernels would time
    // those: every update of every timed and warm-up step must be compiled.
    if (row.compiled) {
      const int64_t expected = (runs + 2) * static_cast<int64_t>(model.size());
      LT_CHECK(opt->compiled_updates() == expected, "optim_bench: ", row.name, " compiled ",
               opt->compiled_updates(), " of ", expected, " updates (", opt->compiled_fallback(),
               ")");
    }
    const double n = static_cast<double>(params / tensors * tensors);
    std::printf("| %-24s | %7d | %-6s | %6.3f | %6.3f - %6.3f | %6.1f |\n", row.name, threads, isa,
                n / t.median_s / 1e9, n / t.max_s / 1e9, n / t.min_s / 1e9,
                n * row.bytes / t.median_s / 1e9);
    std::fflush(stdout);
  }
}

// --- memory ------------------------------------------------------------------

struct ShapeCount {
  int64_t numel, count;
};

// The Qwen2.5-7B shape: hidden 3584, 28 layers, FFN 18944, 28 query and 4
// key/value heads of 128, q/k/v biases, vocabulary 152064, untied.
std::vector<ShapeCount> qwen7b_tensors() {
  const int64_t h = 3584, layers = 28, ffn = 18944, kv = 4 * 128, vocab = 152064;
  return {{vocab * h, 2},        // embed_tokens, lm_head
          {h, 1},                // final norm
          {h * h, 2 * layers},   // q_proj, o_proj
          {h * kv, 2 * layers},  // k_proj, v_proj
          {h, layers},
          {kv, 2 * layers},       // q bias; k, v biases
          {h * ffn, 3 * layers},  // gate, up, down
          {h, 2 * layers}};       // input and post-attn norms
}

void memory_table() {
  const lt::optim::AdamW8bitOptions o8;  // the defaults: block 2048, threshold 4096
  int64_t total = 0, quantized = 0, blocks = 0;
  for (const ShapeCount& s : qwen7b_tensors()) {
    total += s.numel * s.count;
    if (s.numel >= o8.min_8bit_numel) {
      quantized += s.numel * s.count;
      blocks += (s.numel + o8.block_size - 1) / o8.block_size * s.count;
    }
  }
  const double n = static_cast<double>(total);
  const double fp32_state = 8 * n;
  const double q8_state = 2.0 * static_cast<double>(quantized) + 8.0 * static_cast<double>(blocks) +
                          8.0 * static_cast<double>(total - quantized);
  std::printf("\nQwen2.5-7B shape: %lld parameters (%.3f B); %lld (%.4f%%) take the 8-bit path\n",
              static_cast<long long>(total), n / 1e9, static_cast<long long>(quantized),
              100.0 * static_cast<double>(quantized) / n);
  std::printf(
      "optimizer state bytes per parameter: adamw 8.000, adamw8bit %.4f "
      "(2 code bytes + 2 f32 scales per %lld-element block; f32 states below %lld)\n",
      q8_state / n, static_cast<long long>(o8.block_size),
      static_cast<long long>(o8.min_8bit_numel));
  const double gib = 1024.0 * 1024.0 * 1024.0;
  const double master = 4 * n, bf16 = 2 * n, grads_f32 = 4 * n, grads_bf16 = 2 * n;
  std::printf("| host memory, GiB | fp32 master | bf16 copy | grads | optimizer state | total |\n");
  std::printf("| --- | --- | --- | --- | --- | --- |\n");
  for (const bool q8 : {false, true}) {
    for (const bool g32 : {true, false}) {
      const double state = q8 ? q8_state : fp32_state;
      const double grads = g32 ? grads_f32 : grads_bf16;
      std::printf("| %s, %s grads | %.1f | %.1f | %.1f | %.1f | %.1f |\n",
                  q8 ? "adamw8bit" : "adamw", g32 ? "f32" : "bf16", master / gib, bf16 / gib,
                  grads / gib, state / gib, (master + bf16 + grads + state) / gib);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  int64_t params = int64_t{64} << 20, tensors = 8;
  int runs = 7;
  bool is_child = false, compiled = false;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--params" && i + 1 < argc) {
      params = std::atoll(argv[++i]);
    } else if (a == "--tensors" && i + 1 < argc) {
      tensors = std::atoll(argv[++i]);
    } else if (a == "--runs" && i + 1 < argc) {
      runs = std::atoi(argv[++i]);
    } else if (a == "--compiled") {
      compiled = true;
    } else if (a == "--bf16-grads") {
      as_streaming.bf16_grads = true;
    } else if (a == "--pinned") {
      as_streaming.pinned = true;
    } else if (a == "--spin" && i + 1 < argc) {
      as_streaming.spin = std::atoi(argv[++i]);
    } else if (a == "--child") {
      is_child = true;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--params N] [--tensors T] [--runs R] [--compiled] [--bf16-grads] "
                   "[--pinned] [--spin N]\n",
                   argv[0]);
      return 2;
    }
  }
  if (tensors < 1 || params < tensors || runs < 1) {
    std::fprintf(stderr, "--tensors must be >= 1, --params >= --tensors and --runs >= 1\n");
    return 2;
  }
  if (!is_child) {
    std::printf(
        "%lld f32 parameters as %lld tensors, %s gradients%s%s; median of %d steps after 2 "
        "warm-up steps\n\n",
        static_cast<long long>(params / tensors * tensors), static_cast<long long>(tensors),
        as_streaming.bf16_grads ? "bf16" : "f32",
        as_streaming.pinned ? ", gradients and shadows page-locked" : "",
        as_streaming.spin > 0
            ? (", " + std::to_string(as_streaming.spin) + " threads spinning").c_str()
            : "",
        runs);
    std::printf("| optimizer | threads | isa | G params/s | range | GB/s |\n");
    std::printf("| --- | --- | --- | --- | --- | --- |\n");
    std::fflush(stdout);
  }
  if (is_child || std::getenv("LT_NUM_THREADS") != nullptr) {
    try {
      child(params, tensors, runs, compiled);
    } catch (const lt::Error& e) {
      std::fprintf(stderr, "optim_bench: %s\n", e.what());
      return 1;
    }
  } else {
    std::vector<int> counts = {1, 2, static_cast<int>(std::thread::hardware_concurrency())};
    std::sort(counts.begin(), counts.end());
    counts.erase(std::unique(counts.begin(), counts.end()), counts.end());
    for (int k : counts) {
      const pid_t pid = fork();
      if (pid == 0) {
        setenv("LT_NUM_THREADS", std::to_string(k).c_str(), 1);
        std::vector<std::string> args = {argv[0],
                                         "--params",
                                         std::to_string(params),
                                         "--tensors",
                                         std::to_string(tensors),
                                         "--runs",
                                         std::to_string(runs),
                                         "--child"};
        if (compiled) args.push_back("--compiled");
        if (as_streaming.bf16_grads) args.push_back("--bf16-grads");
        if (as_streaming.pinned) args.push_back("--pinned");
        if (as_streaming.spin > 0) {
          args.push_back("--spin");
          args.push_back(std::to_string(as_streaming.spin));
        }
        std::vector<char*> cargs;
        for (std::string& s : args) cargs.push_back(s.data());
        cargs.push_back(nullptr);
        execv("/proc/self/exe", cargs.data());
        _exit(127);
      }
      int status = 0;
      waitpid(pid, &status, 0);
      if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) return 1;
    }
  }
  if (!is_child) memory_table();
  return 0;
}
