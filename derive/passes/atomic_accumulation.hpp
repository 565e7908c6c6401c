/** \file atomic_accumulation.hpp
 *  Pass derive-atomic-accumulation: a rewrite of the diagram applied before the search (after
 *  derive-split-reduction), which lets a contraction join a kernel that groups the axis it
 *  reduces, its blocks' partial sums added up in global memory by atomic adds (lemma atomic-sum).
 *
 *  Contract. A statement `Y = E` whose expression is linear in one contraction `contract(T, R; a)`
 *  reducing the one axis `a` (products, quotients with it in the numerator, negation), where T is
 *  a statement woven over `a` that another statement Z reads, Z woven over `a` and reducing some
 *  other axis (the pair a kernel grouping `a` would compute together: FlashAttention-2's backward,
 *  where dK and dV group the keys and dQ reduces them), and Y is not declared fp32 already, is
 *  rewritten as
 *      Y_acc[Y's axes] : fp32 = E
 *      Y[Y's axes] = Y_acc
 *  Y keeps its dtype and level. Sound: a copy; Y_acc's dtype is the accumulators' precision.
 *  Y_acc then meets the lemma's conditions (derive/lemmas.hpp atomic_problem) and the search may
 *  fuse it into a kernel that groups `a` (check_schedule.cpp groupable_axis): the second way of
 *  FlashAttention-2's backward to compute dQ, against a kernel of its own streaming `a`.
 *
 *  Candidates: one rewrite per axis `a` that some eligible statement reduces, every eligible
 *  statement over `a` rewritten together. The diagram as given and each rewrite are priced by the
 *  search; the fastest is kept, with a Step per candidate saying both predictions. A rewrite whose
 *  best schedule groups `a` in no kernel computing an accumulator (`a` streamed or whole in each
 *  block: a copy and no atomic adds) is never kept, whatever its price. Names: `<Y>_acc` (the
 *  first unused of `<Y>_acc`, `<Y>_acc2`, ...). Raises nothing of its own.
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
using AtomicAccumulationResult = RewriteResult;

/** Rewrites the eligible contractions of `d` into fp32 accumulators and copies where the model
 *  prices it faster (see the file comment). `d` is a verified diagram of `p`; it must outlive the
 *  result where the result keeps no rewrite. `prior`: the search of `d` where one was run
 *  already (derive-split-reduction's). Costs one search per candidate axis plus one of `d`
 *  unless `prior` is given (none where no statement is eligible). */
AtomicAccumulationResult atomic_accumulations(const Program& p, const Diagram& d, const SizeMap& sizes, const Hardware& hw,
                                              const ModelOptions& opt = {}, const SearchOptions& so = {},
                                              std::optional<WeighedSearch> prior = std::nullopt);

/** The registry's entry: the rewrite ran before the search (derive()); its steps were recorded
 *  then. It adds none and writes no labels on `ir`. */
std::vector<Step> atomic_accumulation_pass(const PassContext& c, KernelCandidate& kernel, Diagram& ir);

}  // namespace napkin
