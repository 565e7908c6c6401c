/** \file pass.hpp
 *  What every relabelling pass sees and returns. A pass is a rewrite of the labelled IR
 *  (derive/labelled.hpp), Diagram -> Diagram. A per-kernel pass is given one candidate kernel
 *  (KernelCandidate): the parameters of its move, as the search chose them (derive-fusion: the
 *  statements; group: the weave and group directives; stream: the stream directives; warps; cluster),
 *  and, once the candidate is priced, the model's price (levels, bytes, lemmas) for its step. It
 *  checks its own legality with the checker's rule (derive/check_schedule.hpp), writes its labels
 *  onto `ir` (derive-fusion: the kernel's own diagram; group, stream, warps, cluster: labels on
 *  axes; level assignment: `@level` on arrays and their occurrences), leaves `ir` unchanged where
 *  its move does not apply, and returns the steps of the derivation log that say what it did and
 *  which lemma or theorem licenses it. derive/pipeline.hpp runs them for one candidate.
 */
#pragma once
#include <set>
#include <string>
#include <vector>

#include "derive/search.hpp"

namespace napkin {

/** What every pass of one derivation (or one search) shares: the diagram the kernels are of. */
struct PassContext {
  const Program& program;
  const Diagram& diagram;  ///< the source diagram (in the search: the kernel's own view of it)
  const SizeMap& sizes;
  const Hardware& hw;
  const ModelOptions& opt;
  const std::vector<StatementWeave>& weave;  ///< weave analysis of `diagram`
  /** Every statement its own kernel, each with its best partition: what derive-fusion compares
   *  its kernel with. Null in the search (the fusion step is not written there). */
  const SearchResult* unfused = nullptr;
};

/** One candidate kernel as the passes see it: their parameters in, their verdict out. */
struct KernelCandidate {
  explicit KernelCandidate(const KernelPlan& p, const KernelChoice* price = nullptr) : params(p), priced(price) {}

  /** The candidate's choice for every move: each pass reads the directives of its own kind only
   *  (fuse: the statements, in schedule order; weave and group; stream; warps; cluster). */
  const KernelPlan& params;
  /** The model's price of the candidate (lemmas, cost with levels and bytes): what the steps and
   *  derive-level-assignment report. Null while the search runs the pipeline to price it: then the
   *  passes write their labels and check their legality, write no level and return no step. */
  const KernelChoice* priced;

  // Written by the passes as they run.
  std::vector<const StatementWeave*> statements;  ///< derive-fusion: the fused statements (into the context's weave)
  std::set<std::string> escaping;                 ///< derive-fusion: what leaves the kernel
  std::vector<LemmaUse> lemmas;                   ///< derive-stream-partition: the lemma of each streamed statement
  std::string refused;  ///< the first pass that refuses its move says why (then the pipeline stops); empty when legal
};

/** One step of a derivation: what was done, what makes it legal, and what it changes. */
struct Step {
  std::string pass;     ///< registry name, e.g. "derive-stream-partition"
  std::string kernel;   ///< empty for diagram-wide steps
  std::string move;     ///< "stream x by 64"
  std::string license;  ///< "lemma online-softmax (paper §3)"
  std::string detail;   ///< consequences, in bytes and counts
};

/** A pass: rewrites `ir` for candidate kernel `k` and returns its steps; sets `k.refused` when
 *  its move is illegal. `ir` is the source diagram for the diagram-wide passes (they ignore `k`)
 *  and, for the per-kernel passes, the kernel's labelled diagram (the source diagram until
 *  derive-fusion rewrites it into the kernel's own). */
using PassFn = std::vector<Step> (*)(const PassContext&, KernelCandidate& k, Diagram& ir);

std::vector<Step> weave_analysis_pass(const PassContext&, KernelCandidate&, Diagram& ir);
std::vector<Step> fusion_pass(const PassContext&, KernelCandidate&, Diagram& ir);
std::vector<Step> group_partition_pass(const PassContext&, KernelCandidate&, Diagram& ir);
std::vector<Step> stream_partition_pass(const PassContext&, KernelCandidate&, Diagram& ir);
std::vector<Step> level_assignment_pass(const PassContext&, KernelCandidate&, Diagram& ir);
std::vector<Step> divisibility_pass(const PassContext&, KernelCandidate&, Diagram& ir);
std::vector<Step> warp_recursion_pass(const PassContext&, KernelCandidate&, Diagram& ir);
std::vector<Step> cluster_pass(const PassContext&, KernelCandidate&, Diagram& ir);

/** Human-readable byte count: "1.07 GB", "48.0 KB" (decimal units). */
std::string human_bytes(double b);

}  // namespace napkin
