/** \file tma.cuh
 *  Hopper (sm_90a) bulk tensor copies (TMA): boxes of a tensor map into SMEM, completing bytes on
 *  an mbarrier (sync.cuh), out-of-bounds elements zero-filled; the multicast form for clusters;
 *  boxes of SMEM back to global memory (stores, in bulk groups); and the host's tensor-map builder (128-byte swizzle, the layout of Swizzled128Tile, tiles.cuh).
 */
#pragma once
#include <cuda.h>
#include <cudaTypedefs.h>

#include <cstring>

#include "emit/cuda/device/sync.cuh"

namespace napkin {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
// TMA (PTX ISA 9.7.9.25.5.1, cp.async.bulk.tensor): one box of the tensor map at coordinates
// (innermost first) into SMEM, completing `bytes` on the mbarrier; out-of-bounds elements are zeros.
__device__ __forceinline__ void tma_load(void* dst, const CUtensorMap* map, uint64_t* bar, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
               ::"r"(smem_u32(dst)), "l"(map), "r"(c0), "r"(c1), "r"(smem_u32(bar)) : "memory");
}
__device__ __forceinline__ void tma_load(void* dst, const CUtensorMap* map, uint64_t* bar, int c0, int c1, int c2) {
  asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n"
               ::"r"(smem_u32(dst)), "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(smem_u32(bar)) : "memory");
}
__device__ __forceinline__ void tma_load(void* dst, const CUtensorMap* map, uint64_t* bar, int c0, int c1, int c2, int c3) {
  asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], [%6];\n"
               ::"r"(smem_u32(dst)), "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_u32(bar)) : "memory");
}
__device__ __forceinline__ void tma_load(void* dst, const CUtensorMap* map, uint64_t* bar, int c0, int c1, int c2, int c3, int c4) {
  asm volatile("cp.async.bulk.tensor.5d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5, %6}], [%7];\n"
               ::"r"(smem_u32(dst)), "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4), "r"(smem_u32(bar)) : "memory");
}
// Thread-block clusters (PTX ISA 9.7.9.25.5.1): the same TMA box into the same SMEM offset of
// every block in `mask`, completing bytes on each one's mbarrier there.
__device__ __forceinline__ void tma_load_multicast(void* dst, const CUtensorMap* map, uint64_t* bar, uint16_t mask, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;\n"
               ::"r"(smem_u32(dst)), "l"(map), "r"(c0), "r"(c1), "r"(smem_u32(bar)), "h"(mask) : "memory");
}
__device__ __forceinline__ void tma_load_multicast(void* dst, const CUtensorMap* map, uint64_t* bar, uint16_t mask, int c0, int c1, int c2) {
  asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%2, %3, %4}], [%5], %6;\n"
               ::"r"(smem_u32(dst)), "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(smem_u32(bar)), "h"(mask) : "memory");
}
__device__ __forceinline__ void tma_load_multicast(void* dst, const CUtensorMap* map, uint64_t* bar, uint16_t mask, int c0, int c1, int c2, int c3) {
  asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%2, %3, %4, %5}], [%6], %7;\n"
               ::"r"(smem_u32(dst)), "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(smem_u32(bar)), "h"(mask) : "memory");
}
__device__ __forceinline__ void tma_load_multicast(void* dst, const CUtensorMap* map, uint64_t* bar, uint16_t mask, int c0, int c1, int c2, int c3, int c4) {
  asm volatile("cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%2, %3, %4, %5, %6}], [%7], %8;\n"
               ::"r"(smem_u32(dst)), "l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4), "r"(smem_u32(bar)), "h"(mask) : "memory");
}
// TMA stores (PTX ISA 9.7.9.25.5.2, cp.async.bulk.tensor .global.shared::cta .bulk_group): one box
// of SMEM (the tensor map's layout, 128-byte swizzle) to the tensor's coordinates, innermost first;
// elements outside the tensor are not written. Completion is tracked per issuing thread in bulk
// groups: commit, then wait until at most N groups still read SMEM (`.read`) or still write.
__device__ __forceinline__ void tma_store(const CUtensorMap* map, const void* src, int c0, int c1) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n" ::"l"(map), "r"(c0), "r"(c1), "r"(smem_u32(src)) : "memory");
}
__device__ __forceinline__ void tma_store(const CUtensorMap* map, const void* src, int c0, int c1, int c2) {
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%1, %2, %3}], [%4];\n" ::"l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(smem_u32(src))
               : "memory");
}
__device__ __forceinline__ void tma_store(const CUtensorMap* map, const void* src, int c0, int c1, int c2, int c3) {
  asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%1, %2, %3, %4}], [%5];\n" ::"l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3),
               "r"(smem_u32(src)) : "memory");
}
__device__ __forceinline__ void tma_store(const CUtensorMap* map, const void* src, int c0, int c1, int c2, int c3, int c4) {
  asm volatile("cp.async.bulk.tensor.5d.global.shared::cta.bulk_group [%0, {%1, %2, %3, %4, %5}], [%6];\n" ::"l"(map), "r"(c0), "r"(c1), "r"(c2), "r"(c3),
               "r"(c4), "r"(smem_u32(src)) : "memory");
}
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void bulk_wait_read() { asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(N) : "memory"); }
template <int N> __device__ __forceinline__ void bulk_wait() { asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(N) : "memory"); }
#endif

/** Tensor map (CUDA driver API, cuTensorMapEncodeTiled) of a 16-bit array seen as `rank` axes,
 *  innermost first: dims (elements), strides of axes 1.. (bytes), box (elements; box[0] * 2 bytes
 *  = 128 for the 128-byte swizzle wgmma reads). False when TMA cannot address it: the base or a
 *  stride not 16-byte aligned, or no driver entry point. */
static bool make_tmap(CUtensorMap* map, const void* base, unsigned rank, const uint64_t* dims, const uint64_t* strides,
                      const uint32_t* box, CUtensorMapDataType type) {
  static PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* f = nullptr;
    cudaDriverEntryPointQueryResult q{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &f, 12000, cudaEnableDefault, &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
      f = nullptr, (void)cudaGetLastError();
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(f);
  }();
  if (!encode || reinterpret_cast<uintptr_t>(base) % 16 != 0 || rank < 1 || rank > 5) return false;
  for (unsigned i = 0; i + 1 < rank; ++i)
    if (strides[i] % 16 != 0) return false;
  // A map depends only on these arguments: the last ones encoded on this thread are kept (an
  // operator called every training step meets the same addresses and shapes from PyTorch's caching
  // allocator), so a repeated launch copies its maps instead of encoding them again.
  struct Key {
    const void* base;
    unsigned rank;
    CUtensorMapDataType type;
    uint64_t dims[5], strides[4];
    uint32_t box[5];
  };
  struct Entry {
    Key key;
    CUtensorMap map;
  };
  Key key;
  std::memset(&key, 0, sizeof key);  // padding included: the keys are compared bytewise
  key.base = base, key.rank = rank, key.type = type;
  for (unsigned i = 0; i < rank; ++i) key.dims[i] = dims[i], key.box[i] = box[i];
  for (unsigned i = 0; i + 1 < rank; ++i) key.strides[i] = strides[i];
  constexpr unsigned kSlots = 32;
  thread_local Entry cache[kSlots];
  thread_local bool used[kSlots] = {};
  uint64_t h = reinterpret_cast<uintptr_t>(base) >> 4;
  for (unsigned i = 0; i < rank; ++i) h = h * 1000003u ^ dims[i] ^ (uint64_t{box[i]} << 40);
  const unsigned slot = static_cast<unsigned>(h % kSlots);
  if (used[slot] && std::memcmp(&cache[slot].key, &key, sizeof key) == 0) {
    *map = cache[slot].map;
    return true;
  }
  const uint32_t ones[5] = {1, 1, 1, 1, 1};
  if (encode(map, type, rank, const_cast<void*>(base), dims, strides, box, ones, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
             CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) != CUDA_SUCCESS)
    return false;
  cache[slot] = {key, *map}, used[slot] = true;
  return true;
}
}  // namespace napkin
