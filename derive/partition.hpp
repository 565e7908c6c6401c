/** \file partition.hpp
 *  The search's choice of kernels: which sets of statements may be fused into one kernel, and
 *  the best sequence of such kernels covering a diagram, given each set's score (search.cpp
 *  prices them). Statements are indexed in source order.
 *
 *  Two regimes:
 *  - exact, for at most kExactStatements statements with at most kExactCandidates connected,
 *    convex sets of them: candidates are every such set (a call always alone); a dynamic program
 *    over the sets of statements already computed finds the best executable sequence. Both are
 *    exponential (2^n sets), hence the bounds: the candidates' prices dominate (each over a grid
 *    of tiles, about 1 ms each for a fused kernel of several statements), and the widest shape, n - 1
 *    independent statements and their sum, has 2^(n-1) + n - 1 candidates: 8.9 s at n = 8 (under
 *    load), before this bound. The bundled diagrams have at most 12 candidates (transformer_block:
 *    its calls stand alone) and stay exact.
 *  - restricted exact, for at most kExactStatements statements with more candidates: the
 *    segments below and the stream closures, then the exact dynamic program over them. A stream
 *    closure is a reduction and its producers reached through statements that all touch one axis
 *    it touches (the axis a fused kernel would group or stream: FlashAttention-2's backward is
 *    dK's and dV's closures along the key axis); and along each axis the unions of each
 *    overlapping pair of closures and of each group of overlapping ones; kept where convex and
 *    connected. FlashAttention-2's backward kernel (six statements) is no
 *    segment of at most kMaxSegment.
 *  - otherwise segments. One topological order of the dataflow (source order where it is one);
 *    candidates are its contiguous segments of at most kMaxSegment statements that are connected
 *    (a segment of a topological order is always convex); a dynamic program over the positions of
 *    that order finds the best sequence. O(n * kMaxSegment) candidates and DP steps.
 *  Both regimes break near ties (within `tolerance` of the best score) towards fewer HBM bytes.
 */
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace napkin {

/** Largest diagram searched exactly, in statements and in candidate kernels (the file comment). */
inline constexpr std::size_t kExactStatements = 12;
inline constexpr std::size_t kExactCandidates = 64;
/** Most statements in one candidate kernel of a larger diagram. */
inline constexpr std::size_t kMaxSegment = 4;

/** The dataflow between statements, and which pairs may share a kernel. */
struct PartitionGraph {
  std::size_t statements = 0;
  std::vector<std::vector<std::size_t>> preds;  ///< per statement: the statements it reads
  /** Statements i and j are related: one reads the other, or both read a common array (horizontal
   *  fusion). A candidate kernel must be connected through this relation. */
  std::function<bool(std::size_t, std::size_t)> linked;
  std::vector<bool> alone;  ///< per statement: it must be a kernel of its own (a call)
  /** Per statement: the axes it touches (keeps or reduces), and whether it reduces one. Used for
   *  the stream closures (Partitioner::closure_candidates); empty: none. */
  std::vector<std::vector<std::string>> axes;
  std::vector<bool> reduces;
};

/** A candidate kernel's statements (ascending indices) and its price. */
struct PartitionCandidate {
  std::vector<std::size_t> members;
  double score = 0;  ///< objective (seconds or bytes); infinity when no plan fits
  double hbm = 0;    ///< HBM bytes, the tie-break
};

class Partitioner {
 public:
  explicit Partitioner(PartitionGraph g);

  /** Whether the search is exact (the file comment). */
  bool exact() const { return exact_; }
  /** Whether it is restricted exact (the file comment). */
  bool restricted() const { return restricted_; }
  /** Candidate kernels, each with members set and score 0: the caller prices them. Singles (every
   *  statement alone) are always among them. */
  std::vector<PartitionCandidate> candidates() const;
  /** The best sequence of `priced` (candidates() with scores) covering every statement in an
   *  executable order, as indices into `priced`; empty when no sequence has a finite score. */
  std::vector<std::size_t> best(const std::vector<PartitionCandidate>& priced, double tolerance) const;

 private:
  bool connected(const std::vector<std::size_t>& members) const;
  bool admissible(const std::vector<std::size_t>& members) const;
  bool convex(std::uint64_t mask) const;
  std::vector<std::size_t> best_exact(const std::vector<PartitionCandidate>& priced, double tolerance) const;
  std::vector<std::size_t> best_segments(const std::vector<PartitionCandidate>& priced, double tolerance) const;

  std::vector<PartitionCandidate> exact_candidates() const;
  std::vector<PartitionCandidate> segment_candidates() const;
  std::vector<PartitionCandidate> closure_candidates() const;

  PartitionGraph g_;
  bool exact_ = false;
  bool restricted_ = false;  ///< restricted exact: segments and closures, the exact dynamic program
  std::vector<std::size_t> order_;                 ///< a topological order (segments)
  std::vector<std::vector<bool>> reaches_;         ///< transitive dataflow (exact regime only)
};

}  // namespace napkin
