// A probe (session 32; run by hand on a lent GPU, not part of the build or of napkin calibrate):
// L2 -> SMEM through the bulk-copy engine (cp.async.bulk, PTX ISA 9.7.9.25.4: the path TMA loads
// take) against the bytes in flight per SM, the footprint (distinct chunks per block, or every block
// reading the same 2 MB in the same order, as a GEMM's shared operand), and clusters of 2
// multicasting each chunk's halves to both blocks (a stage refilled only after both blocks took it).
// nvcc -std=c++17 -O2 -gencode arch=compute_90a,code=sm_90a -o l2_bulk_probe l2_bulk_probe.cu
// Results: hardware/measured/h200-2026-11-28-session32.txt (call B), docs/benchmarks.md session 32.
#include <cstdio>
#include <cstdint>
#include <vector>
#include <algorithm>
#include <cuda_runtime.h>

#define CHECK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { std::printf("CUDA error %s at %d\n", cudaGetErrorString(e), __LINE__); return 1; } } while (0)

constexpr int kChunk = 16384, kMaxStages = 12;
__device__ __forceinline__ uint32_t sm(const void* p) { return static_cast<uint32_t>(__cvta_generic_to_shared(p)); }
__device__ __forceinline__ void wait_parity(uint64_t* bar, unsigned parity) {
  unsigned done = 0;
  do {
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done) : "r"(sm(bar)), "r"(parity) : "memory");
  } while (!done);
}
__device__ __forceinline__ unsigned cta_rank() { unsigned r; asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r)); return r; }

// One thread per block. shared: every block reads chunk (it % chunks); else (block * 7919 + it) % chunks.
// cluster: 2 blocks per cluster; each issues half of every chunk, multicast to both.
template <bool kCluster>
__global__ void bulk(const unsigned char* src, size_t chunks, int iters, int stages, int shared, uint32_t* sink) {
  extern __shared__ __align__(128) unsigned char raw[];
  __shared__ uint64_t full[kMaxStages], empty[kMaxStages];
  if (threadIdx.x != 0) return;
  for (int s = 0; s < stages; ++s) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(sm(&full[s])));
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 2;\n" ::"r"(sm(&empty[s])));
  }
  asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
  if (kCluster) asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
  const unsigned me = kCluster ? cta_rank() : 0, other = me ^ 1;
  const size_t base = kCluster ? blockIdx.x / 2 : blockIdx.x;
  for (int it = 0; it < iters + stages; ++it) {
    const int s = it % stages;
    if (it >= stages) {  // take stage s: its bytes landed; then free it (in both blocks of a cluster)
      wait_parity(&full[s], static_cast<unsigned>((it / stages - 1) & 1));
      if (kCluster) {
        uint32_t remote;
        asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(remote) : "r"(sm(&empty[s])), "r"(other));
        asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" ::"r"(remote) : "memory");
        asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(sm(&empty[s])) : "memory");
      }
    }
    if (it >= iters) continue;
    const size_t c = shared ? it % chunks : (base * 7919 + it) % chunks;
    const unsigned char* from = src + c * kChunk;
    if (!kCluster) {
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(sm(&full[s])), "r"(kChunk) : "memory");
      asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
                   ::"r"(sm(raw + s * kChunk)), "l"(from), "r"(kChunk), "r"(sm(&full[s])) : "memory");
    } else {
      if (it >= stages) wait_parity(&empty[s], static_cast<unsigned>((it / stages - 1) & 1));  // both blocks took the stage
      asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(sm(&full[s])), "r"(kChunk) : "memory");
      const uint16_t mask = 3;
      asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1], %2, [%3], %4;\n"
                   ::"r"(sm(raw + s * kChunk + me * kChunk / 2)), "l"(from + me * kChunk / 2), "r"(kChunk / 2), "r"(sm(&full[s])), "h"(mask) : "memory");
    }
  }
  if (kCluster) asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
  if (raw[0] == 0x5a && raw[kChunk - 1] == 0xa5) *sink = 1;
}

int main() {
  cudaDeviceProp prop;
  CHECK(cudaGetDeviceProperties(&prop, 0));
  const int sms = prop.multiProcessorCount;
  size_t bytes = size_t(prop.l2CacheSize) / 4 / kChunk * kChunk;  // a quarter of the L2
  unsigned char* buf; uint32_t* sink;
  CHECK(cudaMalloc(&buf, bytes)); CHECK(cudaMalloc(&sink, 4));
  CHECK(cudaMemset(buf, 1, bytes));
  cudaEvent_t a, b; cudaEventCreate(&a); cudaEventCreate(&b);
  const int iters = 2048;
  std::printf("%s, %d SMs; chunk %d B; bytes delivered into SMEM per second\n", prop.name, sms, kChunk);
  for (int cluster = 0; cluster < 2; ++cluster)
    for (int shared = 0; shared < 2; ++shared)
      for (int per_sm : {1, 2})
        for (int stages : {4, 8, 12}) {
          const int smem = stages * kChunk;
          if (smem * per_sm > 220 * 1024) continue;
          const size_t chunks = shared ? (size_t(2) << 20) / kChunk : bytes / kChunk;
          const int blocks = sms * per_sm;
          std::vector<float> ts;
          for (int r = 0; r < 7; ++r) {
            cudaEventRecord(a);
            if (cluster) {
              CHECK(cudaFuncSetAttribute(bulk<true>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
              cudaLaunchConfig_t cfg = {};
              cfg.gridDim = dim3(blocks); cfg.blockDim = dim3(32); cfg.dynamicSmemBytes = smem;
              cudaLaunchAttribute at[1]; at[0].id = cudaLaunchAttributeClusterDimension; at[0].val.clusterDim.x = 2; at[0].val.clusterDim.y = 1; at[0].val.clusterDim.z = 1;
              cfg.attrs = at; cfg.numAttrs = 1;
              CHECK(cudaLaunchKernelEx(&cfg, bulk<true>, (const unsigned char*)buf, chunks, iters, stages, shared, sink));
            } else {
              CHECK(cudaFuncSetAttribute(bulk<false>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem));
              bulk<false><<<blocks, 32, smem>>>(buf, chunks, iters, stages, shared, sink);
            }
            cudaEventRecord(b);
            CHECK(cudaEventSynchronize(b));
            CHECK(cudaGetLastError());
            float ms; cudaEventElapsedTime(&ms, a, b); ts.push_back(ms);
          }
          std::sort(ts.begin(), ts.end());
          const double t = ts[ts.size() / 2] * 1e-3;
          const double delivered = double(blocks) * iters * kChunk;  // bytes landed in SMEM
          std::printf("cluster %d shared %d blocks/SM %d stages %2d (%3d KB in flight/SM): %.3g B/s delivered, %.3g B/s from L2, %.2f us per stage round\n",
                      cluster + (cluster ? 1 : 0), shared, per_sm, stages, stages * 16 * per_sm, delivered / t, delivered / t / (cluster ? 2 : 1),
                      t / (double(iters) / stages) * 1e6);
        }
  return 0;
}
