/** \file reduce.cuh
 *  Warp-level reductions by shuffles: over the 4 lanes of a quad (the lanes that hold one row of
 *  an m16n8 accumulator, tiles.cuh) and over a whole warp.
 */
#pragma once
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

}  // namespace napkin
