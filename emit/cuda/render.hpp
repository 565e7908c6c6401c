/** \file render.hpp
 *  The steps the CUDA renderers of a kernel spec (emit/cuda/gemm.cpp, gemm_wgmma.cpp, flash.cpp,
 *  flash_wgmma.cpp, rows.cpp) share, one file per concern, each written once for every strategy
 *  and variant that needs it:
 *  - render_grid.cpp: the grid decode (block index -> tile origins, batch indices, valid extents)
 *    and the chunks of the streamed axis a block walks.
 *  Every step appends device code to a Code at its current indentation, in the conventions of
 *  context.hpp (`i_<axis>`, `N_<axis>`, `a.<array>`); none declines what lowering accepted.
 */
#pragma once
#include <string>

#include "emit/cuda/strategies.hpp"
#include "lower/flash_form.hpp"
#include "lower/gemm_form.hpp"

namespace napkin::cuda {

// ---- grid decode (render_grid.cpp) ----

/** Emits the gemm grid decode shared by both variants: `o_<M>`, `o_<N>` (tile origins,
 *  L2-rasterised in groups of 8 M tiles), the batch indices `i_<b>`, `n_M`, `n_N` (valid rows and
 *  columns; <= 0 for a block of a cluster past the last tile). With `cluster` > 1, consecutive
 *  blocks (one cluster) take consecutive tiles along `cluster_axis` (M or N) and the same tile
 *  along the other: the grid then has that axis's tile count rounded up to whole clusters.
 *  `block`: the linear block index to decode (a persistent kernel's virtual block). Needs the
 *  constants T_M, T_N (and CLUSTER) in scope. */
void gemm_tile_origin(Code& code, const GemmForm& g, int cluster = 1, const std::string& cluster_axis = "", const std::string& block = "blockIdx.x");

/** Emits the flash grid decode from blockIdx.x: `tiles_q`, `o_<M>` (the q tile's origin, q tiles
 *  fastest, so that consecutive blocks share K and V in L2; with `longest_first` in reverse
 *  order, so that a causal kernel's tiles with the most chunks start first and the short ones
 *  fill the last wave), the batch indices `i_<b>` and `n_q` (the tile's valid rows, >= 1).
 *  Needs T_Q in scope. */
void flash_tile_origin(Code& k, const FlashForm& f, bool longest_first);

/** Emits `chunks`, the chunks of x (T_X keys each) a flash block walks: all of them, or with the
 *  causal skip (f.skip) those up to the chunk of the tile's last row (later ones are fully
 *  masked). Needs o_<M>, n_q and T_X in scope. */
void flash_chunks(Code& k, const FlashForm& f);

}  // namespace napkin::cuda
