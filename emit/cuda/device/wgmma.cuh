/** \file wgmma.cuh
 *  Hopper (sm_90a) warpgroup MMA support: SMEM matrix descriptors of 128-byte-swizzled tiles,
 *  fences, commit and wait. The wgmma atoms themselves, whose operand lists depend on n, are
 *  generated (emit/cuda/preamble.cpp, wgmma_function).
 */
#pragma once
#include <cstdint>

#include "emit/cuda/device/sync.cuh"

namespace napkin {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// wgmma (PTX ISA 9.7.15): SMEM matrix descriptor (9.7.15.5.1.2.2) of a 128-byte-swizzled tile whose
// swizzle atoms (8 rows of 128 bytes) start 1024-byte aligned. `lbo`, `sbo`: leading and stride
// dimension byte offsets (for K-major tiles lbo is unused and sbo = 1024; for MN-major tiles lbo is
// the distance between 64-element column blocks and sbo = 1024).
__device__ __forceinline__ uint64_t smem_desc(const void* p, unsigned lbo, unsigned sbo) {
  return static_cast<uint64_t>((smem_u32(p) & 0x3FFFF) >> 4) | static_cast<uint64_t>((lbo >> 4) & 0x3FFF) << 16 |
         static_cast<uint64_t>((sbo >> 4) & 0x3FFF) << 32 | uint64_t{1} << 62;
}
/** `desc` (smem_desc) moved `bytes` further into the same SMEM tile: its start-address field (bits
 *  0-13, the shared-window address / 16; PTX ISA 9.7.15.5.1.2.2) advanced by one 32-bit add on the
 *  low word, as CUTLASS's descriptor iterator does. Descriptors of a tile's k steps and stages are
 *  then one integer add each from a base the loop computes once, not a mask, shift and or per wgmma
 *  (measured: those took 95 uniform-datapath instructions per warp and chunk of the fp8 flash form).
 *  `bytes`: a multiple of 16, >= 0; the address stays inside the 256 KB shared window, so the field
 *  never carries into the leading-offset field above it. */
__device__ __forceinline__ uint64_t desc_advance(uint64_t desc, int bytes) {
  const uint32_t lo = static_cast<uint32_t>(desc) + (static_cast<uint32_t>(bytes) >> 4);
  return (desc & 0xFFFFFFFF00000000ull) | lo;
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"); }
/** Keeps the compiler from moving accesses of accumulators across wgmma issue and wait. */
template <int N> __device__ __forceinline__ void fence_regs(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
/** Registers [first, first + N) of accumulator row `r` (M registers) as an array of N: one of
 *  several wgmma atoms side by side along a tile's N, covering its columns [2 first, 2 first + 2 N)
 *  (emit/cuda/render_mma.cpp gemm_wgmma_issue). `first` a constant after unrolling,
 *  first + N <= M. */
template <int N, typename T, int M> __device__ __forceinline__ T (&atom_slice(T (&r)[M], int first))[N] {
  static_assert(N <= M, "an atom inside the accumulator row");
  return *reinterpret_cast<T(*)[N]>(r + first);
}
/** Keeps 16-bit A fragments that an in-flight wgmma reads from registers live (their registers
 *  not reused) up to this point, after the wgmma_wait that covers it. A use, not a definition:
 *  a definition of a wgmma's input registers while a wgmma is in flight makes ptxas serialise
 *  the warpgroup's wgmma (its warning C7513). */
template <int N, int M> __device__ __forceinline__ void keep_live(const uint32_t (&r)[N][M]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
#pragma unroll
    for (int j = 0; j < M; ++j) asm volatile("" ::"r"(r[i][j]) : "memory");
}
/** Orders this thread's generic-proxy writes of SMEM before later async-proxy reads of it (wgmma
 *  operands, TMA stores; PTX ISA 9.7.13.5, fence.proxy.async): needed when threads, not TMA,
 *  fill a wgmma operand. */
__device__ __forceinline__ void fence_proxy_async() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }
#endif
}  // namespace napkin
