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

__device__ __forceinline__ float relu(float x) { return fmaxf(x, 0.0f); }
__device__ __forceinline__ float gelu(float x) { return 0.5f * x * (1.0f + erff(x * 0.70710678f)); }
__device__ __forceinline__ float sigmoid(float x) { return 1.0f / (1.0f + __expf(-x)); }
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

}  // namespace

std::string preamble(const std::vector<MmaShape>& mmas) {
  std::string s = kPrimitives;
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
