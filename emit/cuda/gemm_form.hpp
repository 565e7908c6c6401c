/** \file gemm_form.hpp
 *  The shape of a kernel the gemm strategy accepts, shared by its two variants: mma.sync
 *  (emit/cuda/gemm.cpp, sm_80 and later) and wgmma fed by TMA (emit/cuda/gemm_wgmma.cpp, sm_90a).
 *  Both render the form lowering read (lower/gemm_form.hpp: GemmForm) with the stages it chose.
 */
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "emit/cuda/strategies.hpp"
#include "lower/gemm_form.hpp"

namespace napkin::cuda {

/** Emits the grid decode shared by both variants: `o_<M>`, `o_<N>` (tile origins, L2-rasterised in
 *  groups of 8 M tiles), the batch indices `i_<b>`, `n_M`, `n_N` (valid rows and columns; <= 0 for
 *  a block of a cluster past the last tile). With `cluster` > 1, consecutive blocks (one cluster)
 *  take consecutive tiles along `cluster_axis` (M or N) and the same tile along the other: the
 *  grid then has that axis's tile count rounded up to whole clusters. `block`: the linear block
 *  index to decode (a persistent kernel's virtual block). */
void gemm_tile_origin(Code& code, const GemmForm& g, int cluster = 1, const std::string& cluster_axis = "", const std::string& block = "blockIdx.x");

/** Emits the epilogue: `loops(body)` opens the variant's loops over its accumulator fragments
 *  (defining `row` and `col`, tile-relative, col even), calls `body` and closes them. For each
 *  pair of elements (row, col + q), q = 0, 1, every output of the kernel is computed from `acc(i)`
 *  (the accumulator element of contraction i, an expression that may use `q`) and stored. Twice:
 *  for interior tiles whose outputs take paired stores (the output's innermost axis is N, N even,
 *  the array aligned), one unpredicated 4- or 8-byte store per pair; else predicated against n_M
 *  and n_N, paired where adjacent and aligned. Adds the outputs to `stored`. */
void gemm_epilogue(Code& code, Context& c, const KernelChoice& kc, const GemmForm& g, const std::function<void(const std::function<void()>&)>& loops,
                   const std::function<std::string(std::size_t)>& acc, std::set<std::string>& stored);

/** The sm_90a variant: device code (namespace `wg` inside the kernel's namespace) and the host
 *  statements that launch it when the device and the arrays allow TMA, falling back to
 *  `fallback_launch` otherwise. Only for a spec whose wgmma path lowering accepted. */
KernelEmit emit_gemm_wgmma(Context& c, const KernelChoice& kc, const GemmForm& g, const std::string& fallback_launch);

}  // namespace napkin::cuda
