/** \file pass.hpp
 *  What every relabelling pass sees and returns. A pass is a rewrite of the labelled IR
 *  (derive/labelled.hpp), Diagram -> Diagram: given the parameters the search chose for kernel k
 *  (PassContext::chosen), it writes its labels onto `ir` (derive-fusion: the kernel's own
 *  diagram; group, stream, warps, cluster: labels on axes; level assignment: `@level` on arrays
 *  and their occurrences), leaves `ir` unchanged where its move does not apply, and returns the
 *  steps of the derivation log that say what it did and which lemma or theorem licenses it.
 */
#pragma once
#include <string>
#include <vector>

#include "derive/search.hpp"

namespace napkin {

struct PassContext {
  const Program& program;
  const Diagram& diagram;
  const SizeMap& sizes;
  const Hardware& hw;
  const ModelOptions& opt;
  const std::vector<StatementWeave>& weave;
  const SearchResult& chosen;   ///< the derived schedule
  const SearchResult& unfused;  ///< every statement its own kernel, each with its best partition
};

/** One step of a derivation: what was done, what makes it legal, and what it changes. */
struct Step {
  std::string pass;     ///< registry name, e.g. "derive-stream-partition"
  std::string kernel;   ///< empty for diagram-wide steps
  std::string move;     ///< "stream x by 64"
  std::string license;  ///< "lemma online-softmax (paper §3)"
  std::string detail;   ///< consequences, in bytes and counts
};

/** A pass: rewrites `ir` for kernel `kernel` of the chosen schedule and returns its steps. `ir` is
 *  the source diagram for the diagram-wide pass and, for the per-kernel passes, kernel k's
 *  labelled diagram (the source diagram until derive-fusion rewrites it into the kernel's own). */
using PassFn = std::vector<Step> (*)(const PassContext&, std::size_t kernel, Diagram& ir);

std::vector<Step> weave_analysis_pass(const PassContext&, std::size_t kernel, Diagram& ir);
std::vector<Step> fusion_pass(const PassContext&, std::size_t kernel, Diagram& ir);
std::vector<Step> group_partition_pass(const PassContext&, std::size_t kernel, Diagram& ir);
std::vector<Step> stream_partition_pass(const PassContext&, std::size_t kernel, Diagram& ir);
std::vector<Step> level_assignment_pass(const PassContext&, std::size_t kernel, Diagram& ir);
std::vector<Step> divisibility_pass(const PassContext&, std::size_t kernel, Diagram& ir);
std::vector<Step> warp_recursion_pass(const PassContext&, std::size_t kernel, Diagram& ir);
std::vector<Step> cluster_pass(const PassContext&, std::size_t kernel, Diagram& ir);

/** Human-readable byte count: "1.07 GB", "48.0 KB" (decimal units). */
std::string human_bytes(double b);

}  // namespace napkin
