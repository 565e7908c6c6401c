// napkin calibrate: microbenchmarks of the ceilings the performance model uses (perfmodel/cost.hpp).
// Prints one "key value" line per measurement (SI units: bytes/s, FLOP/s, ops/s, s); napkin
// calibrate merges them into a hardware description. Build: nvcc -O3 -arch=sm_80 (or
// -gencode=arch=compute_90a,code=sm_90a) microbench.cu -o microbench. Each figure is the median
// of 7 timed runs (CUDA events) after a warm-up; the inputs are random, never zeros.
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
