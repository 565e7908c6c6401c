/** \file fp8.cuh
 *  8-bit floats (OCP FP8 v1.0: E4M3 "fn", no infinities, and E5M2) as stored elements: their fp32
 *  conversions beside numeric.cuh's, through cuda_fp8.h. Rounding matches the evaluator's
 *  (diagrams/dtype.hpp round_to): to nearest even; E4M3 saturates to +-448, E5M2 overflows to inf.
 *  Emitted only into files that store fp8 arrays (emit/cuda/preamble.hpp), so that the others keep
 *  their text; tests/gpu/tiles_test.cu checks it on the GPU.
 */
#pragma once
#include <cuda_fp8.h>

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

}  // namespace napkin
