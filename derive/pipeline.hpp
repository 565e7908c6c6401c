/** \file pipeline.hpp
 *  The pass pipeline for one candidate kernel: the per-kernel passes of the registry
 *  (derive/registry.cpp), in order, each given the candidate's parameters for its move and
 *  checking its own legality, turn the source diagram into the kernel's labelled diagram. The
 *  search runs it for every candidate it prices (unpriced: labels and legality, no steps) and
 *  prices plan_of(the labelled kernel), so that what is priced is what the passes wrote; the
 *  derivation runs it again for each chosen kernel with the model's price, for the steps and the
 *  levels (derive-level-assignment).
 */
#pragma once
#include <string>
#include <vector>

#include "derive/pass.hpp"

namespace napkin {

/** What the pipeline made of one candidate kernel. */
struct KernelPipeline {
  /** The kernel's labelled diagram after the last pass (derive/labelled.hpp): partition labels
   *  always, levels only when the candidate was priced. Meaningless when `refused` is set. */
  Diagram labelled;
  /** With `keep_after`: the kernel's diagram after each per-kernel pass of the registry, in its
   *  order (up to the pass that refused). */
  std::vector<Diagram> after;
  std::vector<Step> steps;       ///< the passes' steps (only when priced)
  std::vector<LemmaUse> lemmas;  ///< the lemma of each streamed statement (derive-stream-partition)
  std::string refused;           ///< why the first pass that refused its move did; empty when legal
  std::string refused_by;        ///< that pass's registry name
};

/** Runs the per-kernel passes of the registry for the kernel whose parameters (the candidate's
 *  directives: fuse, weave, group, stream, warps, cluster) are `params`, on `c.diagram`. `priced`:
 *  the model's price of that kernel (levels, bytes, lemmas), for the steps and the levels; null
 *  while the search prices it. Stops at the first pass that refuses its move. Raises nothing; the
 *  fused statements must exist in `c.weave` (NAPKIN_ASSERT). */
KernelPipeline run_kernel_pipeline(const PassContext& c, const KernelPlan& params, const KernelChoice* priced = nullptr,
                                   bool keep_after = false);

}  // namespace napkin
