/** \file frag8.cuh
 *  Fragments of mma.sync m16n8k32 with 8-bit operands (.s8, .e4m3, .e5m2; PTX ISA 9.7.14.5.14) loaded
 *  by ldmatrix: a row of 32 8-bit elements is 32 bytes, as a row of 16 16-bit elements is, and the
 *  byte layout of each register of the k32 8-bit fragments equals that of the k16 16-bit ones, so
 *  the 8x8 b16 matrices ldmatrix loads are the same bytes with the column offsets in 8-bit elements
 *  doubled (no .trans: it transposes 16-bit elements, so both operands are K-major). Emitted into
 *  files that store int8 or fp8 arrays (emit/cuda/preamble.hpp), once (the guard below) where a
 *  file stores both; tests/gpu/tiles_test.cu checks it on the GPU.
 */
#pragma once
#ifndef NAPKIN_FRAG8
#define NAPKIN_FRAG8
#include <cstdint>

#include "emit/cuda/device/mma.cuh"

namespace napkin {

// A 16x32 at (m0, k0), registers {a0..a3} = rows g and g + 8 (g = lane / 4) of K bytes 0..15, then
// of bytes 16..31; B two 32x8 tiles at (k0, n0) and (k0, n0 + 8), registers {b0, b1} of the first
// then of the second. Rows `pitch` elements apart, 16-byte aligned. T: a 1-byte element type.
/** A stored [m][k] (k contiguous). */
template <class T> __device__ __forceinline__ void frag_a8(uint32_t a[4], const T* s, int pitch, int m0, int k0, int lane) {
  static_assert(sizeof(T) == 1, "8-bit fragments");
  ldsm_x4(a, s + (m0 + (lane % 16)) * pitch + k0 + (lane / 16) * 16);
}
/** B stored [n][k] (k contiguous). */
template <class T> __device__ __forceinline__ void frag_b8(uint32_t b[4], const T* s, int pitch, int n0, int k0, int lane) {
  static_assert(sizeof(T) == 1, "8-bit fragments");
  ldsm_x4(b, s + (n0 + (lane / 16) * 8 + lane % 8) * pitch + k0 + ((lane / 8) % 2) * 16);
}

}  // namespace napkin
#endif  // NAPKIN_FRAG8
