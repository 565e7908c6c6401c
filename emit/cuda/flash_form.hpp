/** \file flash_form.hpp
 *  The shape of an attention kernel the flash strategy accepts (lower/flash_form.hpp: a
 *  contraction, element-wise score maps, softmax along x or no normaliser, a contraction over x,
 *  x streamed), shared by its mma.sync variant
 *  (emit/cuda/flash.cpp) and its wgmma variant (emit/cuda/flash_wgmma.cpp, sm_90a); the lemma,
 *  score chain, grid decode, staging and epilogue they share are in render.hpp.
 */
#pragma once
#include <optional>
#include <string>

#include "emit/cuda/render.hpp"
#include "emit/cuda/strategies.hpp"
#include "lower/flash_form.hpp"

namespace napkin::cuda {

/** The sm_90a variant (contract in flash_wgmma.cpp): device code in namespace `wg` of the
 *  kernel's namespace, and host statements launching it where the device and the arrays allow
 *  TMA, `fallback_launch` otherwise. Only for a spec whose wgmma path lowering accepted. */
KernelEmit emit_flash_wgmma(Context& c, const KernelChoice& kc, const FlashForm& f, const std::string& fallback_launch);

}  // namespace napkin::cuda
