/** \file sync.cuh
 *  Hopper (sm_90a) synchronisation: mbarriers with transaction counts, thread-block clusters,
 *  named barriers and setmaxnreg. Device code only where the target has them
 *  (__CUDA_ARCH_FEAT_SM90_ALL); NAPKIN_CLUSTER_DIMS for every target.
 */
#pragma once
#include <cstdint>
#include <cuda_runtime.h>

// Cluster shape of a kernel (sm_90+); nothing for the device passes of older targets, which never launch it.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define NAPKIN_CLUSTER_DIMS(x)
#else
#define NAPKIN_CLUSTER_DIMS(x) __cluster_dims__(x, 1, 1)
#endif
namespace napkin {
/** The dynamic SMEM `raw` advanced to the next 1024-byte boundary of its shared address (the
 *  128-byte swizzle's atom: PTX ISA 9.7.15.5.1, TMA boxes and wgmma descriptors). Pointer
 *  arithmetic on `raw` itself, not through an integer, so the compiler still knows the result
 *  is in shared memory and emits LDS/STS for accesses through it (through uintptr_t it emitted
 *  generic loads and stores). */
__device__ __forceinline__ unsigned char* align_smem_1024(unsigned char* raw) {
  return raw + (1024u - static_cast<unsigned>(__cvta_generic_to_shared(raw)) % 1024u) % 1024u;
}
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
__device__ __forceinline__ unsigned smem_u32(const void* p) { return static_cast<unsigned>(__cvta_generic_to_shared(p)); }
// mbarrier (PTX ISA 9.7.13.15): a phase completes when `count` arrivals and the expected
// transaction bytes have been seen; waiters name the parity of the phase they wait for.
__device__ __forceinline__ void mbar_init(uint64_t* bar, unsigned count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(count));
}
__device__ __forceinline__ void mbar_init_fence() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }
__device__ __forceinline__ void mbar_expect_tx(uint64_t* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(smem_u32(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void mbar_arrive(uint64_t* bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(smem_u32(bar)) : "memory");
}
__device__ __forceinline__ void mbar_wait(uint64_t* bar, unsigned parity) {
  unsigned done = 0;
  do {
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done) : "r"(smem_u32(bar)), "r"(parity) : "memory");
  } while (!done);
}
// Thread-block clusters (PTX ISA 9.7.13.4, 9.7.13.15.11): this block's rank; an mbarrier arrival
// on block `rank`'s copy of `bar` (release at CTA scope, the default: a cluster-scope release costs
// a memory fence per arrival, and the consumers' reads of the stage are wgmma's, complete once
// wgmma.wait_group returns); a barrier over the cluster.
__device__ __forceinline__ unsigned cluster_rank() {
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
  return r;
}
__device__ __forceinline__ void mbar_arrive_cluster(uint64_t* bar, unsigned rank) {
  asm volatile("{\n.reg .b32 remote;\nmapa.shared::cluster.u32 remote, %0, %1;\nmbarrier.arrive.shared::cluster.b64 _, [remote];\n}\n"
               ::"r"(smem_u32(bar)), "r"(rank) : "memory");
}
__device__ __forceinline__ void cluster_sync() {
  asm volatile("barrier.cluster.arrive.release;\nbarrier.cluster.wait.acquire;\n" ::: "memory");
}
// Named barriers (PTX ISA 9.7.13.1, bar.sync / bar.arrive): `n` threads in all, ids 1.. (0 is __syncthreads).
__device__ __forceinline__ void named_sync(int id, int n) { asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(n) : "memory"); }
__device__ __forceinline__ void named_arrive(int id, int n) { asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(n) : "memory"); }
// setmaxnreg (PTX ISA 9.7.17.1): moves registers between the warpgroups of a block.
template <int R> __device__ __forceinline__ void setmaxnreg_dec() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(R)); }
template <int R> __device__ __forceinline__ void setmaxnreg_inc() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(R)); }
#endif
}  // namespace napkin
