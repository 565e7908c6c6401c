/** \file flash_scale.hpp
 *  The softmax scale of a flash form, folded into the exponent. When P = softmax(A; x) and A is,
 *  along a path of masks and single-use fused statements, c * B (or B * c, or B / c) with c the
 *  same for every element (no axes: numbers and axis sizes) and provably positive and finite,
 *  then max_x(c B) = c max_x(B) and exp(c B - c max B) = exp2(B (c log2 e) - max B (c log2 e)):
 *  the online softmax keeps its running max in units of B and each P costs one FFMA before its
 *  exp2, not a multiplication and then an FFMA (FlashAttention-3's softmax_scale_log2). A mask's
 *  fill, -inf, is unchanged by c > 0. Decided here, once; rendered by emit/cuda (render_score.cpp,
 *  render_lemma.cpp).
 *  A scale that reads a scalar input (an fp8 dequantisation factor: uniform, its sign known only
 *  at run time) is folded too, where no mask lies between it and the softmax: where c < 0,
 *  max_x(c B) = |c| max_x(-B), so the running max is kept over -B (a branch uniform over the
 *  kernel picks the side) and P = exp2(B (c log2 e) - max(-B) |c| log2 e); a key past the end is
 *  filled with +inf on that side (c (+inf) = -inf). c = 0 is taken as fp32's smallest normal,
 *  2^-126: the exponent B 2^-126 log2 e differs from 0 by less than 2^-25 for |B| < 2^100, below
 *  fp32's rounding of P = 1, and a filled key still gives 0 (not 0 times inf, NaN).
 *  Nothing is folded where a constant c may be negative, zero or not finite, where a mask lies
 *  between a runtime scale and the softmax (its fill times c < 0 is +inf), or where the scaled
 *  value is read twice.
 */
#pragma once
#include "diagrams/ir.hpp"
#include "lower/flash_form.hpp"

namespace napkin {

/** Finds the fold of `f` (above) in `d` and records it in f.scaled / f.scale / f.scale_divides;
 *  leaves them unset where the rule does not apply. f.score, f.inlined and f.normaliser_lemma
 *  must be set. */
void find_flash_scale(const Diagram& d, FlashForm& f);

/** Whether `e` (an expression without array reads) is positive and finite in fp32 for every
 *  size of the diagram's axes (1 to 2^63): numbers, axis sizes, sqrt, rsqrt, products and
 *  quotients, with log2 of the value bounded within [-100, 100] by interval arithmetic (fp32's
 *  normal range is 2^-126 to 2^128). */
bool positive_finite_uniform(const Diagram& d, const Expr& e);

}  // namespace napkin
