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
std::string kernel_illegal(const Diagram& d, const ModelOptions& opt, const std::vector<const StatementWeave*>& stmts, const KernelPlan& k,
                           const std::set<std::string>& escaping, std::vector<LemmaUse>* lemmas = nullptr);

/** Whether a kernel of `stmts` (its outputs leaving it: `escaping`) may group `axis` (paper §2.3):
 *  every statement touching it is woven over it, or reduces it by a contraction the atomic-sum
 *  lemma lets the blocks add up in global memory (derive/lemmas.hpp atomic_problem; its dtype the
 *  storage dtype under `opt`), with another fused statement woven over it. */
bool groupable_axis(const Diagram& d, const ModelOptions& opt, const std::vector<const StatementWeave*>& stmts, const std::string& axis,
                    const std::set<std::string>& escaping);

/** The rule of a call (derive-fusion): a kernel holding a call of another diagram (`stmts`, the
 *  statements of plan `k`) holds nothing else and has no directive but `fuse`. Empty when legal,
 *  else the reason. */
std::string call_illegal(const std::vector<const StatementWeave*>& stmts, const KernelPlan& k);

/** The rules of a `warps` directive (derive-warp-recursion): at most 32 warps per thread block;
 *  `pingpong` with 8 warps (two consumer warpgroups). Empty when legal, else the reason. */
std::string warps_illegal(const Directive& warps);

/** The rules of cluster directive `dir` of plan `k` on `hw` (derive-cluster): clusters need the
 *  hardware's thread-block clusters, 2 blocks, one per kernel, along an axis grouped by more than
 *  1. Empty when legal, else the reason; `on_axis` (when given) says whether the reason is about
 *  the clustered axis (located at its name) rather than the directive. */
std::string cluster_illegal(const KernelPlan& k, const Directive& dir, const Hardware& hw, bool* on_axis = nullptr);

}  // namespace napkin
