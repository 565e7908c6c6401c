/** \file int8.cuh
 *  int8 as a stored element and as an mma.sync operand. Conversions beside numeric.cuh's: to fp32
 *  exactly, from fp32 rounded to nearest even and saturated to [-128, 127] (NaN gives 0), as the
 *  evaluator's round_to_dtype (diagrams/dtype.hpp). Fragments
 *  of mma.sync m16n8k32 .s8 (PTX ISA 9.7.14.5.14) loaded by ldmatrix: a row of 32 int8 is 32
 *  bytes, as a row of 16 16-bit elements is, and the byte layout of each register of the k32 int8
 *  fragments equals that of the k16 16-bit ones, so the 8x8 b16 matrices ldmatrix loads are the
 *  same bytes with the column offsets in int8 elements doubled (no .trans: it transposes 16-bit
 *  elements, so both operands are K-major). Emitted only into files that store int8 arrays
 *  (emit/cuda/preamble.hpp), so that the others keep their text; tests/gpu/tiles_test.cu checks it
 *  on the GPU.
 */
#pragma once
#include <cstdint>

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

// Fragments of m16n8k32 .s8: A 16x32 at (m0, k0), registers {a0..a3} = rows g and g + 8 (g = lane
// / 4) of K bytes 0..15, then of bytes 16..31; B two 32x8 tiles at (k0, n0) and (k0, n0 + 8),
// registers {b0, b1} of the first then of the second. Rows `pitch` elements apart, 16-byte aligned.
/** A stored [m][k] (k contiguous). */
__device__ __forceinline__ void frag_a8(uint32_t a[4], const int8_t* s, int pitch, int m0, int k0, int lane) {
  ldsm_x4(a, s + (m0 + (lane % 16)) * pitch + k0 + (lane / 16) * 16);
}
/** B stored [n][k] (k contiguous). */
__device__ __forceinline__ void frag_b8(uint32_t b[4], const int8_t* s, int pitch, int n0, int k0, int lane) {
  ldsm_x4(b, s + (n0 + (lane / 16) * 8 + lane % 8) * pitch + k0 + ((lane / 8) % 2) * 16);
}

}  // namespace napkin
