// Probe: does TMA multicast raise the bytes a thread-block cluster lands in SMEM per second, or only
// halve what it reads from L2? The performance model (perfmodel/cost.cpp, clusters) prices a
// cluster of c blocks as dividing the L2 -> SMEM bytes of the tiles they share by c. Session 12
// measured every clustered thin GEMM 5-8 us slower than its unclustered twin (docs/benchmarks.md).
// If the SM's intake, not L2's output, bounds the bulk-copy path, multicast saves nothing there and
// the cluster's lockstep (a stage refilled only when every block released it) is pure cost.
//
// One thread per block streams 16 KB chunks into a 4-stage SMEM ring by cp.async.bulk (PTX ISA
// 9.7.9.25.4.1), each stage guarded by a `full` mbarrier counting the bytes landed and an `empty`
// mbarrier every block of the cluster arrives on after reading the stage (the GEMM's protocol,
// emit/cuda/gemm_wgmma.cpp). Three forms, one block per SM (its dynamic SMEM):
//   cluster 1:            each block loads whole chunks;
//   cluster 2, own loads: each block loads whole chunks, but refills a stage only when both
//                         blocks released it (the lockstep alone);
//   cluster 2, multicast: each block loads half of every chunk with .multicast::cluster into both.
// Prints, per form and source (an L2-resident buffer, a 2 GiB one that streams from HBM), the
// bytes landed in SMEM per second over all SMs and the bytes read from L2 per second.
// Build: nvcc -std=c++17 -O2 -arch=sm_90a -I. tests/gpu/multicast_probe.cu
#include <cuda_runtime.h>

#include <cstdio>

#include "emit/cuda/device/napkin.cuh"

constexpr int kChunk = 16384, kStages = 4;

template <int CLUSTER, bool MULTICAST>
__global__ void __launch_bounds__(32) __cluster_dims__(CLUSTER, 1, 1) stream(const unsigned char* src, size_t chunks, int iters, int* sink) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(1024) unsigned char ring[];
  __shared__ uint64_t full[kStages], empty[kStages];
  const unsigned rank = CLUSTER > 1 ? napkin::cluster_rank() : 0;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages; ++s) napkin::mbar_init(&full[s], 1), napkin::mbar_init(&empty[s], CLUSTER);
    napkin::mbar_init_fence();
  }
  if (CLUSTER > 1) napkin::cluster_sync();
  else __syncthreads();
  if (threadIdx.x == 0) {
    const size_t cluster_id = blockIdx.x / CLUSTER;
    for (int it = 0; it < iters; ++it) {
      const int s = it % kStages;
      if (it >= kStages) napkin::mbar_wait(&empty[s], static_cast<unsigned>((it / kStages - 1) & 1));
      napkin::mbar_expect_tx(&full[s], kChunk);
      // Blocks of one cluster read the same chunk (the operand tile they share); clusters differ.
      const size_t chunk = ((MULTICAST || CLUSTER > 1 ? cluster_id : blockIdx.x) * 7919 + it) % chunks;
      if (MULTICAST) {
        const unsigned half = kChunk / CLUSTER;
        const unsigned dst = napkin::smem_u32(ring + s * kChunk + rank * half), bar = napkin::smem_u32(&full[s]);
        const uint16_t mask = (1u << CLUSTER) - 1;
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1], %2, [%3], %4;\n"
                     ::"r"(dst), "l"(src + chunk * kChunk + rank * half), "r"(half), "r"(bar), "h"(mask) : "memory");
      } else {
        asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
                     ::"r"(napkin::smem_u32(ring + s * kChunk)), "l"(src + chunk * kChunk), "r"(kChunk), "r"(napkin::smem_u32(&full[s])) : "memory");
      }
      napkin::mbar_wait(&full[s], static_cast<unsigned>((it / kStages) & 1));
      if (CLUSTER > 1)
        for (unsigned r = 0; r < CLUSTER; ++r) napkin::mbar_arrive_cluster(&empty[s], r);
      else
        napkin::mbar_arrive(&empty[s]);
    }
    if (ring[7] == 0x5a && ring[kChunk - 1] == 0xa5) sink[blockIdx.x] = 1;
  }
  if (CLUSTER > 1) napkin::cluster_sync();  // no remote arrival lands on an exited block
#endif
}

template <int CLUSTER, bool MULTICAST>
double landed_bytes_per_s(const unsigned char* src, size_t chunks, int blocks, int iters, int* sink) {
  const int ask = 229376 - 1024;  // one block per SM (the ring needs kStages * kChunk), as the GEMM has
  cudaFuncSetAttribute(stream<CLUSTER, MULTICAST>, cudaFuncAttributeMaxDynamicSharedMemorySize, ask);
  cudaEvent_t a, b;
  cudaEventCreate(&a), cudaEventCreate(&b);
  stream<CLUSTER, MULTICAST><<<blocks, 32, ask>>>(src, chunks, iters, sink);
  cudaEventRecord(a);
  const int reps = 5;
  for (int i = 0; i < reps; ++i) stream<CLUSTER, MULTICAST><<<blocks, 32, ask>>>(src, chunks, iters, sink);
  cudaEventRecord(b);
  cudaEventSynchronize(b);
  float ms = 0;
  cudaEventElapsedTime(&ms, a, b);
  if (cudaError_t e = cudaGetLastError(); e != cudaSuccess) {
    std::printf("launch failed: %s\n", cudaGetErrorString(e));
    return -1;
  }
  return double(blocks) * iters * kChunk * reps / (ms * 1e-3);
}

int main() {
  int sms = 0, l2 = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  cudaDeviceGetAttribute(&l2, cudaDevAttrL2CacheSize, 0);
  int* sink = nullptr;
  unsigned char* buf = nullptr;
  const size_t big = size_t(2) << 30;
  cudaMalloc(&sink, 4096 * sizeof(int));
  cudaMalloc(&buf, big);
  cudaMemset(buf, 1, big);
  std::printf("SMs %d, L2 %d bytes, chunk %d bytes, %d stages, one block per SM\n", sms, l2, kChunk, kStages);
  const int blocks = sms / 2 * 2;
  for (const auto& [name, bytes] : {std::pair<const char*, size_t>{"L2-resident (L2 / 4)", size_t(l2) / 4}, {"HBM (2 GiB)", big}}) {
    const size_t chunks = bytes / kChunk;
    const int iters = 8192;
    const double one = landed_bytes_per_s<1, false>(buf, chunks, blocks, iters, sink);
    const double own = landed_bytes_per_s<2, false>(buf, chunks, blocks, iters, sink);
    const double mc = landed_bytes_per_s<2, true>(buf, chunks, blocks, iters, sink);
    std::printf("%s, %d blocks:\n", name, blocks);
    std::printf("  cluster 1            landed %.3g B/s, read from L2 %.3g B/s\n", one, one);
    std::printf("  cluster 2, own loads landed %.3g B/s, read from L2 %.3g B/s\n", own, own);
    std::printf("  cluster 2, multicast landed %.3g B/s, read from L2 %.3g B/s\n", mc, mc / 2);
  }
  return 0;
}
