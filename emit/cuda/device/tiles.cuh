/** \file tiles.cuh
 *  Level-typed tiles: a tile of a global array (GlobalTile: origin, row stride, the extents still
 *  inside the array), a tile in SMEM with a row pitch (SmemTile) or in the 128-byte swizzle of TMA
 *  and wgmma (Swizzled128Tile), and the register fragment of an m16n8 accumulator (acc_row,
 *  acc_col). load_tile / SmemTile::load copy global -> SMEM with zero fill past the array's ends.
 */
#pragma once
#include <cstdint>

#include "emit/cuda/device/movers.cuh"
#include "emit/cuda/device/numeric.cuh"

namespace napkin {

/** Copies a ROWS x COLS tile of T (COLS contiguous in global memory, `stride` elements between
 *  rows) into SMEM rows of PITCH elements, zero-filling rows >= n_rows and columns >= n_cols.
 *  `width`: bytes per cp.async, 16, 8 or 4 (copy_width of the origin and the row stride in bytes:
 *  every access aligned to it); any other value copies element by element, synchronously. */
template <int ROWS, int COLS, int PITCH, int THREADS, class T>
__device__ __forceinline__ void load_tile(T* smem, const T* g, int64_t stride, int n_rows, int n_cols, int width) {
  constexpr int V = 16 / sizeof(T);
  constexpr int CHUNKS = ROWS * COLS / V;
  static_assert(COLS % V == 0, "tile columns must be whole 16-byte vectors");
#pragma unroll
  for (int c = threadIdx.x; c < CHUNKS; c += THREADS) {
    const int r = c / (COLS / V), col = (c % (COLS / V)) * V;
    T* dst = smem + r * PITCH + col;
    if (width == 16) {
      const int valid = r < n_rows ? max(0, min(V, n_cols - col)) : 0;
      cp_async16(dst, valid > 0 ? g + r * stride + col : g, valid * static_cast<int>(sizeof(T)));
    } else if (width == 8 || width == 4) {
      const int E = width / static_cast<int>(sizeof(T));  // elements per copy (the width is at least one element: copy_width)
      for (int p = 0; p < V; p += E) {
        const int valid = r < n_rows ? max(0, min(E, n_cols - col - p)) : 0;
        const T* src = valid > 0 ? g + r * stride + col + p : g;
        if (width == 8) cp_async_narrow<8>(dst + p, src, valid * static_cast<int>(sizeof(T)));
        else cp_async_narrow<4>(dst + p, src, valid * static_cast<int>(sizeof(T)));
      }
    } else {
      for (int e = 0; e < V; ++e) dst[e] = (r < n_rows && col + e < n_cols) ? g[r * stride + col + e] : from_f<T>(0.0f);
    }
  }
}

/** 16 bytes starting `off` (0..15) bytes into the 32 held by `lo` and `hi` (consecutive aligned
 *  16-byte words, lowest byte first): selects by 8 and 4 bytes, then a funnel shift by off % 4 bytes. */
__device__ __forceinline__ uint4 bytes_at(const uint4& lo, const uint4& hi, unsigned off) {
  const uint32_t w[8] = {lo.x, lo.y, lo.z, lo.w, hi.x, hi.y, hi.z, hi.w};
  uint32_t a[6], b[5];
#pragma unroll
  for (int i = 0; i < 6; ++i) a[i] = (off & 8) ? w[i + 2] : w[i];  // words from off / 8 * 2
#pragma unroll
  for (int i = 0; i < 5; ++i) b[i] = (off & 4) ? a[i + 1] : a[i];  // and one more where off % 8 >= 4
  const unsigned sh = (off & 3) * 8;
  return make_uint4(__funnelshift_r(b[0], b[1], sh), __funnelshift_r(b[1], b[2], sh), __funnelshift_r(b[2], b[3], sh), __funnelshift_r(b[3], b[4], sh));
}

/** Copies a dense [rows][cols] array of T into rows `pitch` elements apart (pitch >= cols, a
 *  multiple of 16 bytes; `dst` 16-byte aligned), for TMA where the array's own row stride is not a
 *  multiple of 16 bytes (lower/gemm_form.hpp repack_pitch). Each thread copies a run of 16 bytes
 *  of a row with one 16-byte store. Its loads: one aligned 16-byte load where the run is aligned,
 *  else the two aligned 16-byte words around it, shifted into place (bytes_at), so that a warp
 *  touches each 128-byte line of its rows about once; element loads only where those words would
 *  reach outside the array (its first and last bytes) and for a row's ragged last run. (Element
 *  loads throughout took fp8 attention's 33 MB copy 34 us: one L1 wavefront per line per byte
 *  loaded; session 41.) The rows are strided over the grid's y. The pad is not written: TMA reads
 *  the copy with its logical extents and fills past them with zeros. */
template <class T> __global__ void pitch_copy_kernel(T* dst, const T* src, int64_t rows, int64_t cols, int64_t pitch) {
  constexpr int V = 16 / static_cast<int>(sizeof(T));
  const int64_t runs = (cols + V - 1) / V;
  const uintptr_t begin = reinterpret_cast<uintptr_t>(src), end = reinterpret_cast<uintptr_t>(src + rows * cols);
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y)
    for (int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; j < runs; j += int64_t{gridDim.x} * blockDim.x) {
      const T* s = src + r * cols + j * V;
      T* d = dst + r * pitch + j * V;
      if ((j + 1) * V <= cols) {
        const uintptr_t at = reinterpret_cast<uintptr_t>(s);
        const unsigned off = static_cast<unsigned>(at % 16);
        const uintptr_t base = at - off;
        if (off == 0) {
          *reinterpret_cast<uint4*>(d) = __ldg(reinterpret_cast<const uint4*>(s));
        } else if (base >= begin && base + 32 <= end) {
          const uint4* w = reinterpret_cast<const uint4*>(base);
          *reinterpret_cast<uint4*>(d) = bytes_at(__ldg(w), __ldg(w + 1), off);
        } else {
          union { uint4 u; T e[V]; } v;
#pragma unroll
          for (int e = 0; e < V; ++e) v.e[e] = s[e];
          *reinterpret_cast<uint4*>(d) = v.u;
        }
      } else {
        for (int64_t e = 0; e < cols - j * V; ++e) d[e] = s[e];
      }
    }
}
/** Host side: launches pitch_copy_kernel on `stream` (blocks of 256 runs of a row, at most 2048
 *  rows of blocks); returns the launch's error. */
template <class T> static cudaError_t pitch_copy(T* dst, const T* src, int64_t rows, int64_t cols, int64_t pitch, cudaStream_t stream) {
  if (rows <= 0 || cols <= 0) return cudaSuccess;
  const int64_t runs = (cols + 16 / static_cast<int64_t>(sizeof(T)) - 1) / (16 / static_cast<int64_t>(sizeof(T)));
  const dim3 grid(static_cast<unsigned>((runs + 255) / 256), static_cast<unsigned>(rows < 2048 ? rows : 2048));
  pitch_copy_kernel<T><<<grid, 256, 0, stream>>>(dst, src, rows, cols, pitch);
  return cudaGetLastError();
}

/** A tile of a global row-major array seen from its origin `p`: `stride` elements between rows;
 *  `rows` x `cols` of it lie inside the array (fewer than the tile's at the array's ragged ends). */
template <class T> struct GlobalTile {
  const T* p;
  int64_t stride;
  int rows, cols;
};

/** A ROWS x COLS tile of T in SMEM, rows PITCH >= COLS elements apart (a pitch past COLS staggers
 *  the rows across banks for ldmatrix, mma.cuh). */
template <class T, int ROWS, int COLS, int PITCH> struct SmemTile {
  static_assert(PITCH >= COLS, "a row's pitch holds the row");
  T* p;
  __device__ __forceinline__ T& at(int r, int c) const { return p[r * PITCH + c]; }
  /** load_tile of `g` by THREADS threads (all of them call it); cp.async of `width` bytes (16, 8
   *  or 4; else element by element), then the caller commits and waits (movers.cuh). */
  template <int THREADS> __device__ __forceinline__ void load(const GlobalTile<T>& g, int width) const {
    load_tile<ROWS, COLS, PITCH, THREADS>(p, g.p, g.stride, g.rows, g.cols, width);
  }
};

/** A ROWS x (128 bytes) tile in the 128-byte swizzle of TMA (CU_TENSOR_MAP_SWIZZLE_128B) and of
 *  wgmma's SMEM descriptors (PTX ISA 9.7.15.5.1.2): rows of 128 bytes, 16-byte chunk j of row r
 *  stored at chunk j ^ (r % 8); `p` 1024-byte aligned (whole swizzle atoms of 8 rows). */
template <class T, int ROWS> struct Swizzled128Tile {
  static constexpr int COLS = 128 / static_cast<int>(sizeof(T));
  T* p;
  /** Element offset of (r, c) from `p`. */
  __host__ __device__ static constexpr int offset(int r, int c) {
    return (r * 128 + (((c * static_cast<int>(sizeof(T))) / 16) ^ (r % 8)) * 16 + (c * static_cast<int>(sizeof(T))) % 16) /
           static_cast<int>(sizeof(T));
  }
  __device__ __forceinline__ T& at(int r, int c) const { return p[offset(r, c)]; }
};

/** Register fragment of an m16n8 fp32 accumulator (mma.sync m16n8k16, PTX ISA 9.7.14.5.14; also a
 *  warp's 16 rows of each n8 column block of wgmma's m64nN, 9.7.15.5.1.1): register i (0..3) of
 *  `lane` holds row acc_row(lane, i) and column acc_col(lane, i) of the 16 x 8 tile. */
__host__ __device__ __forceinline__ constexpr int acc_row(int lane, int i) { return lane / 4 + 8 * (i / 2); }
__host__ __device__ __forceinline__ constexpr int acc_col(int lane, int i) { return 2 * (lane % 4) + i % 2; }

}  // namespace napkin
