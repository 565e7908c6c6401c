/** \file movers.cuh
 *  Asynchronous copies global -> SMEM that every target has (sm_80+): 16-, 8- and 4-byte cp.async
 *  with zero fill, committed and waited for in groups; atomic adds registers -> global memory. The Hopper
 *  movers (TMA) are in tma.cuh.
 */
#pragma once
#include <cstdint>
#include <cuda_runtime.h>

namespace napkin {

// cp.async: 16 bytes global -> SMEM, bypassing L1; bytes past `valid_bytes` are zero-filled
// (PTX ISA 9.7.9.25.3.1). `src` must be 16-byte aligned even when valid_bytes is 0.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int valid_bytes) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(valid_bytes));
}
// cp.async of 8 or 4 bytes (cp.async.ca: .cg takes 16 bytes only, PTX ISA 9.7.9.25.3.1), for rows
// that are not 16-byte aligned; bytes past `valid_bytes` are zero-filled; `src` BYTES-aligned.
template <int BYTES> __device__ __forceinline__ void cp_async_narrow(void* dst, const void* src, int valid_bytes) {
  static_assert(BYTES == 4 || BYTES == 8, "cp.async.ca copies 4, 8 or 16 bytes");
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.ca.shared.global [%0], [%1], %2, %3;\n" ::"r"(s), "l"(src), "n"(BYTES), "r"(valid_bytes));
}
/** The widest cp.async (16, 8 or 4 bytes) that keeps every access of a tile aligned, from `bits`:
 *  the OR of its origin's address and its strides in bytes; 0 where not even 4 divides them (the
 *  tile is then copied element by element). */
__host__ __device__ __forceinline__ int copy_width(uint64_t bits) { return bits % 16 == 0 ? 16 : bits % 8 == 0 ? 8 : bits % 4 == 0 ? 4 : 0; }
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

// 16-byte loads and stores with an L2 eviction priority (PTX ISA 9.7.9.8 ld and 9.7.9.10 st
// with .L2::cache_hint, 9.7.9.18 createpolicy; sm_80+): a rows kernel (emit/cuda/rows.cpp) loads
// what its second walk re-reads from global memory with evict_last, so that the lines wait in L2
// for the re-read, and everything it touches once (its staged prefix, its last reads, its
// outputs) with evict_first, so that those lines leave first.
/** The policy "evict_last" for every address (createpolicy.fractional, fraction 1). */
__device__ __forceinline__ uint64_t l2_evict_last() {
  uint64_t p;
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;\n" : "=l"(p));
  return p;
}
/** The policy "evict_first" for every address. */
__device__ __forceinline__ uint64_t l2_evict_first() {
  uint64_t p;
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(p));
  return p;
}
/** 16 bytes from global `p` (16-byte aligned) under L2 policy `policy`. */
__device__ __forceinline__ uint4 ld16_policy(const void* p, uint64_t policy) {
  uint4 v;
  asm volatile("ld.global.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p), "l"(policy));
  return v;
}
/** 16 bytes `v` to global `p` (16-byte aligned) under L2 policy `policy`. */
__device__ __forceinline__ void st16_policy(void* p, uint4 v, uint64_t policy) {
  asm volatile("st.global.L2::cache_hint.v4.u32 [%0], {%1, %2, %3, %4}, %5;\n" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w), "l"(policy)
               : "memory");
}

/** Adds (x, y) into p[0] and p[1], fp32 in global memory, by atomic reductions that return no
 *  value (PTX ISA 9.7.13.6 red; relaxed, gpu scope): one red.global.add.v2.f32 on sm_90 and
 *  later, where `p` must be 8-byte aligned; two scalar ones before. */
__device__ __forceinline__ void red_add2(float* p, float x, float y) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("red.global.add.v2.f32 [%0], {%1, %2};\n" ::"l"(p), "f"(x), "f"(y) : "memory");
#else
  atomicAdd(p, x);
  atomicAdd(p + 1, y);
#endif
}

}  // namespace napkin
