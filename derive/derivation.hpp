/** \file derivation.hpp
 *  The derivation pipeline behind `napkin derive`: search the best schedule and the best unfused
 *  one, then run every pass of the registry, in order, over the chosen schedule to produce the
 *  derivation log and the labelled IR after each pass; compute the I/O lower bound for comparison.
 */
#pragma once
#include "derive/pass.hpp"
#include "diagrams/lift.hpp"

namespace napkin {

struct IoLowerBound {
  double hbm_bytes = 0;   ///< compulsory: every input read once, every output written once
  double smem_bytes = 0;  ///< into a fast memory of the SMEM's size: Hong & Kung for contractions, Saha & Ye for attention
  std::string formula;
};

struct Derivation {
  SearchResult chosen, unfused;
  std::vector<Step> steps;
  /** The labelled IR after each pass of the registry, in its order: the pass's name and the
   *  labelled diagrams (derive/labelled.hpp): the source diagram alone after the diagram-wide pass,
   *  one diagram per kernel of `chosen` after each per-kernel pass. The last is the derived
   *  labelling; schedule_of() of it is `chosen.schedule`. */
  std::vector<std::pair<std::string, std::vector<Diagram>>> after;
  IoLowerBound bound;
  std::vector<std::pair<std::string, std::shared_ptr<Derivation>>> callees;  ///< per call statement
  /** Set in a callee's derivation: the callee lifted over the call's woven axes (diagrams/lift.hpp),
   *  the diagram this derivation is of; its kernels run over the woven axes as batch axes. */
  std::shared_ptr<const LiftedCallee> lifted;
  /** The diagram the schedule is of when a rewrite before the search changed the one given
   *  (derive-contraction-order: new statements for pairwise contractions; derive-operand-relayout:
   *  K-major copies of 8-bit operands); null when unchanged. */
  std::shared_ptr<const Diagram> rewritten;
  /** The diagram `chosen` and `unfused` schedule: `rewritten`, or `original` (the one derived). */
  const Diagram& diagram(const Diagram& original) const { return rewritten ? *rewritten : original; }
};

/** Derives `d` at `sizes` on `hw`. First a statement holding several calls becomes one call per
 *  statement (diagrams/call_statements.hpp), then every contraction of three or more operands is split
 *  into pairwise ones (order_contractions: the new diagram is `rewritten`, its steps lead the
 *  log). Each call of another diagram is derived recursively: its callee
 *  lifted over the call's woven axes (lift_call), at the sizes the call binds; the call kernel
 *  costs what that derivation costs (one run covers every woven index). Raises UserError when
 *  nothing fits or a call cannot be lifted. */
Derivation derive(const Program& p, const Diagram& d, const SizeMap& sizes, const Hardware& hw,
                  const ModelOptions& opt = {}, const SearchOptions& so = {});

/** The derivation of a given schedule (`given`, checked by check_schedule and turned into a
 *  SearchResult by result_of): `given` becomes the chosen schedule; the unfused schedule, the
 *  callees, the steps and the bound are derived as by derive(), of `given.rewritten` where set
 *  (then also the derivation's `rewritten`), else of `d`. Raises UserError as derive(), and
 *  for a statement holding more than one call (derive() splits those, diagrams/call_statements.hpp;
 *  a hand-written schedule names the statements as written). */
Derivation derive_given(const Program& p, const Diagram& d, const SizeMap& sizes, const Hardware& hw, SearchResult given,
                        const ModelOptions& opt = {}, const SearchOptions& so = {});

/** Compulsory traffic and the I/O lower bound at the SMEM level (bytes). Matmul-like
 *  contractions: 2 * batch * a * b * c / sqrt(M) elements (Hong & Kung 1981; Smith et al. 2019);
 *  a softmax between two contractions (attention): batch * q * x * d^2 / M (Saha & Ye 2024). */
IoLowerBound io_lower_bound(const Program& p, const Diagram& d, const SizeMap& sizes, const Hardware& hw,
                            const ModelOptions& opt);

}  // namespace napkin
