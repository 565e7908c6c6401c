/** \file search.hpp
 *  The search behind `napkin derive`: enumerates legal schedules (fusion choices; group and stream
 *  sizes as multiples of the divisibility LCM; warps per block), runs the pass pipeline on each
 *  (derive/pipeline.hpp: the passes check the moves and write the labels), scores the plan the
 *  labels say with the performance model and keeps the best, deterministically (ties go to the
 *  earlier candidate in a fixed order).
 *
 *  Kernels are connected, convex sets of statements (a call is always alone); each candidate
 *  kernel's best partition is found once; a dynamic program picks kernels in an executable order
 *  (partition.hpp): exact for small diagrams (kExactStatements, kExactCandidates), over
 *  contiguous segments of a topological order beyond, so that the cost grows linearly with the
 *  statements.
 */
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "derive/check_schedule.hpp"

namespace napkin {

struct SearchOptions {
  enum class Objective { time, transfers } objective = Objective::time;
  /** Tile sizes as multiples of the hardware's divisibility LCM (coalescing, MMA shapes). Off for
   *  the paper's hardware-free closed forms: sizes then range over a fine grid, refined locally. */
  bool hardware_divisibility = true;
};

struct KernelChoice {
  KernelPlan plan;
  std::vector<LemmaUse> lemmas;
  KernelCost cost;
  double score = 0;
};

struct SearchResult {
  Schedule schedule;
  std::vector<KernelChoice> kernels;
  ScheduleCost cost;
  std::size_t candidates_scored = 0;
  /** The diagram the schedule is of where that is derive's rewrite of the one given (statements
   *  derive added before its search: pairwise contractions, split reductions, relayout copies,
   *  bound statistics; Derivation::rewritten), kept alive here because `kernels` point into it;
   *  null: the diagram given. A given schedule carries it when it names the rewrite's statements
   *  (cli load_schedule), and derive_given derives that diagram. */
  std::shared_ptr<const Diagram> rewritten;
};

/** Best schedule for `d`. Raises UserError when no legal schedule fits the hardware. */
SearchResult search_schedule(const Program& p, const Diagram& d, const SizeMap& sizes, const Hardware& hw,
                             const ModelOptions& opt, const SearchOptions& so);

/** The best schedule and the best unfused one (every statement its own kernel, each with its best
 *  partition), from one search: the unfused kernels are among the candidates. */
std::pair<SearchResult, SearchResult> search_with_unfused(const Program& p, const Diagram& d, const SizeMap& sizes,
                                                          const Hardware& hw, const ModelOptions& opt, const SearchOptions& so);

/** A checked hand-written schedule in the form the search returns. */
SearchResult result_of(const Schedule& s, const CheckedSchedule& checked);

/** The schedule's objective value: seconds, or bytes into the lower level. */
double objective(const ScheduleCost& c, const SearchOptions& so);

/** A diagram priced as derive() will search it, for a pass that rewrites the diagram before the
 *  search and weighs its rewrite against the diagram as given. */
struct WeighedSearch {
  double objective = 0;  ///< the best schedule's objective; infinite where nothing fits
  /** search_with_unfused of the diagram where it succeeded: derive() keeps it for the side it
   *  takes instead of searching that diagram again (the plans' specs point into the diagram). */
  std::optional<std::pair<SearchResult, SearchResult>> searched;
  std::optional<SearchResult> alone;  ///< search_schedule's result where only it succeeded
  /** The best schedule found, or null where nothing fits. */
  const SearchResult* best() const { return searched ? &searched->first : alone ? &*alone : nullptr; }
};

/** Weighs `d`: search_with_unfused; where that raises, the search alone (an unfused comparison
 *  with no legal schedule is derive's error to raise, not a reason to price the side infinitely
 *  slow); where that raises too, an infinite objective. Raises nothing of its own. */
WeighedSearch weigh_search(const Program& p, const Diagram& d, const SizeMap& sizes, const Hardware& hw, const ModelOptions& opt,
                           const SearchOptions& so);

/** An objective value as the passes' steps print it: "12.3 us" (time), "1.2 MB into SMEM" (bytes),
 *  or "nothing fits" where it is infinite (no legal schedule). */
std::string objective_text(double v, const SearchOptions& so);

}  // namespace napkin
