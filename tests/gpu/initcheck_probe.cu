// A probe of compute-sanitizer's initcheck, not of napkin: does initcheck count a TMA store
// (cp.async.bulk.tensor, shared -> global) as initialising the global memory it writes?
// Two writers fill a fresh cudaMalloc buffer of 64 x 64 bf16 (never memset), one with ordinary
// stores and one with a TMA store of a swizzled SMEM box; a reader kernel then copies each buffer.
// Run it under `compute-sanitizer --tool initcheck` (tools/device/bench.sh initcheck-probe): reads
// reported for the TMA-written buffer only mean initcheck does not track TMA stores; the copy is
// also checked against the expected values, so a store that did not happen fails here.
// Prints "initcheck_probe: ok" and exits 0 when both copies hold the values written.
#include <cstdio>
#include <vector>

#include "emit/cuda/device/napkin.cuh"

using bf16 = __nv_bfloat16;
constexpr int N = 64;

__global__ void plain_writer(bf16* out) {
  for (int i = threadIdx.x; i < N * N; i += blockDim.x) out[i] = __float2bfloat16(static_cast<float>(i % 251));
}

__global__ void tma_writer(const __grid_constant__ CUtensorMap map) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ unsigned char raw[];
  unsigned char* smem = raw + (1024 - napkin::smem_u32(raw) % 1024) % 1024;
  const napkin::Swizzled128Tile<bf16, N> t{reinterpret_cast<bf16*>(smem)};
  for (int i = threadIdx.x; i < N * N; i += blockDim.x) t.at(i / N, i % N) = __float2bfloat16(static_cast<float>(i % 251));
  napkin::fence_proxy_async();
  __syncthreads();
  if (threadIdx.x == 0) {
    napkin::tma_store(&map, t.p, 0, 0);
    napkin::bulk_commit();
    napkin::bulk_wait<0>();
  }
#endif
}

__global__ void reader(const bf16* in, bf16* out) {
  for (int i = threadIdx.x; i < N * N; i += blockDim.x) out[i] = in[i];
}

int main() {
  bf16 *plain, *tma, *copy;
  cudaMalloc(&plain, N * N * 2);
  cudaMalloc(&tma, N * N * 2);
  cudaMalloc(&copy, N * N * 2);
  CUtensorMap map;
  const uint64_t dims[2] = {N, N}, strides[1] = {N * 2};
  const uint32_t box[2] = {64, N};
  if (!napkin::make_tmap(&map, tma, 2, dims, strides, box, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16)) {
    std::printf("initcheck_probe: make_tmap failed\n");
    return 1;
  }
  int bad = 0;
  for (bf16* src : {plain, tma}) {
    if (src == plain) plain_writer<<<1, 128>>>(plain);
    else tma_writer<<<1, 128, N * N * 2 + 1024>>>(map);
    reader<<<1, 128>>>(src, copy);
    std::vector<bf16> h(N * N);
    cudaMemcpy(h.data(), copy, N * N * 2, cudaMemcpyDeviceToHost);
    for (int i = 0; i < N * N; ++i) bad += __bfloat162float(h[i]) != static_cast<float>(i % 251);
    std::printf("initcheck_probe: %s writer: %s\n", src == plain ? "plain" : "TMA", bad ? "wrong values" : "values as written");
  }
  if (cudaDeviceSynchronize() != cudaSuccess) return 1;
  std::printf(bad ? "initcheck_probe: FAILED\n" : "initcheck_probe: ok\n");
  return bad ? 1 : 0;
}
