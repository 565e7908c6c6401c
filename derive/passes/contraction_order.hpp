/** \file contraction_order.hpp
 *  Pass derive-contraction-order: a rewrite of the diagram applied before the search.
 *
 *  Contract. Every `contract(X1, ..., Xn; r...)` with n >= 3 operands, wherever it occurs in a
 *  statement's expression (nested ones first), becomes a tree of n - 1 pairwise contractions:
 *  n - 2 new statements, inserted just before the statement that held it, and one pairwise
 *  `contract` left in its place. Each pairwise step contracts two operands (original operand
 *  expressions or earlier steps' arrays, in their original left-to-right order) over the reduced
 *  axes r that no other remaining operand carries; its result keeps every other axis of the two
 *  (the union of their axes, first operand's order first). This is einsum's associativity: a sum
 *  over an axis moves inside the product of the factors that carry it, so the evaluator's result
 *  is unchanged up to the rounding of a different summation order. A new statement is named
 *  `<statement>_c<i>` (the first i = 1, 2, .. whose name no axis, array or diagram of the program
 *  uses), carries no dtype or level (stored as the unlabelled intermediates of a hand-written
 *  chain are), and is located at the original `contract`. Everything else is left as it is; a
 *  diagram without such contractions comes back equal to its input, with no step.
 *
 *  The order: every binary tree over the operands for n <= kExhaustiveOperands ((2n-3)!! trees,
 *  945 at n = 6), ranked by FLOPs (2 per multiply-add of each pairwise step, over the union of its
 *  operands' axes at `sizes`); beyond that, the greedy order (repeatedly the pair whose step costs
 *  the fewest FLOPs, ties to the smaller result, then to the earlier pair). The cheapest orders by
 *  FLOPs (at most kModelled, within kFlopSlack of the best) are then priced by the model: the
 *  search's best schedule of the rewritten diagram (search_schedule), one contraction at a time,
 *  the others at their current choice; the fastest wins, ties to fewer FLOPs. At most
 *  kModelBudget searches in all, so derive stays bounded however many contractions a diagram has.
 *
 *  One Step per rewritten contraction: "contract(A, B, C; j, k) split as (A B) C", with the FLOPs
 *  and predicted times of the orders it was weighed against. Raises nothing of its own: the input
 *  is a verified diagram; a candidate for which the search finds nothing that fits is priced as
 *  infinitely slow (the search raises the located error on the chosen diagram if all fail).
 */
#pragma once
#include <vector>

#include "derive/pass.hpp"

namespace napkin {

/** The rewritten diagram and the steps that say what was split and why. */
struct ContractionOrderResult {
  Diagram diagram;
  std::vector<Step> steps;
  bool changed = false;  ///< false: `diagram` equals the input
};

/** Up to this many operands every order is weighed; beyond, the greedy order alone. */
inline constexpr std::size_t kExhaustiveOperands = 6;
/** At most this many orders per contraction are priced by the model... */
inline constexpr std::size_t kModelled = 3;
/** ...each within this factor of the fewest FLOPs... */
inline constexpr double kFlopSlack = 8;
/** ...and at most this many searches per diagram. */
inline constexpr std::size_t kModelBudget = 8;

/** Splits every contraction of three or more operands of the verified diagram `d` of `p` in the
 *  order the model prices cheapest at `sizes` on `hw` (see the file comment). */
ContractionOrderResult order_contractions(const Program& p, const Diagram& d, const SizeMap& sizes, const Hardware& hw,
                                          const ModelOptions& opt = {}, const SearchOptions& so = {});

/** The registry's entry, run after the search on the diagram the search ran on: checks that no
 *  contraction of three or more operands is left (an internal error otherwise). Its steps were
 *  recorded when order_contractions ran, before the search (derive()); it adds none and writes no
 *  labels on `ir`. */
std::vector<Step> contraction_order_pass(const PassContext& c, KernelCandidate& kernel, Diagram& ir);

}  // namespace napkin
