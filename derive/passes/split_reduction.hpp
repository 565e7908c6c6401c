/** \file split_reduction.hpp
 *  Pass derive-split-reduction: a rewrite of the diagram applied before the search (after
 *  derive-contraction-order, before derive-atomic-accumulation and derive-operand-relayout), the
 *  diagram-level form of split-K.
 *
 *  Contract. A statement `Y = E` whose expression is a pairwise `contract(X, Z; R)` reducing two or
 *  more axes, wrapped only in products, quotients (the contraction in the numerator) and negation
 *  by factors that carry no axis of R, can have one reduced axis `a` split off:
 *      Y_a[Y's axes with a before the innermost] : fp32 = E with a no longer reduced
 *      Y[...] = sum(Y_a; a)
 *  Sound by the associativity and commutativity of sums (lemma associative-sum) and linearity
 *  (a factor constant along a leaves the sum over a: sum_a(c * C_a) = c * sum_a C_a). The
 *  partials are stored in fp32, the accumulators' precision, so that the result matches the
 *  unsplit one to rounding of the partials' sum; Y keeps its own dtype and level.
 *
 *  Why: the kernel that computes Y groups its blocks over Y's axes only, so a reduction over a
 *  long axis leaves few blocks (GQA's backward: dK and dV reduce the query heads r and the
 *  queries q, and a kernel per key tile and key/value head is 128 blocks at 8 heads and 2048
 *  keys, one wave of unequal blocks under a causal mask). Splitting a off gives |a| times the
 *  blocks, at the price of the partials' HBM traffic and a reduction kernel.
 *
 *  Candidates: one rewrite per axis a of extent 2 .. the hardware's SM count (more blocks than
 *  SMs from the split alone is never the point, and the partials' bytes grow with |a|) that some
 *  eligible statement reduces; every eligible statement reducing a is split together (the
 *  kernels that fuse them share their grid). The diagram as given and each rewrite are priced by
 *  the search (search_with_unfused); the fastest is kept, with a Step per candidate saying both
 *  predictions. Names: `<Y>_<a>` (the first unused of `<Y>_<a>`, `<Y>_<a>2`, ...).
 *  Raises nothing of its own.
 */
#pragma once
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "derive/pass.hpp"
#include "derive/rewrite_weighing.hpp"
#include "derive/search.hpp"

namespace napkin {

/** The diagram kept, the steps and the kept search (derive/rewrite_weighing.hpp). */
using SplitReductionResult = RewriteResult;

/** Splits one reduced axis off the eligible contractions of `d` where the model prices it faster
 *  (see the file comment). `d` is a verified diagram of `p` with pairwise contractions; it must
 *  outlive the result where the result keeps no rewrite (`kept` points into it). `prior`: the
 *  search of `d` where one was run already. Costs one search per candidate axis plus one of `d`
 *  unless `prior` is given (none where no statement is eligible). */
SplitReductionResult split_reductions(const Program& p, const Diagram& d, const SizeMap& sizes, const Hardware& hw, const ModelOptions& opt = {},
                                      const SearchOptions& so = {}, std::optional<WeighedSearch> prior = std::nullopt);

/** The registry's entry: the rewrite ran before the search (derive()); its steps were recorded
 *  then. It adds none and writes no labels on `ir`. */
std::vector<Step> split_reduction_pass(const PassContext& c, KernelCandidate& kernel, Diagram& ir);

}  // namespace napkin
