/** \file numeric.cuh
 *  Element arithmetic of the device tile library: fp32 conversions of the stored types (fp32,
 *  bf16, fp16), 16-bit pairs packed in one register, paired stores of accumulator columns, and the
 *  element-wise maps the diagrams name. Every emitted .cu file starts with this library
 *  (emit/cuda/preamble.hpp); tests/gpu/tiles_test.cu checks it on the GPU.
 */
#pragma once
#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>

namespace napkin {

// fp32 arithmetic on stored elements
__device__ __forceinline__ float to_f(float x) { return x; }
__device__ __forceinline__ float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_f(__half x) { return __half2float(x); }
/** An int32 index (gather targets) as fp32: exact below 2^24. */
__device__ __forceinline__ float to_f(int32_t x) { return static_cast<float>(x); }
template <class T> __device__ __forceinline__ T from_f(float x);
template <> __device__ __forceinline__ float from_f<float>(float x) { return x; }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float x) { return __float2bfloat16(x); }
template <> __device__ __forceinline__ __half from_f<__half>(float x) { return __float2half(x); }
/** Round to nearest even; cvt saturates out-of-range values, NaN gives 0. */
template <> __device__ __forceinline__ int32_t from_f<int32_t>(float x) { return __float2int_rn(x); }
template <class T> __device__ __forceinline__ float round_to(float x) { return to_f(from_f<T>(x)); }
/** Two fp32 values as one 32-bit register of two 16-bit elements (low half first). */
template <class T> __device__ __forceinline__ uint32_t pack2(float lo, float hi);
template <> __device__ __forceinline__ uint32_t pack2<__nv_bfloat16>(float lo, float hi) {
  __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}
template <> __device__ __forceinline__ uint32_t pack2<__half>(float lo, float hi) {
  __half2 v = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<uint32_t*>(&v);
}

/** Copies the 8 elements src[0..8) to dst[0..8): as one 8-byte, one 16-byte or two 16-byte
 *  vector moves (8 elements of 1, 2 or 4 bytes) where both are aligned to them, element by
 *  element otherwise. The SIMT kernels' runs (emit/cuda/simt.cpp) load and store through it: a
 *  warp's 2-byte loads 16 bytes apart had fetched 8 times the bytes they used per instruction. */
template <class T> __device__ __forceinline__ void copy_run8(T* dst, const T* src) {
  constexpr int bytes = 8 * static_cast<int>(sizeof(T)), unit = bytes < 16 ? bytes : 16;
  if ((reinterpret_cast<uintptr_t>(dst) | reinterpret_cast<uintptr_t>(src)) % unit != 0) {
    for (int j = 0; j < 8; ++j) dst[j] = src[j];
  } else if constexpr (bytes == 8) {
    *reinterpret_cast<uint2*>(dst) = *reinterpret_cast<const uint2*>(src);
  } else {
    for (int i = 0; i < bytes / 16; ++i) reinterpret_cast<uint4*>(dst)[i] = reinterpret_cast<const uint4*>(src)[i];
  }
}

/** Stores v[0], v[1] at p[0], p[1] as one 4- or 8-byte store (p aligned to it); 1-byte elements
 *  (fp8, int8) as two single stores. */
template <class T> __device__ __forceinline__ void store2(T* p, const float v[2]) {
  if constexpr (sizeof(T) == 4) {
    *reinterpret_cast<float2*>(p) = make_float2(v[0], v[1]);
  } else if constexpr (sizeof(T) == 1) {
    p[0] = from_f<T>(v[0]), p[1] = from_f<T>(v[1]);
  } else {
    *reinterpret_cast<uint32_t*>(p) = pack2<T>(v[0], v[1]);
  }
}

/** Stores v[0] at p[x[0]] and, when `second`, v[1] at p[x[1]]: one 4- or 8-byte store when the two
 *  are adjacent and aligned (an epilogue's pair of accumulator columns), else two stores. */
template <class T> __device__ __forceinline__ void store_pair(T* p, const int64_t x[2], const float v[2], bool second) {
  if (second && x[1] == x[0] + 1 && reinterpret_cast<uintptr_t>(p + x[0]) % (2 * sizeof(T)) == 0) return store2(p + x[0], v);
  p[x[0]] = from_f<T>(v[0]);
  if (second) p[x[1]] = from_f<T>(v[1]);
}

/** Index arithmetic of a flattened index: returns rest % n and leaves rest / n in `rest` (rest >= 0,
 *  n >= 1). One 32-bit unsigned division where both fit in 32 bits (the usual case: about 20
 *  integer instructions), else the 64-bit one, a software routine several times as long, which
 *  `%` and `/` written apart would run twice (CUDA C++ Programming Guide, arithmetic instructions:
 *  no hardware integer division). The SIMT and columns kernels run it per element. */
__device__ __forceinline__ int64_t split_index(int64_t& rest, int64_t n) {
  if (((static_cast<uint64_t>(rest) | static_cast<uint64_t>(n)) >> 32) == 0) {
    const uint32_t r = static_cast<uint32_t>(rest), m = static_cast<uint32_t>(n), q = r / m;
    rest = q;
    return r - q * m;
  }
  const int64_t q = rest / n, i = rest - q * n;
  rest = q;
  return i;
}

// exp2 on the special-function unit with denormal results flushed to zero (PTX ISA 9.7.4.14,
// ex2.approx.ftz.f32: max relative error 2^-22.5 over the normal range). exp2f compiles to the
// non-ftz ex2.approx.f32, which ptxas wraps in a range test and two scalings per call; the online
// softmax's P = 2^(s - m) lies in [0, 1] and l >= 1, so a flushed P < 2^-126 changes O by less than
// 2^-126 of |V|.
__device__ __forceinline__ float exp2_ftz(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
__device__ __forceinline__ float relu(float x) { return fmaxf(x, 0.0f); }
// step: 1 where x > 0, 0 where x <= 0, NaN where x is NaN (the evaluator's, diagrams/eval.cpp).
__device__ __forceinline__ float step(float x) { return x > 0.0f ? 1.0f : x == x ? 0.0f : x; }
/** gelu(x) = x Phi(x), Phi the normal CDF, with Phi(x) = erfc(-x / sqrt 2) / 2 and, for z = |x| / sqrt 2,
 *  erfc(z) = t exp(-z^2 + P(t)), t = 1 / (1 + z/2), P the degree-9 Chebyshev fit of Press et al.,
 *  Numerical Recipes (2nd ed.), section 6.2, function erfcc: fractional error under 1.2e-7 for every
 *  z >= 0, so x < 0 keeps its relative accuracy where 1 + erff(x / sqrt 2) cancels. Two MUFU ops
 *  (rcp, ex2) and 17 FP32 instructions, a compare and a select (perfmodel/simt_cost.hpp prices it so) against erff's 21 and
 *  its ALU selects at half rate. tests/gpu/tiles_test.cu bounds its error against fp64 on the GPU;
 *  the GPU reference (reference mode) writes gelu_precise. */
__device__ __forceinline__ float gelu(float x) {
  const float z = fabsf(x) * 0.70710678f;
  const float t = __fdividef(1.0f, fmaf(0.5f, z, 1.0f));
  float p = fmaf(t, 0.17087277f, -0.82215223f);
  p = fmaf(t, p, 1.48851587f);
  p = fmaf(t, p, -1.13520398f);
  p = fmaf(t, p, 0.27886807f);
  p = fmaf(t, p, -0.18628806f);
  p = fmaf(t, p, 0.09678418f);
  p = fmaf(t, p, 0.37409196f);
  p = fmaf(t, p, 1.00002368f);
  p = fmaf(t, p, -1.26551223f);
  const float half_erfc = 0.5f * t * exp2_ftz(fmaf(-z, z, p) * 1.44269504f);  // Phi(-|x|)
  return x * (x >= 0.0f ? 1.0f - half_erfc : half_erfc);
}
/** gelu through CUDA's erff (2 ulp; CUDA C++ Programming Guide, mathematical functions): the GPU
 *  reference's form. */
__device__ __forceinline__ float gelu_precise(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678f)); }
/** gelu_tanh(x) = x/2 (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), written as x sigmoid(2u) =
 *  x / (1 + 2^(-2u log2 e)) (1 + tanh u = 2 sigmoid(2u)), the constants scaled by log2 e: MUFU ex2
 *  (exp2_ftz) and rcp (__fdividef, 2 ulp) and 5 FP32 instructions. Large negative x: the
 *  exponential overflows to inf and the quotient is 0 (__fdividef returns 0 for divisors over
 *  2^126), as gelu_tanh's limit. */
__device__ __forceinline__ float gelu_tanh(float x) {
  const float e = exp2_ftz(x * fmaf(-0.10294324f, x * x, -2.3022082f));  // 2^(-2u log2 e)
  return __fdividef(x, 1.0f + e);
}
/** gelu_tanh through CUDA's tanhf (2 ulp): the GPU reference's form. */
__device__ __forceinline__ float gelu_tanh_precise(float x) {
  return 0.5f * x * (1.0f + tanhf(0.7978845608f * (x + 0.044715f * x * x * x)));
}
// sigmoid: MUFU ex2 and rcp (CUDA C++ Programming Guide, intrinsic functions: __expf, __fdividef,
// 2 ulp); 1 + exp(-x) overflowing to inf gives 0, as it should.
__device__ __forceinline__ float sigmoid(float x) { return __fdividef(1.0f, 1.0f + __expf(-x)); }
__device__ __forceinline__ float silu(float x) { return x * sigmoid(x); }

}  // namespace napkin
