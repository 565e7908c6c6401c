/** \file gemm_form.hpp
 *  The shape of a kernel the gemm strategy accepts, shared by its two variants: mma.sync
 *  (emit/cuda/gemm.cpp, sm_80 and later) and wgmma fed by TMA (emit/cuda/gemm_wgmma.cpp, sm_90a).
 *  Both render the form lowering read (lower/gemm_form.hpp: GemmForm) with the stages it chose,
 *  through the shared steps of render.hpp (grid decode: gemm_tile_origin; epilogue: gemm_epilogue).
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

/** The sm_90a variant: device code (namespace `wg` inside the kernel's namespace) and the host
 *  statements that launch it when the device and the arrays allow TMA, falling back to
 *  `fallback_launch` otherwise. Only for a spec whose wgmma path lowering accepted. */
KernelEmit emit_gemm_wgmma(Context& c, const KernelChoice& kc, const GemmForm& g, const std::string& fallback_launch);

}  // namespace napkin::cuda
