/** \file rewrite_weighing.hpp
 *  What the passes that rewrite the diagram before the search share (derive-split-reduction,
 *  derive-atomic-accumulation, derive-operand-relayout): fresh names for the arrays a rewrite
 *  adds, and the weighing of candidate rewrites against the diagram as given by the search's
 *  objective (seconds, or bytes into SMEM), each side searched once.
 *
 *  The chain. derive() runs the passes one after another on the diagram the previous one kept;
 *  each hands on the search of the diagram it kept (`kept`), and the next takes it as the
 *  search of its given diagram (`prior`) instead of searching that diagram again. The plans'
 *  specs point into the diagram searched, so a search travels with the diagram it belongs to.
 */
#pragma once
#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "derive/pass.hpp"
#include "derive/search.hpp"

namespace napkin {

/** Every name a rewrite of `d` must avoid: the program's diagrams, and `d`'s axes, inputs and
 *  statements. */
std::set<std::string> names_in_use(const Program& p, const Diagram& d);

/** The first of `base`, `base2`, `base3`, ... not in `used`; inserted into `used`. */
std::string fresh_name(std::set<std::string>& used, const std::string& base);

/** `names` joined by ", " (the steps' subject lists). */
std::string joined_names(const std::vector<std::string>& names);

/** One candidate rewrite of a diagram: the rewritten diagram, the axis it is about (empty where
 *  none), the arrays it adds, and its search once weighed. */
struct RewriteCandidate {
  std::shared_ptr<const Diagram> diagram;
  std::string axis;
  std::vector<std::string> names;
  WeighedSearch weighed;
};

/** The outcome of weigh_rewrites: the given diagram's search, and the index of the candidate
 *  kept (the one with the least objective, strictly below the given diagram's), if any. */
struct RewriteWeighing {
  WeighedSearch given;
  std::optional<std::size_t> best;
};

/** Searches each candidate of `candidates` (filling its `weighed`) and the given diagram `d`
 *  (unless `prior`, the search of `d` handed on by the pass before, is given), and keeps the
 *  fastest. A candidate for which `usable` returns false (called after its search) is never
 *  kept: the rewrite's own reason to exist did not hold in its best schedule. Ties keep the
 *  given diagram, then the earlier candidate. Raises nothing of its own (weigh_search). */
RewriteWeighing weigh_rewrites(const Program& p, const Diagram& d, std::vector<RewriteCandidate>& candidates, const SizeMap& sizes,
                               const Hardware& hw, const ModelOptions& opt, const SearchOptions& so, std::optional<WeighedSearch> prior,
                               const std::function<bool(const RewriteCandidate&)>& usable = {});

/** What a rewrite before the search returns: the diagram kept (a rewrite, or null for the
 *  input), the steps that say what was weighed, and the search of the diagram kept (the next
 *  pass's `prior`; derive() takes the last one instead of searching again). The plans' specs in
 *  `kept` point into `*rewritten`, else into the input diagram object itself. */
struct RewriteResult {
  std::shared_ptr<const Diagram> rewritten;  ///< null: the input diagram is kept
  std::vector<Step> steps;
  /** The kept side's search, or `prior` handed through where no candidate applies. */
  std::optional<WeighedSearch> kept;
  bool changed() const { return rewritten != nullptr; }
};

/** Sets `out.rewritten` and `out.kept` from weigh_rewrites' outcome `w` over `candidates`: the
 *  kept candidate's diagram and search, else the given diagram's search (moved out of both). */
void keep_weighed(RewriteResult& out, RewriteWeighing& w, std::vector<RewriteCandidate>& candidates);

/** The search of `d`: `prior` where given, else weigh_search of `d`. */
WeighedSearch given_search(const Program& p, const Diagram& d, const SizeMap& sizes, const Hardware& hw, const ModelOptions& opt,
                           const SearchOptions& so, std::optional<WeighedSearch> prior);

}  // namespace napkin
