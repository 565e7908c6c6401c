/** \file launch.cuh
 *  Host side of the Hopper variants: whether a kernel may run its sm_90a code here, and the grid
 *  of a persistent kernel.
 */
#pragma once
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <cuda_runtime.h>

namespace napkin {
/** True when `kernel` was built for sm_90a (binaryVersion 90), the current device is a Hopper GPU,
 *  the driver has cuTensorMapEncodeTiled, and NAPKIN_NO_WGMMA is unset or 0. Clears the errors it meets. */
static bool hopper_kernel(const void* kernel) {
  if (const char* e = std::getenv("NAPKIN_NO_WGMMA"); e && *e && *e != '0') return false;
  int dev = 0, major = 0;
  cudaFuncAttributes fa{};
  if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
      cudaFuncGetAttributes(&fa, kernel) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return major == 9 && fa.binaryVersion == 90;
}
/** Whether GEMM epilogues (and the flash_bwd kernels with TMA-stored tiles, else their mma.sync
 *  variant runs) may store through SMEM by TMA: true unless NAPKIN_NO_TMA_STORE is set
 *  and not 0. compute-sanitizer's initcheck does not count TMA stores as initialising global
 *  memory (tests/gpu/initcheck_probe.cu: every TMA-written element read afterwards is reported,
 *  the values being right), so its runs take the direct-store epilogue. */
[[maybe_unused]] static bool tma_store_enabled() {
  const char* e = std::getenv("NAPKIN_NO_TMA_STORE");
  return !(e && *e && *e != '0');
}
/** Blocks of a persistent kernel that holds one block per SM: min(`blocks` rounded up to whole
 *  clusters, the SMs rounded down to whole clusters of `cluster`). */
[[maybe_unused]] static int64_t persistent_grid(int64_t blocks, int cluster) {
  static const int sms = [] {
    int dev = 0, n = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) (void)cudaGetLastError();
    return n > 0 ? n : 1;
  }();
  const int64_t whole = (blocks + cluster - 1) / cluster * cluster;
  return std::max<int64_t>(cluster, std::min<int64_t>(whole, sms / cluster * cluster));
}
}  // namespace napkin
