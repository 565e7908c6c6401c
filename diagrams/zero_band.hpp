/** \file zero_band.hpp
 *  Where an array of a diagram is exactly 0: outside a band of two of its axes. A kernel that
 *  reads such an array in a contraction may leave out the chunks of the contracted axis that lie
 *  wholly outside the band (lower/gemm_form.hpp, GemmForm::k_band), as the causal skip of the
 *  flash kernels leaves out the tiles past the diagonal (paper §4, masked FlashAttention).
 *
 *  The rules (each exact in floating point for finite operands, the convention of the causal
 *  skips, kernel_shape.cpp and flash_bwd_form.cpp):
 *  - causal(a, b[; window=W]) and band(a, b; lo=L, hi=H) as values are 0 outside their band
 *    (diagrams/ir.hpp, MaskBand);
 *  - exp(mask(E, M) - R), M such a mask and R free of masks, is exp(-inf - R) = 0 outside M's band;
 *  - a product is 0 where either factor is (0 times a finite value): the intersection where both
 *    factors have bands on the same two axes, else the first factor's band;
 *  - neg(X) and cast(X) where X is (not a quotient: 0 / 0 is NaN);
 *  - a reference to an array computed by a statement of the diagram where that statement is, and
 *    to an input where its declaration says (InputDecl::zero_band: a kernel view's input computed
 *    by the whole diagram).
 *  Anything else (sums, other maps, inputs of a parsed diagram) has no band. */
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "diagrams/ir.hpp"

namespace napkin {

/** The band outside which array `array` of `d` is exactly 0 (rules above); nullopt where no rule
 *  applies. `d` must be verified (acyclic, integer mask options). */
std::optional<ZeroBand> zero_band(const Diagram& d, const std::string& array);

/** Whether `e` applies a mask anywhere (mask, causal, band): a subtrahend R of exp(mask(E, M) - R)
 *  must not, for exp(-inf - R) to be 0 (this rule and flash_bwd_causal_skip's). */
bool has_mask(const Expr& e);

/** `z` as a band on (a, the other axis): itself where z.a == a, else reversed (index(a) - index(b)
 *  = -(index(b) - index(a)): the bounds negated and swapped). */
ZeroBand oriented(const ZeroBand& z, const std::string& a);

/** The range of indices of axis `b` where some element of the rows [first, last] of axis `a` may
 *  be nonzero under `z` (a band on (a, b) or on (b, a)), clipped to [0, extent): {begin, end},
 *  empty (begin >= end) when every element there is 0. */
std::pair<std::int64_t, std::int64_t> band_range(const ZeroBand& z, const std::string& a, std::int64_t first, std::int64_t last, std::int64_t extent);

}  // namespace napkin
