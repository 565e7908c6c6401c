/** \file movers.cuh
 *  Asynchronous copies global -> SMEM that every target has (sm_80+): 16-byte cp.async with zero
 *  fill, committed and waited for in groups; atomic adds registers -> global memory. The Hopper
 *  movers (TMA) are in tma.cuh.
 */
#pragma once
#include <cuda_runtime.h>

namespace napkin {

// cp.async: 16 bytes global -> SMEM, bypassing L1; bytes past `valid_bytes` are zero-filled
// (PTX ISA 9.7.9.25.3.1). `src` must be 16-byte aligned even when valid_bytes is 0.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int valid_bytes) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(valid_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

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
