/** \file fp8.cuh
 *  8-bit floats (OCP FP8 v1.0: E4M3 "fn", no infinities, and E5M2) as stored elements: their fp32
 *  conversions beside numeric.cuh's, through cuda_fp8.h. Rounding matches the evaluator's
 *  (diagrams/dtype.hpp round_to): to nearest even; E4M3 saturates to +-448, E5M2 overflows to inf.
 *  pack4_fp8 and acc_to_a_fp8 turn fp32 accumulators into 8-bit wgmma A fragments (the fp8 flash
 *  form's P). Emitted only into files that store fp8 arrays (emit/cuda/preamble.hpp), so that the others keep
 *  their text; tests/gpu/tiles_test.cu checks it on the GPU.
 */
#pragma once
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include "emit/cuda/device/frag8.cuh"
#include "emit/cuda/device/numeric.cuh"

namespace napkin {

__device__ __forceinline__ float to_f(__nv_fp8_e4m3 x) { return static_cast<float>(x); }
__device__ __forceinline__ float to_f(__nv_fp8_e5m2 x) { return static_cast<float>(x); }
template <> __device__ __forceinline__ __nv_fp8_e4m3 from_f<__nv_fp8_e4m3>(float x) {
  __nv_fp8_e4m3 r;
  r.__x = __nv_cvt_float_to_fp8(x, __NV_SATFINITE, __NV_E4M3);
  return r;
}
template <> __device__ __forceinline__ __nv_fp8_e5m2 from_f<__nv_fp8_e5m2>(float x) {
  __nv_fp8_e5m2 r;
  r.__x = __nv_cvt_float_to_fp8(x, __NV_NOSAT, __NV_E5M2);
  return r;
}

/** store_pair (numeric.cuh) of 1-byte elements: two single stores (no paired fp8 store). */
template <> __device__ __forceinline__ void store_pair<__nv_fp8_e4m3>(__nv_fp8_e4m3* p, const int64_t x[2], const float v[2], bool second) {
  p[x[0]] = from_f<__nv_fp8_e4m3>(v[0]);
  if (second) p[x[1]] = from_f<__nv_fp8_e4m3>(v[1]);
}
template <> __device__ __forceinline__ void store_pair<__nv_fp8_e5m2>(__nv_fp8_e5m2* p, const int64_t x[2], const float v[2], bool second) {
  p[x[0]] = from_f<__nv_fp8_e5m2>(v[0]);
  if (second) p[x[1]] = from_f<__nv_fp8_e5m2>(v[1]);
}

/** Host side: whether the current device runs mma.sync with 8-bit float operands (compute capability
 *  8.9 and later, PTX ISA 9.7.14.5.14; the atoms trap before it). Clears the errors it meets. */
[[maybe_unused]] static inline bool fp8_mma_sync_device() {
  int dev = 0, major = 0, minor = 0;
  if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, dev) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return major * 10 + minor >= 89;
}

/** The 8-bit kind (cuda_fp8.h) of an fp8 element type. */
template <class T> struct Fp8Kind;
template <> struct Fp8Kind<__nv_fp8_e4m3> { static constexpr __nv_fp8_interpretation_t value = __NV_E4M3; };
template <> struct Fp8Kind<__nv_fp8_e5m2> { static constexpr __nv_fp8_interpretation_t value = __NV_E5M2; };

/** Four fp32 values rounded to T (to nearest even; E4M3 saturates to +-448, E5M2 overflows to
 *  inf, as from_f) and packed into one register, `a` in the lowest byte. */
template <class T> __device__ __forceinline__ uint32_t pack4_fp8(float a, float b, float c, float d) {
  constexpr auto sat = Fp8Kind<T>::value == __NV_E4M3 ? __NV_SATFINITE : __NV_NOSAT;
  const uint32_t lo = __nv_cvt_float2_to_fp8x2(make_float2(a, b), sat, Fp8Kind<T>::value);
  const uint32_t hi = __nv_cvt_float2_to_fp8x2(make_float2(c, d), sat, Fp8Kind<T>::value);
  return lo | hi << 16;
}

/** One k32 slice of a warpgroup MMA's fp32 accumulator, rounded to the 8-bit type T, as the A
 *  operand of the next 8-bit wgmma from registers (FlashAttention's P, the A of O += P V).
 *  `c`: the 16 accumulator values of n8 tiles 4j..4j+3 of this k32 slice (the m64nN f32 layout,
 *  PTX ISA 9.7.15.5.1.1: c[4t + e] at row lane/4 + 8 (e / 2), column 8t + 2 (lane % 4) + e % 2).
 *  `a`: the A fragment of wgmma .m64nNk32 for .e4m3/.e5m2 (PTX ISA 9.7.15.5.1.1, the layout of
 *  mma.m16n8k32's 8-bit A per warp: register r holds bytes i = 4r .. 4r + 3 at row lane/4 + 8 (r % 2),
 *  columns 4 (lane % 4) + i % 4 + 16 (r / 2), lowest byte first). The quad exchanges 16-bit pairs by
 *  two shuffles per register pair: lane t of the quad needs columns 4t .. 4t + 3 of each 16-column
 *  half, held in pairs by lanes 2t % 4 and 2t % 4 + 1 (their n8 tile t / 2 of that half); each
 *  sender packs both rows of the tile its reader needs into one word, so no half of a shuffled
 *  word is wasted. All 32 lanes of the warp must call it (it shuffles). Checked on the GPU by
 *  tests/gpu/tiles_test.cu, against the PTX layout and through a wgmma. */
template <class T> __device__ __forceinline__ void acc_to_a_fp8(const float* c, uint32_t (&a)[4], int lane) {
  const int t = lane % 4, quad = lane & ~3;
  const int from0 = (2 * t) % 4 + t / 2, from1 = (2 * t) % 4 + 1 - t / 2;  // the two senders, in shuffle order
#pragma unroll
  for (int h = 0; h < 2; ++h) {  // 16-column halves of the k32 slice
    // n8 tile j = 2h + {0, 1}: bytes {row g col 2t, 2t + 1, row g + 8 col 2t, 2t + 1}
    const uint32_t w0 = pack4_fp8<T>(c[8 * h], c[8 * h + 1], c[8 * h + 2], c[8 * h + 3]);
    const uint32_t w1 = pack4_fp8<T>(c[8 * h + 4], c[8 * h + 5], c[8 * h + 6], c[8 * h + 7]);
    // shuffle 1: sender s serves the reader that wants its tile s % 2; shuffle 2: its tile 1 - s % 2
    const uint32_t r0 = __shfl_sync(0xffffffffu, (t & 1) ? w1 : w0, quad + from0);
    const uint32_t r1 = __shfl_sync(0xffffffffu, (t & 1) ? w0 : w1, quad + from1);
    const uint32_t lo = t < 2 ? r0 : r1, hi = t < 2 ? r1 : r0;  // from lanes 2t % 4 (columns 4t, +1) and 2t % 4 + 1 (4t + 2, +3)
    a[2 * h] = __byte_perm(lo, hi, 0x5410);      // row g
    a[2 * h + 1] = __byte_perm(lo, hi, 0x7632);  // row g + 8
  }
}

}  // namespace napkin
