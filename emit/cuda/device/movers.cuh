/** \file movers.cuh
 *  Asynchronous copies global -> SMEM that every target has (sm_80+): 16-byte cp.async with zero
 *  fill, committed and waited for in groups. The Hopper movers (TMA) are in tma.cuh.
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

}  // namespace napkin
