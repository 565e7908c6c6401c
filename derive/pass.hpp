/** \file pass.hpp
 *  What every relabelling pass sees and returns. A pass is a pure function of the context and a
 *  kernel index: it checks that its move is legal for the chosen schedule and says which lemma or
 *  theorem licenses it, as steps of the derivation log. It changes nothing.
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

using PassFn = std::vector<Step> (*)(const PassContext&, std::size_t kernel);

std::vector<Step> weave_analysis_pass(const PassContext&, std::size_t kernel);
std::vector<Step> fusion_pass(const PassContext&, std::size_t kernel);
std::vector<Step> group_partition_pass(const PassContext&, std::size_t kernel);
std::vector<Step> stream_partition_pass(const PassContext&, std::size_t kernel);
std::vector<Step> level_assignment_pass(const PassContext&, std::size_t kernel);
std::vector<Step> divisibility_pass(const PassContext&, std::size_t kernel);
std::vector<Step> warp_recursion_pass(const PassContext&, std::size_t kernel);
std::vector<Step> cluster_pass(const PassContext&, std::size_t kernel);

/** Human-readable byte count: "1.07 GB", "48.0 KB" (decimal units). */
std::string human_bytes(double b);

}  // namespace napkin
