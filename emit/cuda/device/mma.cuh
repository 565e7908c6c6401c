/** \file mma.cuh
 *  Register fragments of the warp-level MMA m16n8k16 loaded from SMEM by ldmatrix. The mma.sync
 *  atoms themselves are generated per row of the hardware description's [[mma]] table
 *  (emit/cuda/preamble.cpp, mma_function); wgmma is in wgmma.cuh.
 */
#pragma once
#include <cstdint>
#include <cuda_runtime.h>

namespace napkin {

// ldmatrix: four 8x8 matrices of 16-bit elements from SMEM, one row address per lane
// (PTX ISA 9.7.14.5.15); .trans transposes each matrix.
__device__ __forceinline__ void ldsm_x4(uint32_t r[4], const void* p) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(s));
}
__device__ __forceinline__ void ldsm_x4_t(uint32_t r[4], const void* p) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(s));
}

// stmatrix: four 8x8 matrices of 16-bit elements to SMEM, the inverse of ldsm_x4 (PTX ISA
// 9.7.14.5.16, sm_90): lane l holds, in r[i], row l / 4 and columns 2 (l % 4), +1 of matrix i
// (the accumulator fragment layout of mma and wgmma, packed to pairs); lanes 8i..8i+7 give the
// addresses of matrix i's rows 0..7, 16 bytes each.
__device__ __forceinline__ void stsm_x4(void* p, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1,%2,%3,%4};\n" ::"r"(s), "r"(r0), "r"(r1), "r"(r2), "r"(r3) : "memory");
#else
  __trap();  // sm_90 and later only: the callers are the sm_90a variants
#endif
}

// stmatrix .trans: as stsm_x4, each matrix stored transposed: the row lane 8i + j addresses
// receives column j of matrix i (rows 0..7 of the fragment), 16 bytes.
__device__ __forceinline__ void stsm_x4_t(void* p, uint32_t r0, uint32_t r1, uint32_t r2, uint32_t r3) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(p));
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1,%2,%3,%4};\n" ::"r"(s), "r"(r0), "r"(r1), "r"(r2), "r"(r3) : "memory");
#else
  __trap();  // sm_90 and later only: the callers are the sm_90a variants
#endif
}

// Fragments of m16n8k16 (PTX ISA 9.7.14.5.14). A: 16x16 at (m0, k0); B: two 16x8 tiles at
// (k0, n0) and (k0, n0 + 8), registers {b0, b1} of the first then of the second.
/** A stored [m][k] (k contiguous). */
template <class T> __device__ __forceinline__ void frag_a(uint32_t a[4], const T* s, int pitch, int m0, int k0, int lane) {
  ldsm_x4(a, s + (m0 + (lane % 16)) * pitch + k0 + (lane / 16) * 8);
}
/** A stored [k][m] (m contiguous). */
template <class T> __device__ __forceinline__ void frag_a_t(uint32_t a[4], const T* s, int pitch, int m0, int k0, int lane) {
  ldsm_x4_t(a, s + (k0 + (lane / 16) * 8 + lane % 8) * pitch + m0 + ((lane / 8) % 2) * 8);
}
/** B stored [n][k] (k contiguous). */
template <class T> __device__ __forceinline__ void frag_b(uint32_t b[4], const T* s, int pitch, int n0, int k0, int lane) {
  ldsm_x4(b, s + (n0 + (lane / 16) * 8 + lane % 8) * pitch + k0 + ((lane / 8) % 2) * 8);
}
/** B stored [k][n] (n contiguous). */
template <class T> __device__ __forceinline__ void frag_b_t(uint32_t b[4], const T* s, int pitch, int n0, int k0, int lane) {
  ldsm_x4_t(b, s + (k0 + ((lane / 8) % 2) * 8 + lane % 8) * pitch + n0 + (lane / 16) * 8);
}

}  // namespace napkin
