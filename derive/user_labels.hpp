/** \file user_labels.hpp
 *  Labels a user writes in a diagram are constraints the search keeps:
 *  - `axis a = N group g`: every kernel that computes along a groups it by g (`group 1`: weave);
 *  - `axis a = N stream s`: every kernel that reduces or normalises a streams it by s;
 *  - `axis a = N ... warps w`: every kernel has w warps per thread block;
 *  - `S[..] @hbm = ...` (or a read `S@hbm`): S leaves its kernel (is stored in HBM); `@reg` or
 *    `@smem`: S stays inside its kernel (fused with its readers) at that level.
 *  Labels that cannot hold whatever the schedule are located errors (user_labels()); labels that
 *  no schedule fitting the hardware keeps are a located error from the search.
 */
#pragma once
#include <map>
#include <set>
#include <string>

#include "diagrams/diagnostics.hpp"
#include "diagrams/program.hpp"
#include "diagrams/sizes.hpp"
#include "diagrams/weave.hpp"
#include "perfmodel/cost.hpp"

namespace napkin {

/** A user error about a place in an input file, raised deep in the search: what() is the rendered
 *  diagnostic (`file:line:col: error: ...`, the line and a caret); the CLI prints it as it is and
 *  exits with status 1. */
struct LocatedUserError : UserError {
  explicit LocatedUserError(const Diagnostic& d) : UserError(render_diagnostic(d)) {}
  /** Every diagnostic `diags` holds, rendered in order. */
  explicit LocatedUserError(const DiagnosticEngine& diags) : UserError(diags.render()) {}
};

/** A label as written: its value and where. */
template <class T>
struct Written {
  T value;
  SourceLoc loc;
};

/** The constraints written in a diagram (empty maps when none). */
struct UserLabels {
  std::map<std::string, Written<std::int64_t>> group, stream;  ///< per axis
  std::optional<Written<std::int64_t>> warps;
  std::map<std::string, Written<MemLevel>> level;  ///< per statement result
  bool empty() const { return group.empty() && stream.empty() && !warps && level.empty(); }
  /** Where the first constraint is written (for an error when no schedule keeps them). */
  SourceLoc first() const;
};

/** Reads the labels of `d` as constraints and reports, as located errors, those that cannot hold
 *  whatever the schedule: a group on an axis some statement reduces, a stream on one no statement
 *  reduces or normalises, sizes beyond the axis, a level other than HBM on an input or output,
 *  `@l2`, an input read from registers, a `cluster` (not a constraint napkin keeps), two levels
 *  for one array. */
UserLabels user_labels(const Diagram& d, const std::vector<StatementWeave>& weave, const SizeMap& sizes,
                       DiagnosticEngine& diags);

/** Empty when kernel `plan` of statements `stmts` (`escaping`: those that leave it), priced as
 *  `cost`, keeps `labels`; else the reason, naming the label. A call kernel keeps every partition
 *  label (its callee is derived on its own). */
std::string kernel_breaks_labels(const UserLabels& labels, const std::vector<const StatementWeave*>& stmts,
                                 const std::set<std::string>& escaping, const KernelPlan& plan, const KernelCost& cost);

}  // namespace napkin
