/** \file labelled.hpp
 *  The labelled IR: a diagram relabelled kernel by kernel. Each kernel of a schedule is a diagram
 *  of its own, named after the kernel: every axis of the source diagram; as inputs the arrays the
 *  kernel reads from outside (the source's inputs and earlier kernels' results, in their storage
 *  dtype); its statements; as outputs the arrays that leave it. Its schedule is written as labels:
 *
 *      weave a        ->  axis a = N group 1
 *      group a by g   ->  axis a = N group g
 *      stream a by s  ->  axis a = N stream s          (`stream s twice` for two passes)
 *      warps w        ->  `warps w` on the axis the warps split (the first group label, else the
 *                         first stream label, else the kernel's first axis)
 *      cluster a by c ->  axis a = N group g cluster c
 *      levels         ->  `in X : bf16 @hbm`, `X@smem` where read, `S @reg = ...`, `out O @hbm`
 *
 *  The passes of derive/passes/ write these labels (derive/pipeline.hpp runs them, for every
 *  candidate the search prices and for the derivation of the chosen one); schedule_of() reads
 *  them back, so that a schedule file is exactly the printed form of the labels:
 *  schedule_of(labelled_kernels(s)) is `s` in canonical directive order (fuse, weave, groups and
 *  streams in axis order, warps, cluster), and the derived schedules are canonical.
 */
#pragma once
#include <set>
#include <string>
#include <vector>

#include "diagrams/printer.hpp"
#include "diagrams/program.hpp"
#include "diagrams/schedule.hpp"
#include "diagrams/weave.hpp"
#include "lower/options.hpp"

namespace napkin {

/** The unlabelled diagram of the kernel that computes `statements` (names, in schedule order) of
 *  `d`, named `name`: the fusion pass's rewrite. `weave` is the weave analysis of `d`. Raises
 *  nothing; the statements must exist (NAPKIN_ASSERT). */
Diagram kernel_diagram(const Program& p, const Diagram& d, const std::vector<StatementWeave>& weave,
                       const std::vector<std::string>& statements, const std::string& name, const ModelOptions& opt);

/** Axis `name` of a kernel diagram, to be labelled (NAPKIN_ASSERT that it exists). */
AxisDecl& axis_of(Diagram& k, const std::string& name);

/** Writes on kernel diagram `k` the labels of `plan`'s directives of kind `kind` (weave and group:
 *  `group`; stream: `stream` and `twice`; warps: `warps` on the axis the split runs along;
 *  cluster: `cluster`); fuse writes nothing (the kernel diagram's statements are the fusion). */
void write_labels(Diagram& k, const KernelPlan& plan, Directive::Kind kind);

/** The kernel's schedule written as labels on its (unlabelled) diagram `k`, as the passes write
 *  them, levels excepted (those come from the model: derive-level-assignment). */
void write_plan_labels(Diagram& k, const KernelPlan& plan);

/** The kernel plan that the labels of kernel diagram `k` say, directives in canonical order.
 *  Reports a located error (and returns nullopt) where the labels cannot form a plan: `warps` on
 *  two axes, a `cluster` on an axis without a group label. */
std::optional<KernelPlan> plan_of(const Diagram& k, DiagnosticEngine& diags);

/** Every kernel of schedule `s` of `d` as a labelled kernel diagram (levels not written). */
std::vector<Diagram> labelled_kernels(const Program& p, const Diagram& d, const Schedule& s, const ModelOptions& opt);

/** The printed form of labelled diagrams (`napkin derive --dump-after`): one file, a blank line
 *  between diagrams; it parses back to the same labels. */
std::string print_labelled(const std::vector<Diagram>& diagrams);

/** The schedule the labelled kernels say (name and diagram as given); nullopt after reporting. */
std::optional<Schedule> schedule_of(const std::vector<Diagram>& kernels, const std::string& name,
                                    const std::string& diagram, DiagnosticEngine& diags);

}  // namespace napkin
