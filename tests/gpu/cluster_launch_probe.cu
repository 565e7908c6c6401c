// Probe: what a thread-block cluster costs a short kernel, apart from its loads. The same trivial
// persistent-style kernel (one block per SM by its dynamic SMEM, 384 threads, mbarrier init and a
// block/cluster barrier, a spin of `work` clock cycles) launched with clusters of 1 and of 2, timed
// back to back with CUDA events; prints microseconds per launch. Session 12: thin GEMMs measured
// 5-8 us slower with clusters than without (docs/benchmarks.md), which no bandwidth term explained.
// Build: nvcc -std=c++17 -O2 -arch=sm_90a -I. tests/gpu/cluster_launch_probe.cu
#include <cuda_runtime.h>

#include <cstdio>

#include "emit/cuda/device/napkin.cuh"

template <int CLUSTER>
__global__ void __launch_bounds__(384) __cluster_dims__(CLUSTER, 1, 1) probe(long long work, int* sink) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(1024) unsigned char smem[];
  __shared__ uint64_t bar;
  if (threadIdx.x == 0) napkin::mbar_init(&bar, 1), napkin::mbar_init_fence();
  if (CLUSTER > 1) napkin::cluster_sync();
  else __syncthreads();
  const long long t0 = clock64();
  while (clock64() - t0 < work) {
  }
  if (threadIdx.x == 0) smem[0] = 1, sink[blockIdx.x] = smem[0];
  if (CLUSTER > 1) napkin::cluster_sync();  // as the GEMM does before exit: no remote arrival lands on an exited block
#endif
}

template <int CLUSTER>
float time_launches(int blocks, long long work, int* sink, int reps) {
  const int smem = 229376 - 1024;
  cudaFuncSetAttribute(probe<CLUSTER>, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  cudaEvent_t a, b;
  cudaEventCreate(&a), cudaEventCreate(&b);
  for (int i = 0; i < 5; ++i) probe<CLUSTER><<<blocks, 384, smem>>>(work, sink);
  cudaEventRecord(a);
  for (int i = 0; i < reps; ++i) probe<CLUSTER><<<blocks, 384, smem>>>(work, sink);
  cudaEventRecord(b);
  cudaEventSynchronize(b);
  float ms = 0;
  cudaEventElapsedTime(&ms, a, b);
  if (cudaGetLastError() != cudaSuccess) return -1;
  return ms * 1e3f / reps;
}

int main() {
  int* sink = nullptr;
  cudaMalloc(&sink, 4096 * sizeof(int));
  int sms = 0;
  cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0);
  int max_clusters = 0;
  {
    cudaLaunchConfig_t cfg{};
    cfg.gridDim = dim3(128), cfg.blockDim = dim3(384), cfg.dynamicSmemBytes = 229376 - 1024;
    cudaLaunchAttribute attr{};
    attr.id = cudaLaunchAttributeClusterDimension, attr.val.clusterDim.x = 2, attr.val.clusterDim.y = 1, attr.val.clusterDim.z = 1;
    cfg.attrs = &attr, cfg.numAttrs = 1;
    cudaFuncSetAttribute(probe<2>, cudaFuncAttributeMaxDynamicSharedMemorySize, 229376 - 1024);
    if (cudaOccupancyMaxActiveClusters(&max_clusters, probe<2>, &cfg) != cudaSuccess) max_clusters = -1;
  }
  std::printf("SMs %d, max active clusters of 2 at one block per SM: %d\n", sms, max_clusters);
  for (long long work : {0LL, 20000LL, 60000LL})
    for (int blocks : {128, 132}) {
      const float t1 = time_launches<1>(blocks, work, sink, 200), t2 = time_launches<2>(blocks, work, sink, 200);
      std::printf("blocks %3d, spin %6lld cycles: cluster 1 %7.2f us, cluster 2 %7.2f us, difference %+.2f us\n", blocks, work, t1, t2, t2 - t1);
    }
  return 0;
}
