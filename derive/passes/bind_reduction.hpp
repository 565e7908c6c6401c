/** \file bind_reduction.hpp
 *  Pass derive-bind-reduction: a rewrite of the diagram applied before the search (after
 *  derive-operand-relayout, the last of the others).
 *
 *  Contract. A statement S[..., a, ...] whose expression is not itself a reduction or a normaliser
 *  but holds a one-axis reduction `r = sum|max|mean(e; a)` over one of S's own axes, with `e`
 *  element-wise (a normaliser written out: `Qn = Q * rsqrt(sum(Q * Q; d))`), gets the reduction
 *  bound to a statement of its own: `S_<op>[axes of r] : fp32 = r`, placed before S, and S reads
 *  it in r's place. The statistic's axes are r's, in S's order; it is fp32, as the kernels
 *  computed r in registers before (the fp64 evaluator rounds it there). The same reduction
 *  written twice in S is bound once. Rounds repeat until nothing is left to bind (at most 8):
 *  a reduction whose argument held a bound one (`sum(exp(X - max(X; m)); m)`) is bound next. The name is `<S>_<op>` (the first of `<S>_<op>`,
 *  `<S>_<op>2`, ... no axis, array or diagram of the program uses).
 *  Why: a map that reads the reduced axis around its reduction is neither a rows normaliser nor
 *  a reduction (lower/rows_form.hpp rows_core), so it lowers to SIMT, one thread per element
 *  recomputing the reduction; bound, the statistic and the map are a reduction part and a map
 *  part that fuse into one rows kernel (two walks of each row).
 *
 *  Only where it pays: the rewritten diagram and the diagram as given are both priced by the
 *  search (derive/rewrite_weighing.hpp); the rewrite is kept when it is predicted faster, else the
 *  diagram comes back unchanged with a step saying so. One Step per bound reduction, with both
 *  predictions. Raises nothing of its own.
 */
#pragma once
#include <optional>
#include <vector>

#include "derive/pass.hpp"
#include "derive/rewrite_weighing.hpp"
#include "derive/search.hpp"

namespace napkin {

/** The diagram kept, the steps and the kept search (derive/rewrite_weighing.hpp). */
using BindReductionResult = RewriteResult;

/** Binds the reductions read inside maps over their own axis to statements of their own where the
 *  model prices it faster (see the file comment). `d` is a verified diagram of `p`; it must
 *  outlive the result where the result keeps no rewrite. `prior`: the search of `d` where one was
 *  run already. Costs one search of the rewrite plus one of `d` unless `prior` is given (none
 *  where no statement holds such a reduction). Raises nothing of its own. */
BindReductionResult bind_reductions(const Program& p, const Diagram& d, const SizeMap& sizes, const Hardware& hw, const ModelOptions& opt = {},
                                    const SearchOptions& so = {}, std::optional<WeighedSearch> prior = std::nullopt);

/** The registry's entry: the rewrite ran before the search (derive()); its steps were recorded
 *  then. It adds none and writes no labels on `ir`. */
std::vector<Step> bind_reduction_pass(const PassContext& c, KernelCandidate& kernel, Diagram& ir);

}  // namespace napkin
