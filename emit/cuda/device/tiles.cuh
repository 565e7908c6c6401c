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

/** Copies a dense [rows][cols] array of T into rows `pitch` elements apart (pitch >= cols, a
 *  multiple of 16 bytes; `dst` 16-byte aligned), for TMA where the array's own row stride is not a
 *  multiple of 16 bytes (lower/gemm_form.hpp repack_pitch). Each thread copies a run of 16 bytes
 *  of a row: element loads (the source rows have any alignment), one 16-byte store; the rows are
 *  strided over the grid's y. The pad is not written: TMA reads the copy with its logical extents
 *  and fills past them with zeros. */
template <class T> __global__ void pitch_copy_kernel(T* dst, const T* src, int64_t rows, int64_t cols, int64_t pitch) {
  constexpr int V = 16 / static_cast<int>(sizeof(T));
  const int64_t runs = (cols + V - 1) / V;
  for (int64_t r = blockIdx.y; r < rows; r += gridDim.y)
    for (int64_t j = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; j < runs; j += int64_t{gridDim.x} * blockDim.x) {
      const T* s = src + r * cols + j * V;
      T* d = dst + r * pitch + j * V;
      if ((j + 1) * V <= cols) {
        union { uint4 u; T e[V]; } v;
#pragma unroll
        for (int e = 0; e < V; ++e) v.e[e] = s[e];
        *reinterpret_cast<uint4*>(d) = v.u;
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
