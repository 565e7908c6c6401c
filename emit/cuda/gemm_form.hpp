/** \file gemm_form.hpp
 *  The shape of a kernel the gemm strategy accepts, shared by its two variants: mma.sync
 *  (emit/cuda/gemm.cpp, sm_80 and later) and wgmma fed by TMA (emit/cuda/gemm_wgmma.cpp, sm_90a).
 *  Both render the form lowering read (lower/gemm_form.hpp: GemmForm) with the stages it chose,
 *  through the shared steps of render.hpp (grid decode: gemm_tile_origin).
 */
#pragma once
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "emit/cuda/render.hpp"
#include "emit/cuda/strategies.hpp"
#include "lower/gemm_form.hpp"

namespace napkin::cuda {

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
