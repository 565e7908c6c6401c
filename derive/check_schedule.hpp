/** \file check_schedule.hpp
 *  Checks a schedule against its diagram and a hardware description, and reports every illegal
 *  move as a located diagnostic (in the schedule file) that names the reason:
 *  - each statement in exactly one kernel, kernels in dataflow order (a kernel may read only what
 *    earlier kernels produce), a call alone in its kernel;
 *  - group (and weave) only on an axis every fused operation is woven over (paper §2.3);
 *  - stream only where the lemma library makes every fused operation streamable (paper §3, the
 *    Fusion Theorem, App. A.1), e.g. "softmax is not streamable along x: its output is indexed by
 *    x; stream it together with the contraction that consumes it";
 *  - the resident set fits SMEM and the register file (says by how many bytes it does not).
 *  Returns the lemmas used per kernel, or nullopt after reporting errors.
 */
#pragma once
#include <optional>
#include <set>
#include <vector>

#include "derive/lemmas.hpp"
#include "diagrams/schedule.hpp"
#include "perfmodel/cost.hpp"

namespace napkin {

struct CheckedSchedule {
  std::vector<std::vector<LemmaUse>> lemmas;  ///< per kernel (empty when it streams nothing)
  ScheduleCost cost;
};

std::optional<CheckedSchedule> check_schedule(const Program& p, const Diagram& d, const Schedule& s,
                                              const SizeMap& sizes, const Hardware& hw, const ModelOptions& opt,
                                              DiagnosticEngine& diags);

/** Arrays computed by `mine` that leave the kernel: read by other statements, or outputs. */
std::set<std::string> escaping_arrays(const Diagram& d, const std::vector<const StatementWeave*>& mine,
                                      const std::vector<StatementWeave>& all);

/** The legality rules without the fit check, for the search: empty when legal, else the reason. */
std::string kernel_illegal(const std::vector<const StatementWeave*>& stmts, const KernelPlan& k,
                           const std::set<std::string>& escaping, std::vector<LemmaUse>* lemmas = nullptr);

}  // namespace napkin
