/** \file int8.cuh
 *  int8 as a stored element and as an mma.sync operand. Conversions beside numeric.cuh's: to fp32
 *  exactly, from fp32 rounded to nearest even and saturated to [-128, 127] (NaN gives 0), as the
 *  evaluator's round_to_dtype (diagrams/dtype.hpp). Fragments
 *  of mma.sync m16n8k32 .s8 are frag8.cuh's. Emitted only into files that store int8 arrays
 *  (emit/cuda/preamble.hpp), so that the others keep their text; tests/gpu/tiles_test.cu checks it
 *  on the GPU.
 */
#pragma once
#include <cstdint>

#include "emit/cuda/device/frag8.cuh"
#include "emit/cuda/device/mma.cuh"
#include "emit/cuda/device/numeric.cuh"

namespace napkin {

__device__ __forceinline__ float to_f(int8_t x) { return static_cast<float>(x); }
template <> __device__ __forceinline__ int8_t from_f<int8_t>(float x) {
  const int r = __float2int_rn(x);  // cvt.rni.s32.f32: saturates at the int32 range, NaN gives 0
  return static_cast<int8_t>(r < -128 ? -128 : r > 127 ? 127 : r);
}

/** store2 and store_pair (numeric.cuh) of 1-byte elements: two single stores. */
template <> __device__ __forceinline__ void store2<int8_t>(int8_t* p, const float v[2]) {
  p[0] = from_f<int8_t>(v[0]);
  p[1] = from_f<int8_t>(v[1]);
}
template <> __device__ __forceinline__ void store_pair<int8_t>(int8_t* p, const int64_t x[2], const float v[2], bool second) {
  p[x[0]] = from_f<int8_t>(v[0]);
  if (second) p[x[1]] = from_f<int8_t>(v[1]);
}

/** wgmma.cuh's fence_regs for int32 accumulators (wgmma .s32.s8.s8): the registers stay in place
 *  around the asynchronous MMA. */
template <int N> __device__ __forceinline__ void fence_regs(int32_t (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+r"(r[i])::"memory");
}

}  // namespace napkin
