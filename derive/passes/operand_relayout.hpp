/** \file operand_relayout.hpp
 *  Pass derive-operand-relayout: a rewrite of the diagram applied before the search (the last of
 *  them: after derive-contraction-order, so every contraction is pairwise, derive-split-reduction
 *  and derive-atomic-accumulation).
 *
 *  Contract. A pairwise `contract(X, Y; r...)` whose operand X is an input of the diagram stored
 *  MN-major (its innermost axis is not one of the reduced axes r it carries), where the
 *  hardware's tensor-core atom for X's storage dtype (`[[mma]]`: the warpgroup row, else the warp
 *  row) reads K-major operands only (`mn_major = false`: 8-bit wgmma and mma.sync, PTX ISA
 *  9.7.15.5.1 and 9.7.14.5.15), gets a transposed copy: a new statement `X_k[..., k] : t = X`,
 *  the axes of X with the last reduced axis X carries moved innermost, stored in X's storage dtype
 *  t (a copy: exact), inserted before the first statement that reads it, and the contraction reads
 *  X_k instead of X. Every contraction that needs the same layout of X shares one copy. The name is
 *  `<X>_k` (the first of `<X>_k`, `<X>_k2`, ... no axis, array or diagram of the program uses).
 *  The CPU loop nest and the fp64 evaluator see the rewritten diagram: the copy changes no value.
 *
 *  Only where it pays: the rewritten diagram and the diagram as given are both priced by the search
 *  (search_with_unfused, whose result for the side taken derive() keeps instead of searching
 *  again); the rewrite is kept when it is predicted faster (it lets the consumer take
 *  the tensor-core form instead of the SIMT kernel), else the diagram comes back unchanged with a
 *  step saying so. One Step per copy: "V is stored d-innermost; fp8e4m3 wgmma reads K-major
 *  operands only (...): transposed copy V_k[b,h,d,x]", with both predictions. Raises nothing of
 *  its own: a rewrite for which the search finds nothing that fits is priced infinitely slow.
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
using OperandRelayoutResult = RewriteResult;

/** Gives each 8-bit operand stored MN-major a K-major copy where the model prices it cheaper
 *  (see the file comment). `d` is a verified diagram of `p` whose contractions are pairwise; it
 *  must outlive the result where the result keeps no rewritten diagram (`searched` points into
 *  it). `prior`: the search of `d` where one was run already. Costs two searches where a copy
 *  applies (one per side; one where `prior` is given), none otherwise. Raises nothing of its own. */
OperandRelayoutResult relayout_operands(const Program& p, const Diagram& d, const SizeMap& sizes, const Hardware& hw,
                                        const ModelOptions& opt = {}, const SearchOptions& so = {},
                                        std::optional<WeighedSearch> prior = std::nullopt);

/** The registry's entry: the rewrite ran before the search (derive()); its steps were recorded
 *  then. It adds none and writes no labels on `ir`. */
std::vector<Step> operand_relayout_pass(const PassContext& c, KernelCandidate& kernel, Diagram& ir);

}  // namespace napkin
