#include "ops/cuda/kernel_common.cuh"
#include "optim/adamw8bit_kernel.h"
#include "optim/cuda/adamw8bit.h"
#include "optim/cuda/adamw_update.cuh"

namespace lt::optim::cuda {

namespace {

using ops::cuda::bf16;

// Four elements a thread in blocks of 2048 (the default): the kernel is
// bound by instruction latency, and 512 threads at ~52 registers keep 32
// warps an SM busy (256 threads with eight elements each ran 20% slower, a
// prefetch of the next block into registers 35% slower, on an H100).
constexpr int kThreads = 512;

// adamw8bit_kernel.h's Code8Segments for one code, without the pointer.
// Separate arrays: a warp's loads of a 16-entry table are one shared-memory
// wavefront each, where a packed 16-byte entry took four (measured slower).
struct Segments {
  float low[16], inv_step[16];  // indexed by segment + 8 for negative x
  int32_t base[16];
  int32_t segment_of_binade[32];  // by the biased f32 exponent minus 96 (clamped at 0)
  float split_of_binade[32];      // a decade inside the binade, or 0
};

// Everything the kernel looks up: both sorted code tables (dequantizing is
// one load) and their segment tables (quantizing is a position in one
// segment). Passed by value (2.9 KiB of kernel parameters) and copied to
// shared memory once by each thread block, which then loops over many
// quantization blocks: indexing kernel parameters by thread serializes.
struct Tables {
  float m_code[256];       // signed_code()
  float sqrt_v_code[256];  // unsigned_code()
  Segments m_segments, sqrt_v_segments;
};
static_assert(sizeof(Tables) % sizeof(uint32_t) == 0);

// quantize_nearest on a sorted table of 256: the lower bound of x, then the
// nearer of its two neighbours, an exact tie going to the smaller magnitude.
// Only near-ties and NaN get here (below).
__device__ __noinline__ uint8_t nearest_rank(const float* code, float x) {
  int lo = 0, count = 256;  // std::lower_bound: first index with code >= x
  while (count > 0) {
    const int half = count >> 1;
    if (code[lo + half] < x) {
      lo += half + 1;
      count -= half + 1;
    } else {
      count = half;
    }
  }
  if (lo == 0) return 0;
  if (lo == 256) return 255;
  const float below = code[lo - 1], above = code[lo];
  const float d_lo = __fsub_rn(x, below), d_hi = __fsub_rn(above, x);
  if (d_lo < d_hi) return static_cast<uint8_t>(lo - 1);
  if (d_hi < d_lo) return static_cast<uint8_t>(lo);
  return static_cast<uint8_t>(fabsf(below) <= fabsf(above) ? lo - 1 : lo);
}

// quantize_nearest_fast (adamw8bit_kernel.h): the position of x in its
// segment, in the CPU's f32 operations, trusted unless it is within
// kNearTie of a midpoint (or NaN), where the search decides. Equal to
// quantize_nearest for every x, as on the CPU.
__device__ __forceinline__ uint8_t rank_of(const Segments& s, const float* code, float x) {
  const uint32_t bits = __float_as_uint(x);
  const uint32_t magnitude_bits = bits & 0x7fffffffu;
  const float a = __uint_as_float(magnitude_bits);
  const int binade = max(static_cast<int>(magnitude_bits >> 23), kLowestBinade) & 31;
  const int segment = s.segment_of_binade[binade] + (a < s.split_of_binade[binade] ? 1 : 0) +
                      ((bits >> 31) != 0 ? 8 : 0);
  const float j = __fmul_rn(__fsub_rn(a, s.low[segment]), s.inv_step[segment]);
  const float nearest = __fsub_rn(__fadd_rn(j, kRoundToInteger), kRoundToInteger);
  if (!(fabsf(__fsub_rn(j, nearest)) < 0.5f - kNearTie)) return nearest_rank(code, x);
  const int k = static_cast<int>(nearest);
  return static_cast<uint8_t>(segment >= 8 ? s.base[segment] - k : s.base[segment] + k);
}

// The CPU's Reciprocal (adamw8bit_kernel.h): x / absmax as x * (1 / absmax)
// (`inverse`, one division per block), the division itself when 1 / absmax
// is not finite; 0 for absmax 0.
__device__ __forceinline__ float quotient(float x, float absmax, float inverse) {
  if (absmax == 0.0f) return 0.0f;
  return isfinite(inverse) ? __fmul_rn(x, inverse) : __fdiv_rn(x, absmax);
}

// kWidth consecutive elements of one array, loaded or stored as one access
// (the launch checked the alignment when kWidth is 4).
template <int kWidth, typename T>
struct alignas(kWidth * sizeof(T)) Group {
  T v[kWidth];
};
template <int kWidth, typename T>
__device__ __forceinline__ Group<kWidth, T> load_group(const T* p) {
  return *reinterpret_cast<const Group<kWidth, T>*>(p);
}
template <int kWidth, typename T>
__device__ __forceinline__ void store_group(T* p, const Group<kWidth, T>& g) {
  *reinterpret_cast<Group<kWidth, T>*>(p) = g;
}

// Both maxima of one quantization block in one reduction over its `lanes`
// threads (a power of two; each group of `lanes` consecutive threads has
// its own block): shuffles within a warp, and for more than 32 lanes two
// barriers (`lanes` is the same for the whole thread block).
__device__ __forceinline__ float2 group_max2(float2 v, float2* scratch, int lanes) {
  const ops::cuda::MaxOp max;
  for (int offset = min(lanes, 32) >> 1; offset > 0; offset >>= 1) {
    v.x = max(v.x, __shfl_xor_sync(0xffffffffu, v.x, offset));
    v.y = max(v.y, __shfl_xor_sync(0xffffffffu, v.y, offset));
  }
  if (lanes <= 32) return v;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();  // the previous block's readers are done with scratch
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  const int warps = lanes >> 5;
  v = lane < warps ? scratch[(warp & ~(warps - 1)) + lane] : make_float2(0.0f, 0.0f);
  return make_float2(ops::cuda::warp_max(v.x), ops::cuda::warp_max(v.y));
}

// One thread's share of one quantization block: for k < kGroups, the
// kWidth elements from kWidth * (lane + lanes * k) on (Lane below).
template <typename Grad, int kWidth, int kGroups>
struct Share {
  Group<kWidth, float> p[kGroups];
  Group<kWidth, Grad> g[kGroups];
  Group<kWidth, uint8_t> m_codes[kGroups], sqrt_v_codes[kGroups];
  float m_scale, sqrt_v_scale;
};

// Where a thread's k-th group starts in its quantization block: `lane` is
// its place among the block's `lanes` threads.
struct Lane {
  int lane, lanes;
  __device__ __forceinline__ int first_of(int width, int k) const {
    return width * (lane + lanes * k);
  }
};

// The arrays of one parameter (all of it; blocks index into them).
template <typename Grad>
struct Arrays {
  float* param;
  const Grad* grad;
  uint8_t* m_codes;
  float* m_scales;
  uint8_t* sqrt_v_codes;
  float* sqrt_v_scales;
  bf16* shadow;  // or null
};

// Loads block b (n elements from `begin`); past n, groups are left as
// they are (never used).
template <typename Grad, int kWidth, int kGroups>
__device__ __forceinline__ void load_share(Share<Grad, kWidth, kGroups>& share,
                                           const Arrays<Grad>& a, Lane at, int64_t b, int64_t begin,
                                           int n) {
  share.m_scale = a.m_scales[b];
  share.sqrt_v_scale = a.sqrt_v_scales[b];
#pragma unroll
  for (int k = 0; k < kGroups; ++k) {
    const int first = at.first_of(kWidth, k);
    if (first + kWidth <= n) {
      share.p[k] = load_group<kWidth>(a.param + begin + first);
      share.g[k] = load_group<kWidth>(a.grad + begin + first);
      share.m_codes[k] = load_group<kWidth>(a.m_codes + begin + first);
      share.sqrt_v_codes[k] = load_group<kWidth>(a.sqrt_v_codes + begin + first);
    } else {  // the last block's tail
      for (int j = 0; j < kWidth; ++j) {
        const int64_t e = begin + first + j;
        const bool in = first + j < n;
        share.p[k].v[j] = in ? a.param[e] : 0.0f;
        share.g[k].v[j] = in ? a.grad[e] : Grad(0.0f);
        share.m_codes[k].v[j] = in ? a.m_codes[e] : uint8_t{0};
        share.sqrt_v_codes[k].v[j] = in ? a.sqrt_v_codes[e] : uint8_t{0};
      }
    }
  }
}

// Each thread block loops over quantization blocks (grid-stride; the
// tables are copied to shared memory once). A thread keeps its elements'
// updated m and sqrt(v) in registers between the update and the
// requantization; the two absmax maxima are the only values threads share.
// The second moment is stored as sqrt(v) (adamw8bit_kernel.h, "Note [the
// second moment is stored as sqrt(v)]"): dequantized, squared to v,
// updated, and the new v's sqrt requantized.
// A quantization block takes kLanes threads (0: `lanes_given`, read at run
// time), kThreads / lanes blocks at a time: at blocks of 256, 64 threads
// each, where one block at a time left 448 of 512 threads idle (5.4x slower
// than blocks of 2048 on an H100). The kernel is bound by instruction
// latency: lanes read at run time made blocks of 2048 57% slower than
// constant ones (blocks of 256 51%), so the counts of power-of-two blocks
// are constants.
template <typename Grad, int kWidth, int kGroups, int kLanes>
__global__ void __launch_bounds__(kThreads)
    adamw8bit_kernel(AdamWScalars s, Tables tables, Arrays<Grad> a, int64_t numel, int block_size,
                     int64_t blocks, int lanes_given) {
  __shared__ Tables t;
  __shared__ float2 scratch[kThreads / 32];
  {
    const auto* from = reinterpret_cast<const uint32_t*>(&tables);
    auto* to = reinterpret_cast<uint32_t*>(&t);
    for (int k = threadIdx.x; k < static_cast<int>(sizeof(Tables) / 4); k += kThreads)
      to[k] = from[k];
  }
  __syncthreads();

  constexpr bool kShared = kLanes != kThreads;
  const int lanes = kLanes > 0 ? kLanes : lanes_given;
  const int per_pass = kShared ? kThreads / lanes : 1;  // quantization blocks at a time
  const int thread = static_cast<int>(threadIdx.x);
  const Lane at{kShared ? thread % lanes : thread, lanes};
  const int group = kShared ? thread / lanes : 0;
  // Every thread takes every pass (the reduction's barriers): a group past
  // the last block has no elements (n = 0) and writes nothing.
  for (int64_t pass = int64_t{blockIdx.x} * per_pass; pass < blocks;
       pass += int64_t{gridDim.x} * per_pass) {
    const int64_t b = pass + group;
    const int64_t begin = b * block_size;
    const int n = !kShared || b < blocks
                      ? static_cast<int>(min(static_cast<int64_t>(block_size), numel - begin))
                      : 0;
    Share<Grad, kWidth, kGroups> current;
    if (!kShared || n > 0) load_share(current, a, at, b, begin, n);  // else no scales to read

    float m[kGroups][kWidth], sqrt_v[kGroups][kWidth];
    float2 maxima = make_float2(0.0f, 0.0f);
#pragma unroll
    for (int k = 0; k < kGroups; ++k) {
      const int first = at.first_of(kWidth, k);
      if (first >= n) break;
      Group<kWidth, float> p = current.p[k];
      Group<kWidth, bf16> sh;
#pragma unroll
      for (int j = 0; j < kWidth; ++j) {
        float mi = __fmul_rn(t.m_code[current.m_codes[k].v[j]], current.m_scale);
        const float ri =
            __fmul_rn(t.sqrt_v_code[current.sqrt_v_codes[k].v[j]], current.sqrt_v_scale);
        float vi = __fmul_rn(ri, ri);
        update_one(s, p.v[j], widen(current.g[k].v[j]), mi, vi);
        sh.v[j] = __float2bfloat16_rn(p.v[j]);
        const bool in = first + j < n;
        m[k][j] = in ? mi : 0.0f;
        sqrt_v[k][j] = in ? __fsqrt_rn(vi) : 0.0f;  // the update's own denominator root
        maxima.x = fmaxf(maxima.x, fabsf(m[k][j]));
        maxima.y = fmaxf(maxima.y, sqrt_v[k][j]);
      }
      if (first + kWidth <= n) {
        store_group<kWidth>(a.param + begin + first, p);
        if (a.shadow != nullptr) store_group<kWidth>(a.shadow + begin + first, sh);
      } else {
        for (int j = 0; j < kWidth && first + j < n; ++j) {
          a.param[begin + first + j] = p.v[j];
          if (a.shadow != nullptr) a.shadow[begin + first + j] = sh.v[j];
        }
      }
    }
    maxima = group_max2(maxima, scratch, lanes);
    // quantize_block: an all-zero block keeps scale 0 and the rank of 0.
    const float m_inverse = __fdiv_rn(1.0f, maxima.x);
    const float sqrt_v_inverse = __fdiv_rn(1.0f, maxima.y);
#pragma unroll
    for (int k = 0; k < kGroups; ++k) {
      const int first = at.first_of(kWidth, k);
      if (first >= n) break;
      Group<kWidth, uint8_t> mc, vc;
#pragma unroll
      for (int j = 0; j < kWidth; ++j) {
        mc.v[j] = rank_of(t.m_segments, t.m_code, quotient(m[k][j], maxima.x, m_inverse));
        vc.v[j] = rank_of(t.sqrt_v_segments, t.sqrt_v_code,
                          quotient(sqrt_v[k][j], maxima.y, sqrt_v_inverse));
      }
      if (first + kWidth <= n) {
        store_group<kWidth>(a.m_codes + begin + first, mc);
        store_group<kWidth>(a.sqrt_v_codes + begin + first, vc);
      } else {
        for (int j = 0; j < kWidth && first + j < n; ++j) {
          a.m_codes[begin + first + j] = mc.v[j];
          a.sqrt_v_codes[begin + first + j] = vc.v[j];
        }
      }
    }
    if (at.lane == 0 && (!kShared || n > 0)) {
      a.m_scales[b] = maxima.x;
      a.sqrt_v_scales[b] = maxima.y;
    }
  }
}

Segments segments_for(const Code8& code) {
  const Code8Segments& from = segments_of(code);
  Segments s{};
  for (size_t k = 0; k < 16; ++k) {
    s.low[k] = from.low[k];
    s.inv_step[k] = from.inv_step[k];
    s.base[k] = from.base[k];
  }
  for (size_t k = 0; k < 32; ++k) {
    s.segment_of_binade[k] = from.segment_of_binade[k];
    s.split_of_binade[k] = from.split_of_binade[k];
  }
  return s;
}

Tables make_tables() {
  Tables t{};
  for (size_t k = 0; k < 256; ++k) {
    t.m_code[k] = signed_code()[k];
    t.sqrt_v_code[k] = unsigned_code()[k];
  }
  t.m_segments = segments_for(signed_code());
  t.sqrt_v_segments = segments_for(unsigned_code());
  return t;
}

bool aligned(const void* p, size_t bytes) {
  return reinterpret_cast<uintptr_t>(p) % bytes == 0;
}

// Enough thread blocks to fill the device once (the kernel loops over the
// quantization blocks), or one per pass's worth of quantization blocks when
// there are fewer. A quantization block takes the fewest threads, a power
// of two, that hold it at kWidth * kGroups elements each.
template <typename Grad, int kWidth, int kGroups, int kLanes>
void launch_lanes(const AdamWScalars& s, const Arrays<Grad>& a, int64_t n, int block_size,
                  int lanes, int device, cudaStream_t stream) {
  static const Tables tables = make_tables();
  const auto kernel = adamw8bit_kernel<Grad, kWidth, kGroups, kLanes>;
  static const int per_sm = [&] {
    int count = 0;
    LT_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&count, kernel, kThreads, 0));
    return count;
  }();
  int sms = 0;
  LT_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int64_t blocks = (n + block_size - 1) / block_size;
  const int64_t passes = (blocks + kThreads / lanes - 1) / (kThreads / lanes);
  const auto grid =
      static_cast<unsigned>(std::min<int64_t>(passes, int64_t{sms} * std::max(per_sm, 1)));
  kernel<<<grid, kThreads, 0, stream>>>(s, tables, a, n, block_size, blocks, lanes);
  LT_CUDA_CHECK(cudaGetLastError());
}

template <typename Grad, int kWidth, int kGroups>
void launch(const AdamWScalars& s, const Arrays<Grad>& a, int64_t n, int block_size, int device,
            cudaStream_t stream) {
  int lanes = 1;
  while (lanes < kThreads && lanes * kWidth * kGroups < block_size) lanes *= 2;
  // Every power-of-two block size (64 to 4096) at constant lanes.
  switch (lanes) {
    case kThreads:
      return launch_lanes<Grad, kWidth, kGroups, kThreads>(s, a, n, block_size, lanes, device,
                                                           stream);
    case 256:
      return launch_lanes<Grad, kWidth, kGroups, 256>(s, a, n, block_size, lanes, device, stream);
    case 128:
      return launch_lanes<Grad, kWidth, kGroups, 128>(s, a, n, block_size, lanes, device, stream);
    case 64:
      return launch_lanes<Grad, kWidth, kGroups, 64>(s, a, n, block_size, lanes, device, stream);
    case 32:
      return launch_lanes<Grad, kWidth, kGroups, 32>(s, a, n, block_size, lanes, device, stream);
    case 16:
      return launch_lanes<Grad, kWidth, kGroups, 16>(s, a, n, block_size, lanes, device, stream);
    default:
      return launch_lanes<Grad, kWidth, kGroups, 0>(s, a, n, block_size, lanes, device, stream);
  }
}

// Four elements per access when every block starts on a 4-element boundary
// of every array; as many groups a thread as the block size needs.
template <typename Grad>
void launch(const AdamWScalars& s, const Arrays<Grad>& a, int64_t n, int block_size, int device,
            cudaStream_t stream) {
  static_assert(kMaxCudaBlockSize == 4096 && kThreads == 512);
  const bool by_four = block_size % 4 == 0 && aligned(a.param, 16) &&
                       aligned(a.grad, 4 * sizeof(Grad)) && aligned(a.m_codes, 4) &&
                       aligned(a.sqrt_v_codes, 4) && (a.shadow == nullptr || aligned(a.shadow, 8));
  const bool half = block_size <= 2048;
  if (by_four && half) return launch<Grad, 4, 1>(s, a, n, block_size, device, stream);
  if (by_four) return launch<Grad, 4, 2>(s, a, n, block_size, device, stream);
  if (half) return launch<Grad, 1, 4>(s, a, n, block_size, device, stream);
  launch<Grad, 1, 8>(s, a, n, block_size, device, stream);
}

}  // namespace

void adamw8bit_update(const AdamWScalars& s, const Tensor& param, const Tensor& grad,
                      const Tensor& m_codes, const Tensor& m_scales, const Tensor& sqrt_v_codes,
                      const Tensor& sqrt_v_scales, int64_t block_size, const Tensor& shadow) {
  const int64_t n = param.numel();
  if (n == 0) return;
  LT_CHECK(block_size > 0 && block_size <= kMaxCudaBlockSize, "optim.block_size must be in [1, ",
           kMaxCudaBlockSize, "] for parameters on CUDA, got ", block_size);
  const int device = param.device().index;
  ::lt::cuda::DeviceGuard guard(device);
  cudaStream_t stream = ops::cuda::stream_for(param.device());
  auto* p = static_cast<float*>(param.data_ptr());
  auto* mc = static_cast<uint8_t*>(m_codes.data_ptr());
  auto* vc = static_cast<uint8_t*>(sqrt_v_codes.data_ptr());
  auto* ms = static_cast<float*>(m_scales.data_ptr());
  auto* vs = static_cast<float*>(sqrt_v_scales.data_ptr());
  bf16* sh = shadow.defined() ? static_cast<bf16*>(shadow.data_ptr()) : nullptr;
  const int bs = static_cast<int>(block_size);
  if (grad.dtype() == DType::BF16) {
    const auto* g = static_cast<const bf16*>(grad.data_ptr());
    launch(s, Arrays<bf16>{p, g, mc, ms, vc, vs, sh}, n, bs, device, stream);
  } else {
    const auto* g = static_cast<const float*>(grad.data_ptr());
    launch(s, Arrays<float>{p, g, mc, ms, vc, vs, sh}, n, bs, device, stream);
  }
}

}  // namespace lt::optim::cuda
