#include "emit/cuda/preamble.hpp"

namespace napkin::cuda {

std::string mma_function(const MmaShape& m) {
  return "mma_m" + std::to_string(m.m) + "n" + std::to_string(m.n) + "k" + std::to_string(m.k) + "_" + std::string(dtype_name(m.dtype));
}

namespace {

const char* kPrimitives = R"(#include <cstdint>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>

namespace napkin {

// fp32 arithmetic on stored elements
__device__ __forceinline__ float to_f(float x) { return x; }
__device__ __forceinline__ float to_f(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float to_f(__half x) { return __half2float(x); }
template <class T> __device__ __forceinline__ T from_f(float x);
template <> __device__ __forceinline__ float from_f<float>(float x) { return x; }
template <> __device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float x) { return __float2bfloat16(x); }
template <> __device__ __forceinline__ __half from_f<__half>(float x) { return __float2half(x); }
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

/** Stores v[0], v[1] at p[0], p[1] as one 4- or 8-byte store; p must be aligned to it. */
template <class T> __device__ __forceinline__ void store2(T* p, const float v[2]) {
  if constexpr (sizeof(T) == 4) {
    *reinterpret_cast<float2*>(p) = make_float2(v[0], v[1]);
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

__device__ __forceinline__ float relu(float x) { return fmaxf(x, 0.0f); }
__device__ __forceinline__ float gelu(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678f)); }
// sigmoid: MUFU ex2 and rcp (CUDA C++ Programming Guide, intrinsic functions: __expf, __fdividef,
// 2 ulp); 1 + exp(-x) overflowing to inf gives 0, as it should.
__device__ __forceinline__ float sigmoid(float x) { return __fdividef(1.0f, 1.0f + __expf(-x)); }
__device__ __forceinline__ float silu(float x) { return x * sigmoid(x); }

// cp.async: 16 bytes global -> SMEM, bypassing L1; bytes past `valid_bytes` are zero-filled
// (PTX ISA 9.7.9.25.3.1). `src` must be 16-byte aligned even when valid_bytes is 0.
__device__ __forceinline__ void cp_async16(void* dst, const void* src, int valid_bytes) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(dst));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(src), "r"(valid_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

/** Copies a ROWS x COLS tile of T (COLS contiguous in global memory, `stride` elements between
 *  rows) into SMEM rows of PITCH elements, zero-filling rows >= n_rows and columns >= n_cols.
 *  `vec`: 16-byte cp.async (the rows are 16-byte aligned); otherwise element by element. */
template <int ROWS, int COLS, int PITCH, int THREADS, class T>
__device__ __forceinline__ void load_tile(T* smem, const T* g, int64_t stride, int n_rows, int n_cols, bool vec) {
  constexpr int V = 16 / sizeof(T);
  constexpr int CHUNKS = ROWS * COLS / V;
  static_assert(COLS % V == 0, "tile columns must be whole 16-byte vectors");
#pragma unroll
  for (int c = threadIdx.x; c < CHUNKS; c += THREADS) {
    const int r = c / (COLS / V), col = (c % (COLS / V)) * V;
    T* dst = smem + r * PITCH + col;
    if (vec) {
      const int valid = r < n_rows ? max(0, min(V, n_cols - col)) : 0;
      cp_async16(dst, valid > 0 ? g + r * stride + col : g, valid * static_cast<int>(sizeof(T)));
    } else {
      for (int e = 0; e < V; ++e) dst[e] = (r < n_rows && col + e < n_cols) ? g[r * stride + col + e] : from_f<T>(0.0f);
    }
  }
}

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

/** Sum and max over the 4 lanes of a quad (the lanes holding one accumulator row). */
__device__ __forceinline__ float quad_max(float x) {
  x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 1));
  return fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 2));
}
__device__ __forceinline__ float quad_sum(float x) {
  x += __shfl_xor_sync(0xffffffffu, x, 1);
  return x + __shfl_xor_sync(0xffffffffu, x, 2);
}
__device__ __forceinline__ float warp_sum(float x) {
  for (int o = 16; o > 0; o /= 2) x += __shfl_xor_sync(0xffffffffu, x, o);
  return x;
}
__device__ __forceinline__ float warp_max(float x) {
  for (int o = 16; o > 0; o /= 2) x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, o));
  return x;
}

}  // namespace napkin

)";


const char* kHopper = R"(// Hopper (sm_90a) primitives, used by the wgmma variants. Device code only where the target has them.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <cstdlib>
// Cluster shape of a kernel (sm_90+); nothing for the device passes of older targets, which never launch it.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#define NAPKIN_CLUSTER_DIMS(x)
#else
#define NAPKIN_CLUSTER_DIMS(x) __cluster_dims__(x, 1, 1)
#endif
namespace napkin {
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
// Thread-block clusters (PTX ISA 9.7.9.25.5.1, 9.7.13.4, 9.7.13.15.11): the same TMA box into the
// same SMEM offset of every block in `mask`, completing bytes on each one's mbarrier there; this
// block's rank; an mbarrier arrival on block `rank`'s copy of `bar` (release at CTA scope, the
// default: a cluster-scope release costs a memory fence per arrival, and the consumers' reads of
// the stage are wgmma's, complete once wgmma.wait_group returns); a barrier over the cluster.
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
// wgmma (PTX ISA 9.7.15): SMEM matrix descriptor (9.7.15.5.1.2.2) of a 128-byte-swizzled tile whose
// swizzle atoms (8 rows of 128 bytes) start 1024-byte aligned. `lbo`, `sbo`: leading and stride
// dimension byte offsets (for K-major tiles lbo is unused and sbo = 1024; for MN-major tiles lbo is
// the distance between 64-element column blocks and sbo = 1024).
__device__ __forceinline__ uint64_t smem_desc(const void* p, unsigned lbo, unsigned sbo) {
  return static_cast<uint64_t>((smem_u32(p) & 0x3FFFF) >> 4) | static_cast<uint64_t>((lbo >> 4) & 0x3FFF) << 16 |
         static_cast<uint64_t>((sbo >> 4) & 0x3FFF) << 32 | uint64_t{1} << 62;
}
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
template <int N> __device__ __forceinline__ void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"); }
/** Keeps the compiler from moving accesses of accumulators across wgmma issue and wait. */
template <int N> __device__ __forceinline__ void fence_regs(float (&r)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i) asm volatile("" : "+f"(r[i])::"memory");
}
// Named barriers (PTX ISA 9.7.13.1, bar.sync / bar.arrive): `n` threads in all, ids 1.. (0 is __syncthreads).
__device__ __forceinline__ void named_sync(int id, int n) { asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(n) : "memory"); }
__device__ __forceinline__ void named_arrive(int id, int n) { asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(n) : "memory"); }
// setmaxnreg (PTX ISA 9.7.17.1): moves registers between the warpgroups of a block.
template <int R> __device__ __forceinline__ void setmaxnreg_dec() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(R)); }
template <int R> __device__ __forceinline__ void setmaxnreg_inc() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(R)); }
#endif

/** True when `kernel` was built for sm_90a (binaryVersion 90), the current device is a Hopper GPU,
 *  the driver has cuTensorMapEncodeTiled, and NAPKIN_NO_WGMMA is unset or 0. Clears the errors it meets. */
static bool hopper_kernel(const void* kernel) {
  if (const char* e = std::getenv("NAPKIN_NO_WGMMA"); e && *e && *e != '0') return false;
  int dev = 0, major = 0;
  cudaFuncAttributes fa{};
  if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, dev) != cudaSuccess ||
      cudaFuncGetAttributes(&fa, kernel) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return major == 9 && fa.binaryVersion == 90;
}
/** Blocks of a persistent kernel that holds one block per SM: min(`blocks` rounded up to whole
 *  clusters, the SMs rounded down to whole clusters of `cluster`). */
[[maybe_unused]] static int64_t persistent_grid(int64_t blocks, int cluster) {
  static const int sms = [] {
    int dev = 0, n = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&n, cudaDevAttrMultiProcessorCount, dev) != cudaSuccess) (void)cudaGetLastError();
    return n > 0 ? n : 1;
  }();
  const int64_t whole = (blocks + cluster - 1) / cluster * cluster;
  return std::max<int64_t>(cluster, std::min<int64_t>(whole, sms / cluster * cluster));
}
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
  if (!encode || reinterpret_cast<uintptr_t>(base) % 16 != 0) return false;
  for (unsigned i = 0; i + 1 < rank; ++i)
    if (strides[i] % 16 != 0) return false;
  const uint32_t ones[5] = {1, 1, 1, 1, 1};
  return encode(map, type, rank, const_cast<void*>(base), dims, strides, box, ones, CU_TENSOR_MAP_INTERLEAVE_NONE,
                CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE) == CUDA_SUCCESS;
}
}  // namespace napkin

)";

}  // namespace

std::string preamble(const std::vector<MmaShape>& mmas, bool hopper) {
  std::string s = kPrimitives;
  if (hopper) s += kHopper;
  s += "namespace napkin {\n";
  for (const auto& m : mmas) {
    if (m.scope != "warp" || m.m != 16 || m.n != 8 || m.k != 16 || m.ptx.find(".f32.") == std::string::npos) continue;
    s += "/** " + m.ptx + " (from the hardware description's [[mma]] table): C += A * B, fp32 C. */\n";
    s += "__device__ __forceinline__ void " + mma_function(m) + "(float c[4], const uint32_t a[4], const uint32_t* b) {\n";
    s += "  asm volatile(\"" + m.ptx + " {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};\\n\"\n";
    s += "               : \"+f\"(c[0]), \"+f\"(c[1]), \"+f\"(c[2]), \"+f\"(c[3])\n";
    s += "               : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"r\"(b[0]), \"r\"(b[1]));\n}\n";
  }
  s += "}  // namespace napkin\n\n";
  return s;
}

}  // namespace napkin::cuda

namespace napkin::cuda {

std::string wgmma_function(const MmaShape& m, int n, bool a_in_registers, std::string& name) {
  std::string ptx = m.ptx;
  const std::string from = "m" + std::to_string(m.m) + "n" + std::to_string(m.n) + "k";
  if (auto at = ptx.find(from); at != std::string::npos) ptx.replace(at, from.size(), "m64n" + std::to_string(n) + "k");
  name = "wgmma_m64n" + std::to_string(n) + "k16_" + std::string(dtype_name(m.dtype)) + (a_in_registers ? "_rs" : "");
  const int regs = n / 2;
  std::string d, outs;
  for (int i = 0; i < regs; ++i) {
    d += (i ? ", %" : "%") + std::to_string(i);
    outs += std::string(i ? ", " : "") + "\"+f\"(d[" + std::to_string(i) + "])";
  }
  const std::string r = std::to_string(regs);
  auto op = [&](int k) { return "%" + std::to_string(regs + k); };
  std::string s;
  if (!a_in_registers) {
    s += "/** " + ptx + " (from the hardware description's [[mma]] table): D += A B, A and B in SMEM. */\n";
    s += "template <int TA, int TB>\n";
    s += "__device__ __forceinline__ void " + name + "(float (&d)[" + r + "], uint64_t desc_a, uint64_t desc_b) {\n";
    s += "  asm volatile(\"{\\n.reg .pred p;\\nsetp.ne.b32 p, " + op(2) + ", 0;\\n\"\n";
    s += "               \"" + ptx + " {" + d + "}, " + op(0) + ", " + op(1) + ", p, 1, 1, " + op(3) + ", " + op(4) + ";\\n}\\n\"\n";
    s += "               : " + outs + "\n";
    s += "               : \"l\"(desc_a), \"l\"(desc_b), \"r\"(1), \"n\"(TA), \"n\"(TB));\n}\n";
    return s;
  }
  s += "/** " + ptx + " (from the hardware description's [[mma]] table): D += A B, A in registers (the m16n8k16\n";
  s += " *  A fragment layout per warp, PTX ISA 9.7.15.5.1.1), B in SMEM. */\n";
  s += "template <int TB>\n";
  s += "__device__ __forceinline__ void " + name + "(float (&d)[" + r + "], const uint32_t (&a)[4], uint64_t desc_b) {\n";
  s += "  asm volatile(\"{\\n.reg .pred p;\\nsetp.ne.b32 p, " + op(5) + ", 0;\\n\"\n";
  s += "               \"" + ptx + " {" + d + "}, {" + op(0) + ", " + op(1) + ", " + op(2) + ", " + op(3) + "}, " + op(4) + ", p, 1, 1, " + op(6) +
       ";\\n}\\n\"\n";
  s += "               : " + outs + "\n";
  s += "               : \"r\"(a[0]), \"r\"(a[1]), \"r\"(a[2]), \"r\"(a[3]), \"l\"(desc_b), \"r\"(1), \"n\"(TB));\n}\n";
  return s;
}

}  // namespace napkin::cuda
