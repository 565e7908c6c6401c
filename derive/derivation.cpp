#include "derive/derivation.hpp"

#include <cmath>
#include <cstdio>
#include <map>
#include <tuple>

#include "derive/passes/contraction_order.hpp"
#include "derive/passes/operand_relayout.hpp"
#include "derive/passes/atomic_accumulation.hpp"
#include "derive/passes/split_reduction.hpp"
#include "derive/passes/bind_reduction.hpp"
#include "diagrams/call_statements.hpp"
#include "lower/call_arguments.hpp"
#include "perfmodel/simt_cost.hpp"
#include "derive/labelled.hpp"
#include "derive/pipeline.hpp"
#include "derive/registry.hpp"
#include "diagrams/graph_view.hpp"
#include "diagrams/printer.hpp"

namespace napkin {

std::string human_bytes(double b) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (std::fabs(b) >= 1000 && u < 4) b /= 1000, ++u;
  char buf[32];
  std::snprintf(buf, sizeof buf, u == 0 ? "%.0f %s" : "%.3g %s", b, units[u]);
  return buf;
}

IoLowerBound io_lower_bound(const Program& p, const Diagram& d, const SizeMap& sizes, const Hardware& hw,
                            const ModelOptions& opt) {
  IoLowerBound lb;
  auto elements = [&](const AxisList& axes) { return static_cast<double>(product(sizes, axes)); };
  for (const auto* in : d.inputs()) lb.hbm_bytes += elements(in->axes) * dtype_bits(storage_dtype(d, in->name, opt)) / 8.0;
  for (const auto* o : d.outputs())
    if (const auto* ax = d.array_axes(o->name)) lb.hbm_bytes += elements(*ax) * dtype_bits(storage_dtype(d, o->name, opt)) / 8.0;
  DType compute = opt.dtype ? *opt.dtype : (d.inputs().empty() ? DType::fp32 : d.inputs().front()->dtype);
  double bytes = dtype_bits(compute) / 8.0;
  double m = (opt.two_level ? opt.two_level_capacity_bytes : hw.smem_max_per_block_bytes) / bytes;
  Typer typer(d, p.diagrams, nullptr);
  double best = 0;
  for (const auto* s : d.statements())
    walk(*s->expr, [&](const Expr& n) {
      if (n.kind != Expr::Kind::apply || n.op != Op::contract || n.args.size() != 2 || n.axes.empty()) return;
      // Only contractions of the diagram's inputs: an intermediate operand (P in attention) may
      // never exist in memory, and a bound on reading it would not bound the diagram.
      for (const auto& arg : n.args)
        if (arg->kind != Expr::Kind::ref || !d.find_input(arg->name)) return;
      auto a = typer.axes_of(*n.args[0]), b = typer.axes_of(*n.args[1]);
      if (!a || !b) return;
      double rows = 1, cols = 1, batch = 1, depth = elements(n.axes);
      for (const auto& x : *a)
        if (!contains(n.axes, x)) (contains(*b, x) ? batch : rows) *= static_cast<double>(sizes.at(x));
      for (const auto& x : *b)
        if (!contains(n.axes, x) && !contains(*a, x)) cols *= static_cast<double>(sizes.at(x));
      // Deep contractions (k^2 >= M): 2abk/sqrt(M) (Hong & Kung; Smith et al. 2019). Shallow ones,
      // where full-depth tiles fit: a b k^2 / M (the regime of Saha & Ye 2024 for attention, M >= d^2).
      double term = depth * depth >= m ? 2 * batch * rows * cols * depth / std::sqrt(m) : batch * rows * cols * depth * depth / m;
      if (term * bytes > best) {
        best = term * bytes;
        lb.formula = depth * depth >= m ? "2·batch·a·b·k/sqrt(M) for contract over " + n.axes.front() + " in " + s->name
                                        : "batch·a·b·k²/M for contract over " + n.axes.front() + " in " + s->name;
      }
    });
  lb.smem_bytes = std::max(best, lb.hbm_bytes);
  if (best < lb.hbm_bytes) lb.formula = "compulsory: every input read once, every output written once";
  return lb;
}

namespace {

/** Callee derivations by lifted callee (its printed text) and sizes: a diagram called twice alike
 *  at the same sizes (the two RMSNorms of a transformer block), or by both the chosen and the
 *  unfused schedule, is derived once. */
using CalleeCache = std::map<std::pair<std::string, SizeMap>, std::shared_ptr<Derivation>>;

/** The copies of the call's arguments its callee cannot read in place (lower/call_arguments.hpp),
 *  priced as the SIMT kernels the call strategy emits for them, added to the call's kernel. */
void add_argument_copies(const Diagram& d, const Statement& s, const Expr& call, const std::vector<AxisList>& args,
                         const LiftedCallee& lifted, const CallShape& shape, const SizeMap& sizes, const Hardware& hw,
                         const ModelOptions& opt, KernelCost& cost) {
  const auto copies = call_argument_copies(d, s, call, args, lifted, shape, opt);
  if (copies.empty()) return;
  std::vector<std::string> names;
  std::string why;
  for (const auto& c : copies) {
    names.push_back(c.buffer);
    why += (why.empty() ? "" : "; ") + std::string("argument ") + std::to_string(c.index + 1) + ", " + c.reason;
  }
  const SimtCost sc = price_simt(with_argument_copies(d, s, call, copies), names, sizes, hw, opt);
  cost.t_total += sc.t_total;
  cost.hbm_bytes += sc.hbm_bytes;
  cost.flops_fp32 += sc.flops_fp32;
  cost.bound += ", after " + std::to_string(copies.size()) + " SIMT cop" + (copies.size() == 1 ? "y" : "ies") + " of its arguments (" + why + ")";
}

/** A call kernel costs what the derivation of its callee, lifted over the call's woven axes, costs. */
void add_callees(const Program& p, const Diagram& d, const SizeMap& sizes, const Hardware& hw, const ModelOptions& opt,
                 const SearchOptions& so, SearchResult& r, Derivation* keep, CalleeCache& cache) {
  Typer typer(d, p.diagrams, nullptr);
  r.cost.t_total = r.cost.hbm_bytes = r.cost.l2_to_smem_bytes = r.cost.flops = 0;
  for (auto& kc : r.kernels) {
    const auto fused = kc.plan.fused();
    const Statement* s = d.find_statement(fused.front());
    const Expr* call = nullptr;
    walk(*s->expr, [&](const Expr& n) {
      if (!call && n.kind == Expr::Kind::apply && n.op == Op::call) call = &n;
    });
    if (call) {
      std::vector<AxisList> args;
      for (const auto& a : call->args) args.push_back(*typer.axes_of(*a));
      CallShape shape = *typer.call_shape(*call, args);
      std::shared_ptr<const LiftedCallee> lifted = std::make_shared<const LiftedCallee>(lift_call(p, *call, shape, args, sizes, s->name));
      SizeMap bound;
      for (const auto& [axis, caller] : lifted->caller_axis) bound[axis] = sizes.at(caller);
      DiagnosticEngine diags;
      SizeMap inner = *resolve_sizes(lifted->diagram, bound, diags);
      File text;
      text.diagrams.push_back(lifted->diagram);
      auto& sub = cache[{print_file(text), inner}];
      if (!sub) {
        sub = std::make_shared<Derivation>(derive(p, lifted->diagram, inner, hw, opt, so));
        // Keeps the diagram the derivation points into: the lift, as its own derivation rewrote it.
        if (sub->rewritten) {
          LiftedCallee as_derived = *lifted;
          as_derived.diagram = *sub->rewritten;
          lifted = std::make_shared<const LiftedCallee>(std::move(as_derived));
        }
        sub->lifted = lifted;
      }
      kc.cost.t_total = sub->chosen.cost.t_total;
      kc.cost.hbm_bytes = sub->chosen.cost.hbm_bytes;
      kc.cost.l2_to_smem_bytes = sub->chosen.cost.l2_to_smem_bytes;
      kc.cost.flops_tensor = sub->chosen.cost.flops;
      kc.cost.flops_fp32 = 0;
      kc.cost.bound = "as derived for " + sub->lifted->diagram.name;
      add_argument_copies(d, *s, *call, args, *sub->lifted, shape, sizes, hw, opt, kc.cost);
      if (keep) keep->callees.emplace_back(s->name, sub);
    }
    r.cost.t_total += kc.cost.t_total;
    r.cost.hbm_bytes += kc.cost.hbm_bytes;
    r.cost.l2_to_smem_bytes += kc.cost.l2_to_smem_bytes;
    r.cost.flops += kc.cost.flops_tensor + kc.cost.flops_fp32;
  }
  r.cost.kernels.clear();
  for (const auto& kc : r.kernels) r.cost.kernels.push_back(kc.cost);
}

}  // namespace

namespace {

/** derive()'s steps after the search: callees, passes, bound. */
Derivation complete(const Program& p, const Diagram& d, const SizeMap& sizes, const Hardware& hw, const ModelOptions& opt,
                    const SearchOptions& so, Derivation out) {
  CalleeCache cache;
  add_callees(p, d, sizes, hw, opt, so, out.chosen, &out, cache);
  add_callees(p, d, sizes, hw, opt, so, out.unfused, nullptr, cache);
  auto weave = weave_analysis(p, d);
  PassContext ctx{p, d, sizes, hw, opt, weave, &out.unfused};
  const std::size_t kernels = out.chosen.kernels.size();
  std::vector<std::size_t> per_kernel;  // indices into `after` of the per-kernel passes, in order
  for (const auto& pass : pass_registry()) {
    if (pass.per_kernel) {
      per_kernel.push_back(out.after.size());
      out.after.push_back({pass.name, std::vector<Diagram>(kernels, d)});
      continue;
    }
    Diagram ir = d;
    const KernelPlan none;
    KernelCandidate whole(none);
    auto steps = pass.run(ctx, whole, ir);
    out.steps.insert(out.steps.end(), steps.begin(), steps.end());
    out.after.push_back({pass.name, {std::move(ir)}});
  }
  for (std::size_t k = 0; k < kernels; ++k) {
    const KernelChoice& chosen = out.chosen.kernels[k];
    const KernelPlan& plan = chosen.plan;
    const Statement* s = d.find_statement(plan.fused().front());
    bool call = false;
    walk(*s->expr, [&](const Expr& n) { call |= n.kind == Expr::Kind::apply && n.op == Op::call; });
    if (call) {
      out.steps.push_back({"derive-fusion", plan.name, "call " + s->name,
                           "composition: the callee, lifted over the call's woven axes, is derived on its own",
                           "its kernels run the woven axes as batch axes; see its derivation below"});
      Diagram ir = kernel_diagram(p, d, weave, plan.fused(), plan.name, opt);  // the call alone; its callee has its own labels
      for (std::size_t i : per_kernel) out.after[i].second[k] = ir;
      continue;
    }
    // The same pipeline the search priced the kernel with, now with the model's price: the steps and the levels.
    KernelPipeline run = run_kernel_pipeline(ctx, plan, &chosen, true);
    NAPKIN_ASSERT(run.refused.empty()) << run.refused_by << " refuses kernel '" << plan.name << "' of the chosen schedule: " << run.refused;
    out.steps.insert(out.steps.end(), run.steps.begin(), run.steps.end());
    for (std::size_t j = 0; j < per_kernel.size(); ++j) out.after[per_kernel[j]].second[k] = std::move(run.after[j]);
  }
  out.bound = io_lower_bound(p, d, sizes, hw, opt);
  return out;
}

}  // namespace

Derivation derive(const Program& p, const Diagram& d, const SizeMap& sizes, const Hardware& hw, const ModelOptions& opt,
                  const SearchOptions& so) {
  Derivation out;
  bool split = false;  // one call per statement (diagrams/call_statements.hpp), then pairwise contractions
  Diagram one_call = one_call_per_statement(p, d, split);
  ContractionOrderResult ordered = order_contractions(p, one_call, sizes, hw, opt, so);
  if (ordered.changed || split) out.rewritten = std::make_shared<const Diagram>(std::move(ordered.diagram));
  // The split, atomic and relayout decisions search the diagram they return (out.diagram(d), or
  // their own rewrite) and hand that search on (derive/rewrite_weighing.hpp): each takes the last
  // one's instead of searching its given diagram again, and the last search is kept here (the
  // plans' specs point into that diagram, which out.rewritten or the caller keeps).
  SplitReductionResult splits = split_reductions(p, out.diagram(d), sizes, hw, opt, so);
  if (splits.changed()) out.rewritten = splits.rewritten;
  AtomicAccumulationResult atomics = atomic_accumulations(p, out.diagram(d), sizes, hw, opt, so, std::move(splits.kept));
  if (atomics.changed()) out.rewritten = atomics.rewritten;
  OperandRelayoutResult relaid = relayout_operands(p, out.diagram(d), sizes, hw, opt, so, std::move(atomics.kept));
  if (relaid.changed()) out.rewritten = std::move(relaid.rewritten);
  BindReductionResult bound = bind_reductions(p, out.diagram(d), sizes, hw, opt, so, std::move(relaid.kept));
  if (bound.changed()) out.rewritten = std::move(bound.rewritten);
  const Diagram& searched = out.diagram(d);  // owned by `out.rewritten` or the caller: stable across the move below
  if (bound.kept && bound.kept->searched) std::tie(out.chosen, out.unfused) = std::move(*bound.kept->searched);
  else std::tie(out.chosen, out.unfused) = search_with_unfused(p, searched, sizes, hw, opt, so);
  out.steps = std::move(ordered.steps);
  out.steps.insert(out.steps.end(), splits.steps.begin(), splits.steps.end());
  out.steps.insert(out.steps.end(), atomics.steps.begin(), atomics.steps.end());
  out.steps.insert(out.steps.end(), relaid.steps.begin(), relaid.steps.end());
  out.steps.insert(out.steps.end(), bound.steps.begin(), bound.steps.end());
  return complete(p, searched, sizes, hw, opt, so, std::move(out));
}

Derivation derive_given(const Program& p, const Diagram& d, const SizeMap& sizes, const Hardware& hw, SearchResult given,
                        const ModelOptions& opt, const SearchOptions& so) {
  Derivation out;
  out.rewritten = given.rewritten;  // a schedule of derive's rewrite (load_schedule) is of that diagram
  const Diagram& sd = out.diagram(d);
  bool split = false;
  const Diagram one_call = one_call_per_statement(p, sd, split);
  for (const auto* s : one_call.statements())
    if (!sd.find_statement(s->name))
      throw UserError("a hand-written schedule needs one call per statement, but '" + s->name.substr(0, s->name.rfind("_call")) +
                      "' holds more (or a call inside another's arguments): write each call in a statement of its own, or "
                      "derive without --schedule, which splits them (diagrams/call_statements.hpp)");
  out.unfused = search_with_unfused(p, sd, sizes, hw, opt, so).second;
  out.chosen = std::move(given);
  return complete(p, sd, sizes, hw, opt, so, std::move(out));
}

}  // namespace napkin
