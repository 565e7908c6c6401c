/** \file flash_bwd_parts.hpp
 *  The steps the two paths of the flash_bwd renderer share (lower/flash_bwd_form.hpp): mma.sync
 *  on cp.async (flash_bwd.cpp) and wgmma on TMA (flash_bwd_wgmma.cpp, sm_90a). Both hold a tile
 *  statement in one per-thread layout: `warp` numbers the block's MMA warps (WARPS of them: the
 *  consumer warps on wgmma), each owning T_X / WARPS rows of X in MT m16 tiles, and T_Q / 8 n8
 *  tiles of Q columns, 4 elements each (PTX ISA 9.7.14.5.8, m16n8 accumulator fragments). A
 *  wgmma m64nN accumulator (PTX ISA 9.7.15.5.1.1) is the same layout for its warpgroup's four
 *  warps with MT = 1, so the element-wise maps, the broadcasts, the stores of tiles and the
 *  outputs' epilogue are written once, here, and each path adds its staging and its MMAs.
 *  Every step appends device code at the current indentation of `k`, in the conventions of
 *  context.hpp (`i_<axis>`, `N_<axis>`, `a.<array>`); in the stream loop `q0`, `n_q`, `n_x`,
 *  `interior` and the outer stream axes' i_<axis> are in scope.
 */
#pragma once
#include <functional>
#include <string>
#include <vector>

#include "emit/cuda/render.hpp"

namespace napkin::cuda::bwd {

/** One flash_bwd kernel being rendered: its spec's form and the MMA atom of the path. */
struct BwdKernel {
  Context& c;
  const KernelChoice& kc;
  const FlashBwdForm& f;
  const MmaShape& mma;
  Code& k;
};

/** Decimal text of v. */
std::string n(std::int64_t v);

/** Grid decode (tiles of X fastest: consecutive blocks share the streamed chunks in L2; then the
 *  batch axes as i_<axis>), n_x (rows of X in the tile), the chunk range [kc_begin, kc_end)
 *  of Q this tile computes (the whole stream, or the causal skip's part of it), `span` its
 *  length and `steps` the stream steps (span times the outer streams' extents). */
void grid_and_chunks(const BwdKernel& b);

/** The number of outer stream steps (FlashBwdForm::outer): "1 * N_<axis>..." (device text). */
std::string outer_count(const FlashBwdForm& f);

/** Inside a loop over stream steps `it` (0 .. steps - 1, the outer streams' indices slowest):
 *  `kc`, the step's chunk of Q, and i_<axis> of each outer stream axis. */
void step_indices(const BwdKernel& b, const std::string& it);

/** Inside the stream loop, after step_indices: q0 (the chunk's first index of Q), n_q (its
 *  columns in range), `interior` (no bounds to check) and dqx = q0 - o_X clamped to 32 bits, the
 *  offset the tile maps' masks over (X, Q) compare with (tile_map). */
void chunk_bounds(const BwdKernel& b);

/** Zeros into the stored tiles over the skipped chunks (their values there are exactly 0:
 *  flash_bwd_causal_skip), at every index of the outer streams: each warp takes rows of one
 *  axis, its lanes the other. Nothing when the form skips no chunk. */
void zero_skipped(const BwdKernel& b);

/** The outputs' fp32 accumulators acc_<out>[MT][E / 8][4], zeroed. */
void accumulators(const BwdKernel& b);

/** `const bool vec_<A>` for each staged tile: whether its rows can be stored as 16-byte vectors. */
void store_flags(const BwdKernel& b);

/** The loops over the thread's elements of a tile (mt, nt, e): `r` and `cq`, the element's row
 *  of X and column of Q inside the tile (32-bit), and i_<X>, i_<Q> set, running `body`. */
void tile_elements(const BwdKernel& b, const std::function<void()>& body);

/** The row vectors' loads (FlashBwdForm::row_vectors, once per block): row_<A>[MT][2], the two
 *  rows of each m16 tile a thread holds. */
void load_rows(const BwdKernel& b);
/** The column vectors' loads from global memory (FlashBwdForm::col_vectors, per chunk):
 *  col_<A>[T_Q / 8][2], the thread's columns of the chunk. */
void load_cols(const BwdKernel& b);

/** Tile statement `t`'s element-wise map, in place on t_<name>[MT][T_Q / 8][4] (its contraction's
 *  accumulator where it has one): interior chunks without bounds, boundary chunks with elements
 *  past N_X or N_Q set to 0. exp is one ex2 of the scaled argument, as in the forward.
 *  `masked` false (map_reads_registers_only must hold): one path for every element, in range or
 *  not, no interior and boundary branches (the two paths cost the wgmma kernel 300 bytes of
 *  spills, ptxas sm_90a, session 20); elements past N_X or N_Q then hold values of no meaning,
 *  which whoever sums the tile over Q masks first (mask_columns_past_n_q). */
void tile_map(const BwdKernel& b, const BwdTile& t, bool masked = true);

/** Whether tile `t`'s map reads only registers and SMEM: its contraction's accumulator, other
 *  tiles and the row and column vectors (loaded in range, zero outside), no array at the
 *  element's indices. Such a map is
 *  safe to run on every element of a boundary chunk unmasked (tile_map). */
bool map_reads_registers_only(const BwdKernel& b, const BwdTile& t);

/** Tile `t`'s elements in columns past N_Q set to 0 (before its values are
 *  summed over Q into an output: rows past N_X only reach output rows that are not stored). */
void mask_columns_past_n_q(const BwdKernel& b, const BwdTile& t);

/** The threads that stage and copy out a stored tile together: `thread` their index (0 ..
 *  count - 1) and `count`, the rows of X they hold [x_lo, x_lo + x_rows) (expressions), the
 *  statement synchronising them around the staging tile, and whether to synchronise `before`
 *  writing it too (where no other barrier follows the previous chunk's copy-out). */
struct StoreGroup {
  std::string thread, count, x_lo, x_rows, barrier;
  bool before = false;
};

/** Stored tile `t`: staged (into SMEM, transposed where X is the array's innermost axis, then
 *  16-byte rows of that axis per thread, each group its rows of X) or, where it cannot be,
 *  element by element. */
void store_tile(const BwdKernel& b, const BwdTile& t, const StoreGroup& g);

/** Each output from its accumulator through its element-wise map, rows past N_X skipped. */
void epilogue(const BwdKernel& b);

/** The sm_90a variant of the kernel (flash_bwd_wgmma.cpp): device code in namespace `wg` inside
 *  the kernel's, and the launch through TMA tensor maps of the operands, `fallback` (the mma.sync
 *  launch) where it cannot run. The spec's wgmma path must be set (lower.cpp lower_flash_bwd). */
KernelEmit flash_bwd_wgmma_variant(Context& c, const KernelChoice& kc, const std::string& fallback);

}  // namespace napkin::cuda::bwd
