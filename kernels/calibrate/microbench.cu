// napkin calibrate: microbenchmarks of the ceilings the performance model uses (perfmodel/cost.hpp).
// Prints one "key value" line per measurement (SI units: bytes/s, FLOP/s, ops/s, s); napkin
// calibrate merges them into a hardware description. Build: nvcc -O3 -arch=sm_80 (or
// -gencode=arch=compute_90a,code=sm_90a) microbench.cu -o microbench. Each figure is the median
// of 7 timed runs (CUDA events) after a warm-up; the inputs are random, never zeros. Link with
// -lcublas: the sustained tensor rate is that of cuBLAS's bf16 GEMM run back to back.
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#define CHECK(x)                                                                       \
  do {                                                                                 \
    cudaError_t e_ = (x);                                                              \
    if (e_ != cudaSuccess) {                                                           \
      std::fprintf(stderr, "error: %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, __LINE__); \
      std::exit(1);                                                                    \
    }                                                                                  \
  } while (0)

template <class F>
double median_seconds(F launch, int reps = 7) {
  cudaEvent_t a, b;
  CHECK(cudaEventCreate(&a));
  CHECK(cudaEventCreate(&b));
  launch();  // warm-up
  CHECK(cudaGetLastError());
  CHECK(cudaDeviceSynchronize());
  std::vector<float> ms;
  for (int i = 0; i < reps; ++i) {
    CHECK(cudaEventRecord(a));
    launch();
    CHECK(cudaEventRecord(b));
    CHECK(cudaEventSynchronize(b));
    CHECK(cudaGetLastError());
    float t = 0;
    CHECK(cudaEventElapsedTime(&t, a, b));
    ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2] / 1e3;
}

__global__ void fill(uint32_t* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t x = uint32_t(i) * 2654435761u ^ seed;
    x ^= x >> 13, x *= 0x5bd1e995u, x ^= x >> 15;
    p[i] = (x & 0x3fffffffu) | 0x3c000000u;  // positive finite floats around 0.01 to 1
  }
}

// Random bf16 in [-1, 1): the GEMM inputs of the sustained-rate measurement.
__global__ void fill_bf16(__nv_bfloat16* p, size_t n, uint32_t seed) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
    uint32_t x = uint32_t(i) * 2654435761u ^ seed;
    x ^= x >> 13, x *= 0x5bd1e995u, x ^= x >> 15;
    p[i] = __float2bfloat16(static_cast<float>(x >> 8) * (2.0f / 16777216.0f) - 1.0f);
  }
}

// Copy with 16-byte accesses: bytes read + bytes written over time (the HBM figure of the model).
__global__ void copy16(const uint4* __restrict__ in, uint4* __restrict__ out, size_t n) {
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) out[i] = in[i];
}

// Re-reads of a buffer that fits in L2: 16-byte loads, summed so nothing is dead.
__global__ void l2_read(const uint4* __restrict__ in, size_t n, int passes, uint32_t* sink) {
  uint32_t acc = 0;
  for (int p = 0; p < passes; ++p)
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x) {
      uint4 v = __ldcg(&in[i]);  // cached in L2 only: every pass after the first hits L2
      acc += v.x ^ v.y ^ v.z ^ v.w;
    }
  if (acc == 0x12345678u) *sink = acc;
}

// L2 -> SMEM by the bulk-copy engine (cp.async.bulk, PTX ISA 9.7.9.25.4; the path TMA loads take):
// one thread per block streams 16 KB chunks of an L2-resident buffer into a 4-stage SMEM ring,
// each stage guarded by an mbarrier that counts the bytes landed. Every block reads the same chunks
// in the same order, as the co-resident blocks of a GEMM re-read an operand's tiles (session 32's
// probe, tools/device/probes/l2_bulk_probe.cu: 16.2e12 B/s so on an H200, 9.6e12 with each block
// on distinct chunks; the model prices TMA operand loads at this rate). Device code for sm_90 only.
constexpr int kBulkChunk = 16384, kBulkStages = 4;
__device__ __forceinline__ uint32_t bulk_smem(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }
__device__ __forceinline__ void bulk_wait(uint64_t* bar, unsigned parity) {
  unsigned done = 0;
  do {
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done) : "r"(bulk_smem(bar)), "r"(parity) : "memory");
  } while (!done);
}
__global__ void l2_bulk_read(const unsigned char* src, size_t chunks, int iters, uint32_t* sink) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  extern __shared__ __align__(128) unsigned char bulk_raw[];
  __shared__ uint64_t full[kBulkStages];
  if (threadIdx.x != 0) return;
  for (int s = 0; s < kBulkStages; ++s) asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(bulk_smem(&full[s])));
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  for (int it = 0; it < iters; ++it) {
    const int s = it % kBulkStages;
    if (it >= kBulkStages) bulk_wait(&full[s], static_cast<unsigned>((it / kBulkStages - 1) & 1));
    const unsigned char* from = src + (size_t(it) % chunks) * kBulkChunk;
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bulk_smem(&full[s])), "r"(kBulkChunk) : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
                 ::"r"(bulk_smem(bulk_raw + s * kBulkChunk)), "l"(from), "r"(kBulkChunk), "r"(bulk_smem(&full[s])) : "memory");
  }
  for (int it = iters; it < iters + kBulkStages; ++it) {
    const int s = it % kBulkStages;
    if (it >= kBulkStages) bulk_wait(&full[s], static_cast<unsigned>((it / kBulkStages - 1) & 1));
  }
  if (bulk_raw[threadIdx.x] == 0x5a && bulk_raw[kBulkChunk - 1] == 0xa5) *sink = 1;
#endif
}

// Atomic adds into a buffer that fits in L2 (red.global.add.f32, PTX ISA 9.7.13.6: no value comes
// back): consecutive threads add to consecutive floats (a warp's 32 reds cover one 128-byte line),
// every address distinct within a pass, the whole buffer covered `passes` times. The reds are the
// kernel's side effect, so none is dead.
__global__ void l2_red(float* buf, size_t n, int passes, float v) {
  for (int p = 0; p < passes; ++p)
    for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < n; i += size_t(gridDim.x) * blockDim.x)
      asm volatile("red.global.add.f32 [%0], %1;\n" ::"l"(buf + i), "f"(v) : "memory");
}

// HBM latency: one thread follows a chain of dependent loads through 256 MiB (5x the L2), each
// hop a 4 KB-aligned jump along a full-period LCG over the pages (a = 2654435761 = 1 mod 4, c odd),
// so every load misses the caches. Seconds per hop.
__global__ void chase(const uint32_t* __restrict__ next, uint32_t start, int hops, uint32_t* sink) {
  uint32_t at = start;
  for (int i = 0; i < hops; ++i) at = __ldcg(&next[at]);
  *sink = at;
}
__global__ void chase_init(uint32_t* next, size_t words, uint32_t seed) {
  // word i * 1024 points to word ((i * a + c) mod pages) * 1024: a full-period walk when pages is a power of 2
  const size_t pages = words / 1024;
  for (size_t i = blockIdx.x * size_t(blockDim.x) + threadIdx.x; i < pages; i += size_t(gridDim.x) * blockDim.x) {
    const size_t j = (i * 2654435761ull + seed) % pages;
    next[i * 1024] = static_cast<uint32_t>(j * 1024);
  }
}

// Shared-memory reads, 16 bytes per thread, conflict-free (consecutive threads, consecutive vectors).
__global__ void smem_read(int iters, uint32_t* sink) {
  __shared__ uint4 buf[2048];
  for (int i = threadIdx.x; i < 2048; i += blockDim.x) buf[i] = make_uint4(i, i * 3, i * 5, i * 7);
  __syncthreads();
  uint32_t acc = 0;
  int idx = threadIdx.x;
  for (int it = 0; it < iters; ++it) {
    uint4 v = buf[(idx + it * 32) & 2047];
    acc += v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x12345678u) *sink = acc;
}

// mma.sync.m16n8k16 with fp32 accumulation (PTX ISA 9.7.14): 8 independent accumulators per warp.
template <bool BF16>
__global__ void mma_rate(int iters, float* sink, uint32_t seed) {
  uint32_t a[4], b[2];
  for (int i = 0; i < 4; ++i) a[i] = 0x3c003c00u ^ ((seed + threadIdx.x * 7 + i) & 0x00ff00ffu);
  for (int i = 0; i < 2; ++i) b[i] = 0x3c003c00u ^ ((seed + threadIdx.x * 13 + i) & 0x00ff00ffu);
  float c[8][4] = {};
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      if (BF16)
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                     : "+f"(c[k][0]), "+f"(c[k][1]), "+f"(c[k][2]), "+f"(c[k][3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
      else
        asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                     : "+f"(c[k][0]), "+f"(c[k][1]), "+f"(c[k][2]), "+f"(c[k][3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
    }
  }
  float s = 0;
  for (int k = 0; k < 8; ++k) s += c[k][0] + c[k][1] + c[k][2] + c[k][3];
  if (s == 1.2345f) *sink = s;
}

// mma.sync.m16n8k32 of 8-bit operands (PTX ISA 9.7.14.5.14): e4m3 with fp32 accumulation (sm_89 and
// later) and s8 with int32 accumulation; 8 independent accumulators per warp, as mma_rate, over
// four B fragments (distinct products, so that no compiler can share one between accumulators).
#if defined(NAPKIN_SM90A) || (defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 890)
#define NAPKIN_MMA_FP8 1
#endif
template <bool FP8>
__global__ void mma8_rate(int iters, float* sink, uint32_t seed) {
  uint32_t a[4], b[4][2];
  for (int i = 0; i < 4; ++i) a[i] = 0x38383838u ^ ((seed + threadIdx.x * 7 + i) & 0x03030303u);
  for (int j = 0; j < 4; ++j)
    for (int i = 0; i < 2; ++i) b[j][i] = 0x38383838u ^ ((seed + threadIdx.x * 13 + 2 * j + i) & 0x03030303u);
  float c[8][4] = {};
  int ci[8][4] = {};
  for (int it = 0; it < iters; ++it) {
    // The operands are opaque to the compiler each iteration: where the GPU has no 8-bit float MMA
    // (sm_90 converts e4m3 to f16 for HMMA), the conversions stay in the loop, as in a GEMM.
    for (int i = 0; i < 4; ++i) asm volatile("" : "+r"(a[i]));
    for (int j = 0; j < 4; ++j) asm volatile("" : "+r"(b[j][0]), "+r"(b[j][1]));
#pragma unroll
    for (int k = 0; k < 8; ++k) {
      if (FP8) {
#if defined(NAPKIN_MMA_FP8)
        asm volatile("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                     : "+f"(c[k][0]), "+f"(c[k][1]), "+f"(c[k][2]), "+f"(c[k][3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[k % 4][0]), "r"(b[k % 4][1]));
#endif
      } else {
        asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
                     : "+r"(ci[k][0]), "+r"(ci[k][1]), "+r"(ci[k][2]), "+r"(ci[k][3])
                     : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[k % 4][0]), "r"(b[k % 4][1]));
      }
    }
  }
  float s = 0;
  for (int k = 0; k < 8; ++k) s += c[k][0] + c[k][1] + c[k][2] + c[k][3] + float(ci[k][0] + ci[k][1] + ci[k][2] + ci[k][3]);
  if (s == 1.2345f) *sink = s;
}

// wgmma.mma_async m64n128k16 bf16 -> fp32 (PTX ISA 9.7.15), both operands in SMEM (K-major,
// 128-byte swizzle, the layout napkin's sm_90a kernels use): two warpgroups per block, 4 k16 steps
// per commit group, one group kept in flight (wait_group 1). Device code for sm_90a only.
__device__ __forceinline__ uint64_t wg_desc(const void* p) {
  const uint32_t a = static_cast<uint32_t>(__cvta_generic_to_shared(p));
  return static_cast<uint64_t>((a & 0x3FFFF) >> 4) | uint64_t{16 >> 4} << 16 | uint64_t{1024 >> 4} << 32 | uint64_t{1} << 62;
}
__device__ __forceinline__ void wg_m64n128k16(float (&d)[64], uint64_t da, uint64_t db) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
               "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, 0, 0;\n}\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
               : "l"(da), "l"(db), "r"(1));
#endif
}
__global__ void __launch_bounds__(256) wgmma_rate(int iters, float* sink, uint32_t seed) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(1024) unsigned char wg_smem_raw[];
  unsigned char* smem = reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(wg_smem_raw) + 1023) / 1024 * 1024);
  uint32_t* words = reinterpret_cast<uint32_t*>(smem);
  for (int i = threadIdx.x; i < (2 * 8192 + 16384) / 4; i += blockDim.x)
    words[i] = 0x3f803f80u ^ (((seed + i * 2654435761u) >> 9) & 0x007f007fu);  // bf16 pairs in [1, 2)
  __syncthreads();
  const int wg = threadIdx.x / 128;
  const unsigned char* A = smem + wg * 8192;  // 64 x 64 per warpgroup
  const unsigned char* B = smem + 2 * 8192;   // 128 x 64, shared
  float d[64] = {};
  for (int it = 0; it < iters; ++it) {
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
    for (int k = 0; k < 4; ++k) wg_m64n128k16(d, wg_desc(A + k * 32), wg_desc(B + k * 32));
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
  }
  asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
  float s = 0;
  for (int i = 0; i < 64; ++i) s += d[i];
  if (s == 1.2345f) *sink = s;
#endif
}

// wgmma round trip: each of WGS warpgroups per block (one block per SM) issues a chain of CHAIN
// dependent m64n128k16 (one accumulator), commits it and waits for it (wait_group 0) before the
// next: the time of one round is the chain's issue-to-completion latency as a kernel that waits
// on its MMAs before mapping their results sees it (a flash backward's S, dP and dV, dK phases).
// The rate kernel above keeps a group in flight instead. Device code for sm_90a only.
template <int CHAIN>
__global__ void __launch_bounds__(256) wgmma_round_trip(int iters, float* sink, uint32_t seed) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(1024) unsigned char wg_smem_raw[];
  unsigned char* smem = reinterpret_cast<unsigned char*>((reinterpret_cast<uintptr_t>(wg_smem_raw) + 1023) / 1024 * 1024);
  uint32_t* words = reinterpret_cast<uint32_t*>(smem);
  for (int i = threadIdx.x; i < (2 * 8192 + 16384) / 4; i += blockDim.x)
    words[i] = 0x3f803f80u ^ (((seed + i * 2654435761u) >> 9) & 0x007f007fu);  // bf16 pairs in [1, 2)
  __syncthreads();
  const int wg = threadIdx.x / 128;
  const unsigned char* A = smem + wg * 8192;
  const unsigned char* B = smem + 2 * 8192;
  float d[64] = {};
  for (int it = 0; it < iters; ++it) {
    asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
    for (int k = 0; k < CHAIN; ++k) wg_m64n128k16(d, wg_desc(A + (k % 4) * 32), wg_desc(B + (k % 4) * 32));
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
  }
  float s = 0;
  for (int i = 0; i < 64; ++i) s += d[i];
  if (s == 1.2345f) *sink = s;
#endif
}

// ex2.approx (the MUFU unit that exp lowers to): 8 independent chains per thread.
__global__ void exp_rate(int iters, float* sink, float seed) {
  float x[8];
  for (int k = 0; k < 8; ++k) x[k] = seed + 1e-3f * (threadIdx.x + k);
  for (int it = 0; it < iters; ++it)
#pragma unroll
    for (int k = 0; k < 8; ++k) asm volatile("ex2.approx.ftz.f32 %0, %0;" : "+f"(x[k]));
  float s = 0;
  for (int k = 0; k < 8; ++k) s += x[k];
  if (s == 1.2345f) *sink = s;
}

// FP32 fused multiply-add: 8 independent chains per thread, 2 FLOP each.
__global__ void fma_rate(int iters, float* sink, float seed) {
  float x[8];
  for (int k = 0; k < 8; ++k) x[k] = seed + threadIdx.x * 1e-3f + k;
  for (int it = 0; it < iters; ++it)
#pragma unroll
    for (int k = 0; k < 8; ++k) x[k] = fmaf(x[k], 0.999999f, 1e-7f);
  float s = 0;
  for (int k = 0; k < 8; ++k) s += x[k];
  if (s == 1.2345f) *sink = s;
}

__global__ void empty() {}

int main() {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
    std::fprintf(stderr, "error: no CUDA device: napkin calibrate measures a GPU and runs on a machine that has one\n");
    return 3;
  }
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  std::printf("device %s\n", prop.name);
  std::printf("sm_count %d\n", sms);
  std::printf("l2_capacity_bytes %d\n", prop.l2CacheSize);
  std::printf("smem_per_sm_bytes %zu\n", prop.sharedMemPerMultiprocessor);
  std::printf("smem_per_block_optin_bytes %zu\n", prop.sharedMemPerBlockOptin);
  std::printf("registers_per_sm %d\n", prop.regsPerMultiprocessor);
  std::printf("compute_capability %d.%d\n", prop.major, prop.minor);
  uint32_t* sink;
  CHECK(cudaMalloc(&sink, 64));

  // HBM: copy 2 GiB (4 GiB of traffic per copy).
  size_t bytes = size_t(2) << 30;
  uint32_t *in, *out;
  CHECK(cudaMalloc(&in, bytes));
  CHECK(cudaMalloc(&out, bytes));
  fill<<<sms * 8, 256>>>(in, bytes / 4, 1234u);
  CHECK(cudaGetLastError());
  size_t n16 = bytes / 16;
  double t = median_seconds([&] { copy16<<<sms * 8, 512>>>(reinterpret_cast<const uint4*>(in), reinterpret_cast<uint4*>(out), n16); });
  std::printf("hbm_bandwidth_bytes_per_s %.6g\n", 2.0 * bytes / t);

  // L2: a buffer of a quarter of the L2, read 64 times by every block's share.
  size_t l2_bytes = size_t(prop.l2CacheSize) / 4 / 16 * 16;
  int passes = 64;
  t = median_seconds([&] { l2_read<<<sms * 8, 512>>>(reinterpret_cast<const uint4*>(in), l2_bytes / 16, passes, sink); });
  std::printf("l2_bandwidth_bytes_per_s %.6g\n", double(l2_bytes) * passes / t);
  if (prop.major >= 9) {  // the first 2 MB of the buffer through the bulk-copy engine, two blocks per SM, all in the same order
    const int bulk_iters = 4096, bulk_smem_bytes = kBulkStages * kBulkChunk;
    CHECK(cudaFuncSetAttribute(l2_bulk_read, cudaFuncAttributeMaxDynamicSharedMemorySize, bulk_smem_bytes));
    t = median_seconds([&] {
      l2_bulk_read<<<sms * 2, 32, bulk_smem_bytes>>>(reinterpret_cast<const unsigned char*>(in), (size_t(2) << 20) / kBulkChunk, bulk_iters, sink);
    });
    std::printf("l2_bulk_bandwidth_bytes_per_s %.6g\n", double(sms) * 2 * bulk_iters * kBulkChunk / t);
  }
  {  // fp32 atomic adds into the same quarter of the L2 (zeroed: the sums stay small and finite)
    float* acc = reinterpret_cast<float*>(in);
    const size_t n = l2_bytes / 4;
    CHECK(cudaMemset(acc, 0, l2_bytes));
    t = median_seconds([&] { l2_red<<<sms * 8, 512>>>(acc, n, passes, 1.0f); });
    std::printf("l2_atomic_bandwidth_bytes_per_s %.6g\n", 4.0 * double(n) * passes / t);
  }
  // HBM latency by pointer chasing through the 2 GiB buffer (about 1 us of hops is plenty).
  chase_init<<<sms * 8, 256>>>(out, size_t(1) << 26, 12345u);  // 256 MiB: 5x the L2, within the TLB reach
  CHECK(cudaGetLastError());
  const int hops = 4096;
  // Each launch starts where the last one stopped, so no hop revisits a line an earlier one cached.
  uint32_t start = 0;
  t = median_seconds([&] {
    chase<<<1, 1>>>(out, start, hops, sink);
    CHECK(cudaMemcpy(&start, sink, 4, cudaMemcpyDeviceToHost));
  }, 3);
  std::printf("hbm_latency_s %.6g\n", t / hops);
  CHECK(cudaFree(in));
  CHECK(cudaFree(out));

  // SMEM: 4 blocks of 512 threads per SM, 16 bytes per thread per iteration.
  int iters = 1 << 16;
  t = median_seconds([&] { smem_read<<<sms * 4, 512>>>(iters, sink); });
  std::printf("smem_bandwidth_bytes_per_s %.6g\n", double(sms) * 4 * 512 * 16.0 * iters / t);

  // Tensor cores through mma.sync: 8 warps per block, 4 blocks per SM.
  int mma_iters = 1 << 14;
  double mma_flops = double(sms) * 4 * 8 * mma_iters * 8 * (2.0 * 16 * 8 * 16);
  t = median_seconds([&] { mma_rate<true><<<sms * 4, 256>>>(mma_iters, reinterpret_cast<float*>(sink), 7u); });
  std::printf("mma_sync_bf16_flops_per_s %.6g\n", mma_flops / t);
  t = median_seconds([&] { mma_rate<false><<<sms * 4, 256>>>(mma_iters, reinterpret_cast<float*>(sink), 7u); });
  std::printf("mma_sync_fp16_flops_per_s %.6g\n", mma_flops / t);
  // The same with 8-bit operands, m16n8k32: twice the FLOPs an instruction.
  t = median_seconds([&] { mma8_rate<false><<<sms * 4, 256>>>(mma_iters, reinterpret_cast<float*>(sink), 7u); });
  std::printf("mma_sync_int8_ops_per_s %.6g\n", 2 * mma_flops / t);
  if (prop.major * 10 + prop.minor >= 89) {
    t = median_seconds([&] { mma8_rate<true><<<sms * 4, 256>>>(mma_iters, reinterpret_cast<float*>(sink), 7u); });
    std::printf("mma_sync_fp8e4m3_flops_per_s %.6g\n", 2 * mma_flops / t);
  }

  // Tensor cores through wgmma (Hopper, when built for sm_90a): one block of 2 warpgroups per SM.
#if defined(NAPKIN_SM90A)
  if (prop.major == 9) {
    const size_t wg_smem = 2 * 8192 + 16384 + 1024;
    CHECK(cudaFuncSetAttribute(wgmma_rate, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(wg_smem)));
    const int wg_iters = 1 << 13;
    const double wg_flops = double(sms) * 2 * wg_iters * 4 * (2.0 * 64 * 128 * 16);
    t = median_seconds([&] { wgmma_rate<<<sms, 256, wg_smem>>>(wg_iters, reinterpret_cast<float*>(sink), 7u); });
    std::printf("wgmma_bf16_flops_per_s %.6g\n", wg_flops / t);
    // Round trips (issue, commit, wait 0) of 1 and 8 dependent m64n128k16, one and two
    // warpgroups per SM: seconds per round. The slope between the chains is the issue interval;
    // one instruction's round trip less that interval is the latency a wait exposes.
    const int rt_iters = 1 << 12;
    auto round_trip = [&](auto kernel, int wgs) {
      CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(wg_smem)));
      return median_seconds([&] { kernel<<<sms, 128 * wgs, wg_smem>>>(rt_iters, reinterpret_cast<float*>(sink), 7u); }) / rt_iters;
    };
    for (int wgs = 1; wgs <= 2; ++wgs) {
      std::printf("wgmma_round_trip_1x%d_s %.6g\n", wgs, round_trip(wgmma_round_trip<1>, wgs));
      std::printf("wgmma_round_trip_8x%d_s %.6g\n", wgs, round_trip(wgmma_round_trip<8>, wgs));
    }
  }
#endif

  // Sustained tensor rate under the board's power limit: cuBLAS bf16 GEMM 8192^3 (fp32
  // accumulate, random inputs), 40 back to back after 20 warm-up runs (about 0.1 s at full power
  // first, where the clock settles); the median of the 40.
  {
    const int n = 8192;
    __nv_bfloat16 *A = nullptr, *B = nullptr, *C = nullptr;
    CHECK(cudaMalloc(&A, size_t{2} * n * n));
    CHECK(cudaMalloc(&B, size_t{2} * n * n));
    CHECK(cudaMalloc(&C, size_t{2} * n * n));
    fill_bf16<<<1024, 256>>>(A, size_t{n} * n, 11u), fill_bf16<<<1024, 256>>>(B, size_t{n} * n, 12u);
    cublasHandle_t h;
    if (cublasCreate(&h) == CUBLAS_STATUS_SUCCESS) {
      const float one = 1, zero = 0;
      auto gemm = [&] {
        cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, n, n, &one, B, CUDA_R_16BF, n, A, CUDA_R_16BF, n, &zero, C, CUDA_R_16BF, n,
                     CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
      };
      for (int i = 0; i < 20; ++i) gemm();
      t = median_seconds(gemm, 40);
      std::printf("sustained_bf16_gemm_flops_per_s %.6g\n", 2.0 * n * n * n / t);
      cublasDestroy(h);
    }
    CHECK(cudaFree(A));
    CHECK(cudaFree(B));
    CHECK(cudaFree(C));
  }

  // Special functions and FP32.
  int sfu_iters = 1 << 14;
  double threads = double(sms) * 8 * 256;
  t = median_seconds([&] { exp_rate<<<sms * 8, 256>>>(sfu_iters, reinterpret_cast<float*>(sink), 0.5f); });
  std::printf("sfu_ops_per_s %.6g\n", threads * sfu_iters * 8 / t);
  t = median_seconds([&] { fma_rate<<<sms * 8, 256>>>(sfu_iters, reinterpret_cast<float*>(sink), 0.5f); });
  std::printf("fp32_flops_per_s %.6g\n", threads * sfu_iters * 8 * 2 / t);

  // Launch overhead: 2000 empty launches back to back.
  t = median_seconds([&] {
    for (int i = 0; i < 2000; ++i) empty<<<1, 32>>>();
  });
  std::printf("launch_overhead_s %.6g\n", t / 2000);
  CHECK(cudaFree(sink));
  return 0;
}
