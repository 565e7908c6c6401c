/** \file flash_form.hpp
 *  The shape of an attention kernel the flash strategy accepts (S = f(contract(Q, K; dk)),
 *  P = softmax(g(S); x), O = h(contract(P, V; x)), x streamed), shared by its mma.sync variant
 *  (emit/cuda/flash.cpp) and its wgmma variant (emit/cuda/flash_wgmma.cpp, sm_90a).
 */
#pragma once
#include <optional>
#include <string>

#include "emit/cuda/strategies.hpp"

namespace napkin::cuda {

struct FlashForm {
  std::string x, M, dk, dv;            ///< key axis (streamed), query axis (grouped), head dimensions
  std::string Qn, Kn, Vn;              ///< operand arrays: Q[.., M, dk], K[.., x, dk], V[.., x, dv]
  const Statement *S = nullptr, *P = nullptr, *O = nullptr;
  const Expr *cs = nullptr, *co = nullptr;  ///< the two contraction nodes (in S and in O)
  AxisList batch;                      ///< O's axes other than M and dv (grid slices)
  DType dtype = DType::bf16;
  std::int64_t TQ = 0, TX = 0, DK = 0, DV = 0;  ///< q tile, x chunk, head dimensions (elements)
  int warps = 0;                       ///< the schedule's warps per thread block
  bool skip = false;                   ///< causal: chunks past the tile's last row are skipped
  std::string x_note;                  ///< how the schedule treats x
};

/** The sm_90a variant (contract in flash_wgmma.cpp): device code in namespace `wg` of the
 *  kernel's namespace, and host statements launching it where the device and the arrays allow
 *  TMA, `fallback_launch` otherwise. nullopt with `why` set when the tiles do not fit. */
std::optional<KernelEmit> emit_flash_wgmma(Context& c, const KernelChoice& kc, const FlashForm& f, const Hardware& hw,
                                           const std::string& fallback_launch, std::string& why);

}  // namespace napkin::cuda
