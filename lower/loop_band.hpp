/** \file loop_band.hpp
 *  The part of a SIMT reduction loop that a band mask among the reduced product's factors leaves
 *  nonzero. `contract(K, band(s, x; lo=0, hi=0); s)` (napkin grad's rename of a call argument's
 *  axis, diagrams/inline_calls.cpp) is K[x] itself: its loop over s need take one step, not N_s.
 *  The SIMT emitter (emit/cuda/context.cpp) walks only that range and the model
 *  (perfmodel/simt_cost.cpp) prices the steps walked: one decision, made here.
 *
 *  The rule: in a sum, mean or contraction (not a max: its skipped terms' 0 would count) whose
 *  product has a factor causal(a, b[; window=W]) or band(a, b; lo=L, hi=H) (diagrams/ir.hpp
 *  MaskBand: kept where lo <= index(b) - index(a) <= hi), where one of a, b is the loop's axis and
 *  the other is not reduced by the same node (an index fixed outside the loop), every term outside
 *  the band is 0 times a finite value (the convention of the causal skips, diagrams/zero_band.hpp),
 *  so the loop may leave it out. A mean still divides by the whole extent.
 */
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "diagrams/ir.hpp"

namespace napkin {

/** The steps of a loop over `axis` a band leaves: index(axis) - index(outer) in [lo, hi], either
 *  side open where absent. */
struct LoopBand {
  std::string axis, outer;
  std::optional<std::int64_t> lo, hi;
};

/** The band of reduction node `e`'s loop over `axis` (one of e.axes) by the rule above, or
 *  nullopt. Raises nothing. */
std::optional<LoopBand> loop_band(const Expr& e, const std::string& axis);

/** Mean steps of loop `b` over an axis of `n_axis` elements, over the `n_outer` indices of the
 *  outer axis (exact: the band's clipped width summed over the outer indices). Raises nothing. */
double loop_band_steps(const LoopBand& b, std::int64_t n_axis, std::int64_t n_outer);

}  // namespace napkin
