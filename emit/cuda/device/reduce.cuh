/** \file reduce.cuh
 *  Warp-level reductions by shuffles: over the 4 lanes of a quad (the lanes that hold one row of
 *  an m16n8 accumulator, tiles.cuh) and over a whole warp; the quad's 4 x 4 transpose of packed
 *  pairs (the gemm epilogue's 16-byte stores, emit/cuda/gemm_wide_store.hpp).
 */
#pragma once
#include <cstdint>
#include <cuda_runtime.h>

namespace napkin {

/** Sum and max over the 4 lanes of a quad (the lanes holding one accumulator row). */
__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}
__device__ __forceinline__ float warp_sum(float x) {
  for (int o = 16; o > 0; o /= 2) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}
__device__ __forceinline__ float warp_max(float x) {
  for (int o = 16; o > 0; o /= 2) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}

/** Lane q = lane % 4 of a quad holds in p[j] the pair of columns 8j + 2q, +1 (32 bits: two 16-bit
 *  elements) of an m16n8 accumulator row; afterwards p[i] holds the pair of columns 8q + 2i, +1,
 *  so the lane has 8 consecutive columns. Round k: lane q receives from lane (q + k) % 4 its p[q];
 *  the lane-dependent register indices are selects, so nothing goes to local memory. */
__device__ __forceinline__ void quad_transpose(uint32_t p[4], int lane) {
  const int q = lane & 3;
  uint32_t r[4] = {p[0], p[1], p[2], p[3]};
#pragma unroll
  for (int k = 1; k < 4; ++k) {
    const int send = (q - k) & 3, from = (q + k) & 3;
    const uint32_t x = send == 0 ? p[0] : send == 1 ? p[1] : send == 2 ? p[2] : p[3];
    const uint32_t y = __shfl_sync(0xffffffffu, x, (lane & ~3) | from);
    r[0] = from == 0 ? y : r[0];
    r[1] = from == 1 ? y : r[1];
    r[2] = from == 2 ? y : r[2];
    r[3] = from == 3 ? y : r[3];
  }
  p[0] = r[0], p[1] = r[1], p[2] = r[2], p[3] = r[3];
}

}  // namespace napkin
