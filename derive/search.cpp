#include "derive/search.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <limits>
#include <map>

#include "derive/divisibility.hpp"
#include "derive/labelled.hpp"
#include "derive/pipeline.hpp"
#include "derive/partition.hpp"
#include "derive/user_labels.hpp"
#include "diagrams/graph_view.hpp"
#include "diagrams/zero_band.hpp"

namespace napkin {

SearchResult result_of(const Schedule& s, const CheckedSchedule& checked) {
  SearchResult r;
  r.schedule = s;
  for (std::size_t k = 0; k < s.kernels.size(); ++k) r.kernels.push_back({s.kernels[k], checked.lemmas[k], checked.cost.kernels[k], 0});
  r.cost = checked.cost;
  return r;
}

double objective(const ScheduleCost& c, const SearchOptions& so) {
  return so.objective == SearchOptions::Objective::time ? c.t_total : c.l2_to_smem_bytes;
}

WeighedSearch weigh_search(const Program& p, const Diagram& d, const SizeMap& sizes, const Hardware& hw, const ModelOptions& opt,
                           const SearchOptions& so) {
  WeighedSearch out;
  out.objective = std::numeric_limits<double>::infinity();
  try {
    out.searched = search_with_unfused(p, d, sizes, hw, opt, so);
  } catch (const UserError&) {
    try {
      out.alone = search_schedule(p, d, sizes, hw, opt, so);
    } catch (const UserError&) {
    }
  }
  if (const SearchResult* r = out.best()) out.objective = objective(r->cost, so);
  return out;
}

std::string objective_text(double v, const SearchOptions& so) {
  if (!std::isfinite(v)) return "nothing fits";
  if (so.objective != SearchOptions::Objective::time) return human_bytes(v) + " into SMEM";
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.1f us", v * 1e6);
  return buf;
}

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

/** One kernel's statements as a diagram of their own: every axis; as inputs, the diagram's first
 *  input (it sets the compute dtype) and every array the statements read from outside; the
 *  statements, each labelled with its storage dtype; as outputs, the arrays that escape. The model
 *  sees in it exactly what it sees of the kernel in the whole diagram, at a price that does not
 *  grow with the diagram (cost_kernel walks every statement of the diagram it is given). */
struct KernelView {
  std::unique_ptr<Diagram> diagram;
  std::vector<StatementWeave> weave;
};

KernelView kernel_view(const Program& p, const Diagram& d, const std::vector<const StatementWeave*>& stmts,
                       const std::set<std::string>& escaping, const ModelOptions& opt) {
  KernelView v;
  v.diagram = std::make_unique<Diagram>();
  Diagram& k = *v.diagram;
  k.name = d.name;
  k.loc = d.loc;
  for (const auto* a : d.axes()) k.items.push_back(*a);
  std::set<std::string> mine;
  for (const auto* w : stmts) mine.insert(w->statement->name);
  std::vector<std::string> outside;
  if (auto ins = d.inputs(); !ins.empty()) outside.push_back(ins.front()->name);
  for (const auto* w : stmts)
    for (const auto& r : w->reads)
      if (!mine.count(r) && !contains(outside, r)) outside.push_back(r);
  for (const auto& r : outside) {
    InputDecl in;
    in.name = r;
    in.axes = *d.array_axes(r);
    in.axis_locs.assign(in.axes.size(), d.loc);
    in.dtype = storage_dtype(d, r, opt);
    in.zero_band = zero_band(d, r);  // what the whole diagram knows of its zeros (a gemm's band)
    in.loc = d.loc;
    k.items.push_back(std::move(in));
  }
  for (const auto* w : stmts) {
    Statement s = *w->statement;
    s.dtype = storage_dtype(d, s.name, opt);
    k.items.push_back(std::move(s));
  }
  for (const auto& e : escaping) {
    OutputDecl o;
    o.name = e;
    o.dtype = storage_dtype(d, e, opt);
    o.loc = d.loc;
    k.items.push_back(std::move(o));
  }
  v.weave = weave_analysis(p, k);
  return v;
}

class Searcher {
 public:
  Searcher(const Program& p, const Diagram& d, const SizeMap& sizes, const Hardware& hw, const ModelOptions& opt,
           const SearchOptions& so)
      : p_(p), d_(d), sizes_(sizes), hw_(hw), opt_(opt), so_(so), weave_(weave_analysis(p, d)) {
    n_ = weave_.size();
    for (std::size_t i = 0; i < n_; ++i) index_[weave_[i].statement->name] = i;
    preds_.assign(n_, {});
    for (std::size_t i = 0; i < n_; ++i)
      for (const auto& r : weave_[i].reads)
        if (auto it = index_.find(r); it != index_.end() && !contains(preds_[i], it->second)) preds_[i].push_back(it->second);
    DiagnosticEngine diags;
    labels_ = user_labels(d, weave_, sizes, diags);
    if (diags.has_errors()) throw LocatedUserError(diags);
  }

  /** Every statement its own kernel, in dataflow order (after run()). */
  SearchResult unfused() {
    SearchResult r;
    r.schedule.name = "unfused";
    r.schedule.diagram = d_.name;
    std::vector<bool> covered(n_, false);
    for (std::size_t done = 0; done < n_;) {
      for (std::size_t i = 0; i < n_; ++i) {
        if (covered[i] || std::any_of(preds_[i].begin(), preds_[i].end(), [&](std::size_t p) { return !covered[p]; })) continue;
        KernelChoice& c = choices_.at(single_.at(i));
        if (c.score == kInf && !labels_.empty()) {  // the comparison's unfused schedule need not keep the labels
          honour_labels_ = false;
          c = best_plan({i});
          honour_labels_ = true;
        }
        if (c.score == kInf) throw UserError("no legal unfused schedule of diagram '" + d_.name + "' fits " + hw_.name + last_problem_);
        r.schedule.kernels.push_back(c.plan);
        r.kernels.push_back(c);
        covered[i] = true;
        ++done;
      }
    }
    reprice_on_searched(r);
    name_kernels(r);
    r.cost = total_of(r.kernels);
    r.candidates_scored = 0;
    return r;
  }

  SearchResult run() {
    SearchResult r;
    r.schedule.name = "derived";
    r.schedule.diagram = d_.name;
    if (n_ == 0) return r;  // nothing to compute (inputs passed straight to outputs): no kernel
    Partitioner partitioner(partition_graph());
    exact_ = partitioner.exact();
    std::vector<PartitionCandidate> candidates = partitioner.candidates();
    single_.assign(n_, 0);
    for (std::size_t c = 0; c < candidates.size(); ++c) {
      choices_.push_back(best_plan(candidates[c].members));
      candidates[c].score = choices_.back().score;
      candidates[c].hbm = choices_.back().cost.hbm_bytes;
      if (candidates[c].members.size() == 1) single_[candidates[c].members.front()] = c;
    }
    // With a tolerance, partitions within it of the best (below the model's resolution) go to the
    // one moving fewer HBM bytes, unless that is slower than every statement alone.
    auto exact = partitioner.best(candidates, 0), tied = partitioner.best(candidates, 0.005);
    if (exact.empty() && !labels_.empty())
      throw LocatedUserError(Diagnostic{Severity::error, labels_.first(),
                                        "no schedule of diagram '" + d_.name + "' on " + hw_.name + " keeps the labels written in it" + last_problem_});
    if (exact.empty()) throw UserError("no legal schedule of diagram '" + d_.name + "' fits " + hw_.name + last_problem_);
    auto total = [&](const std::vector<std::size_t>& path) {
      double t = path.empty() ? kInf : 0;
      for (std::size_t c : path) t += choices_[c].score;
      return t;
    };
    double singles = 0;
    for (std::size_t i = 0; i < n_; ++i) singles += choices_[single_[i]].score;
    double t_exact = total(exact), t_tied = total(tied);
    const auto& path = t_tied <= t_exact * 1.005 && t_tied <= singles ? tied : exact;
    for (std::size_t c : path) {
      r.schedule.kernels.push_back(choices_[c].plan);
      r.kernels.push_back(choices_[c]);
    }
    reprice_on_searched(r);
    name_kernels(r);
    r.cost = total_of(r.kernels);
    r.candidates_scored = scored_;
    return r;
  }

 private:
  /** The schedule's cost from its kernels' costs, already computed by the search (a kernel's cost
   *  does not depend on the other kernels). */
  static ScheduleCost total_of(const std::vector<KernelChoice>& kernels) {
    ScheduleCost sc;
    for (const auto& k : kernels) {
      sc.kernels.push_back(k.cost);
      sc.t_total += k.cost.t_total;
      sc.hbm_bytes += k.cost.hbm_bytes;
      sc.l2_to_smem_bytes += k.cost.l2_to_smem_bytes;
      sc.flops += k.cost.flops_tensor + k.cost.flops_fp32;
    }
    return sc;
  }

  /** Dataflow and fusibility of the statements: linked through dataflow or through a shared
   *  operand (horizontal fusion: Q, K and V projections reading the same activations). */
  PartitionGraph partition_graph() const {
    PartitionGraph g;
    g.statements = n_;
    g.preds = preds_;
    g.linked = [this](std::size_t i, std::size_t j) {
      if (contains(preds_[i], j) || contains(preds_[j], i)) return true;
      for (const auto& r : weave_[i].reads)
        if (std::find(weave_[j].reads.begin(), weave_[j].reads.end(), r) != weave_[j].reads.end()) return true;
      return false;
    };
    for (const auto& w : weave_) {
      g.alone.push_back(w.has_call);
      std::vector<std::string> axes;
      bool reduces = false;
      for (const auto& [a, r] : w.roles) axes.push_back(a), reduces |= r.role == AxisRole::reduced;
      g.axes.push_back(std::move(axes));
      g.reduces.push_back(reduces);
    }
    return g;
  }

  static bool contains(const std::vector<std::size_t>& v, std::size_t x) { return std::find(v.begin(), v.end(), x) != v.end(); }

  // ---------------------------------------------------------------- best partition of one kernel
  /** The best plan of the kernel of statements `members` (ascending). Small diagrams are priced
   *  in place; larger ones on the kernel's own diagram (kernel_view), so that a price does not
   *  grow with the diagram. */
  KernelChoice best_plan(const std::vector<std::size_t>& members) {
    std::vector<const StatementWeave*> stmts;
    for (std::size_t i : members) stmts.push_back(&weave_[i]);
    std::set<std::string> escaping = escaping_arrays(d_, stmts, weave_);
    if (exact_) return best_plan_in(d_, weave_, stmts, escaping);
    KernelView view = kernel_view(p_, d_, stmts, escaping, opt_);
    std::vector<const StatementWeave*> own;
    for (const auto& w : view.weave) own.push_back(&w);
    return best_plan_in(*view.diagram, view.weave, own, escaping);
  }

  /** best_plan() with the kernel's statements `stmts` (pointing into `weave`, the weave analysis
   *  of `d`). */
  KernelChoice best_plan_in(const Diagram& d, const std::vector<StatementWeave>& weave,
                            const std::vector<const StatementWeave*>& stmts, const std::set<std::string>& escaping) {

    std::vector<std::string> axes, groupable, streamable_axes, two_pass_axes;
    std::vector<std::string> atomic_axes;  // groupable only by the atomic-sum lemma: offered where not streamed
    for (const auto* a : d.axes()) {
      bool touched = false, woven = true;
      for (const auto* w : stmts)
        if (w->touches(a->name)) touched = true, woven &= w->role(a->name) == AxisRole::woven;
      if (!touched) continue;
      axes.push_back(a->name);
      if (woven) groupable.push_back(a->name);
      else if (groupable_axis(d, opt_, stmts, a->name, escaping)) atomic_axes.push_back(a->name);
      if (!woven && streamable(stmts, a->name, escaping).ok) streamable_axes.push_back(a->name);
      else if (!woven && streamable(stmts, a->name, escaping, 2).ok) two_pass_axes.push_back(a->name);
    }
    KernelChoice best;
    best.score = kInf;
    best_steps_ = kInf;
    best_stages_ = -1;
    best_traffic_ = kInf;
    bool call = stmts.size() == 1 && stmts[0]->has_call;
    for (const auto& a : axes)  // a group label on an axis this kernel reduces: no plan keeps it
      if (honour_labels_ && labels_.group.count(a) && !std::count(groupable.begin(), groupable.end(), a) && !std::count(atomic_axes.begin(), atomic_axes.end(), a)) {
        last_problem_ = ": no kernel keeps 'group " + std::to_string(labels_.group.at(a).value) + "' on " + a;
        return best;
      }
    std::vector<std::pair<std::vector<std::string>, int>> streams{{{}, 1}};
    if (!call) {
      for (const auto& a : streamable_axes) streams.push_back({{a}, 1});
      for (const auto& a : two_pass_axes) streams.push_back({{a}, 2});
      // A reduction over several axes folds over all of them, nested (outer chunks of 1).
      for (const auto* w : stmts)
        walk(*w->statement->expr, [&](const Expr& n) {
          if (n.kind != Expr::Kind::apply || n.axes.size() < 2 || (n.op != Op::contract && n.op != Op::sum)) return;
          std::vector<std::string> nested;
          for (const auto* a : d.axes())
            if (std::find(n.axes.begin(), n.axes.end(), a->name) != n.axes.end() &&
                std::find(streamable_axes.begin(), streamable_axes.end(), a->name) != streamable_axes.end())
              nested.push_back(a->name);
          if (nested.size() >= 2) streams.push_back({nested, 1});
        });
    }
    if (honour_labels_)  // a stream label on an axis this kernel reduces: only plans streaming it
      for (const auto& entry : labels_.stream) {
        const std::string& a = entry.first;  // a plain name: clang before 16 cannot capture a structured binding
        if (std::count(axes.begin(), axes.end(), a) && !std::count(groupable.begin(), groupable.end(), a))
          std::erase_if(streams, [&](const auto& st) { return std::find(st.first.begin(), st.first.end(), a) == st.first.end(); });
      }
    // `warps 8 pingpong` is not searched: priced as measured (its epilogue in series, session 34)
    // it never beats the cooperative split; schedules and `bench --candidates` still take it.
    std::vector<int> warp_options = call ? std::vector<int>{4} : std::vector<int>{4, 8};
    if (honour_labels_ && labels_.warps && !call) warp_options = {static_cast<int>(labels_.warps->value)};
    for (const auto& [st, passes] : streams) {
      std::vector<std::string> grouped = groupable;
      for (const auto& a : atomic_axes)
        if (std::find(st.begin(), st.end(), a) == st.end()) grouped.push_back(a);
      for (int warps : warp_options) search_tiles(d, weave, stmts, grouped, st, passes, warps, escaping, best, call);
    }
    return best;
  }

  std::vector<std::int64_t> sizes_for(std::int64_t extent, std::int64_t lcm, bool allow_one) {
    std::vector<std::int64_t> out;
    if (allow_one) out.push_back(1);
    if (so_.hardware_divisibility) {
      for (std::int64_t g = lcm; g < extent; g *= 2) out.push_back(g);
    } else {
      for (double g = 2; g < static_cast<double>(extent); g = std::ceil(g * 1.25)) out.push_back(static_cast<std::int64_t>(g));
    }
    out.push_back(extent);  // whole (one group along it)
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }

  /** The candidate's parameters for the passes (derive/pass.hpp): the directives of its moves:
   *  fuse `stmts`, weave the groupable axes of group size 1, group those of `g` (sizes along
   *  `groupable`, in order) below their extents, stream the outer `streams` by 1 and the innermost
   *  by `s` in `passes` passes, and `warps` warps (none for a call, one launch of its callee). */
  KernelPlan candidate_plan(const std::vector<const StatementWeave*>& stmts, const std::vector<std::string>& groupable, const std::vector<std::string>& streams,
                            int passes, int warps, bool call, const std::vector<std::int64_t>& g, std::int64_t s) const {
    KernelPlan k;
    Directive f;
    f.kind = Directive::Kind::fuse;
    for (const auto* w : stmts) f.names.push_back(w->statement->name);
    k.directives.push_back(f);
    Directive weave;
    weave.kind = Directive::Kind::weave;
    for (std::size_t i = 0; i < groupable.size(); ++i) {
      if (g[i] == 1 && sizes_.at(groupable[i]) > 1) weave.names.push_back(groupable[i]);
    }
    if (!weave.names.empty()) k.directives.push_back(weave);
    for (std::size_t i = 0; i < groupable.size(); ++i)
      if (g[i] > 1 && g[i] < sizes_.at(groupable[i])) {
        Directive gd;
        gd.kind = Directive::Kind::group;
        gd.names = {groupable[i]};
        gd.size = g[i];
        k.directives.push_back(gd);
      }
    for (std::size_t i = 0; i < streams.size(); ++i) {  // outer streams in chunks of 1, the innermost searched
      Directive sd;
      sd.kind = Directive::Kind::stream;
      sd.names = {streams[i]};
      sd.size = i + 1 == streams.size() ? s : 1;
      sd.passes = passes;
      k.directives.push_back(sd);
    }
    if (!call) {
      Directive wd;
      wd.kind = Directive::Kind::warps;
      wd.size = warps;
      k.directives.push_back(wd);
    }
    return k;
  }

  /** Scores plan `k` of `stmts` (one kernel of diagram `d` with weave `view_weave`, `escaping` its
   *  statements read elsewhere) and keeps it in `best` when better (near ties as below); sets
   *  *clusterable (when given) to whether the kernel may form clusters. Returns its score, or kInf
   *  when it does not fit or breaks the diagram's labels (last_problem_ then says why). */
  double consider(const Diagram& d, const std::vector<StatementWeave>& view_weave, const std::vector<const StatementWeave*>& stmts,
                  const std::set<std::string>& escaping, const KernelPlan& k, const std::vector<LemmaUse>& lemmas, bool* clusterable, KernelChoice& best) {
    Schedule one;
    one.diagram = d.name;
    one.kernels = {k};
    KernelCost c = cost_kernel(p_, d, view_weave, one, 0, sizes_, hw_, opt_);
    ++scored_;
    if (!c.problems.empty()) {
      last_problem_ = ": " + c.problems.front();
      return kInf;
    }
    if (honour_labels_ && !labels_.empty())
      if (std::string why = kernel_breaks_labels(labels_, stmts, escaping, k, c); !why.empty()) {
        last_problem_ = ": no kernel keeps " + why;
        return kInf;
      }
    if (clusterable) *clusterable = c.clusterable;
    ScheduleCost sc;
    sc.t_total = c.t_total;
    sc.l2_to_smem_bytes = c.l2_to_smem_bytes;
    double score = objective(sc, so_);
    // Near ties (within 0.1%) go to the candidate that moves fewer bytes into SMEM: the model's
    // time hides memory under compute, the hardware only partly does; then to the one with fewer
    // stream steps per block (each step is a pipeline handshake the model does not price: a
    // sigmoid-attention chunk of 16 and one of 128 tie on time and bytes).
    const double traffic = c.l2_to_smem_bytes + c.smem_read_bytes;
    double steps = 1;
    for (const auto& [axis, ap] : c.axes)
      if (ap.kind == AxisPlan::Kind::stream) steps *= static_cast<double>(ap.count);
    // Deeper pipelines first (more stages in flight hide more latency): a GEMM's chunk of 64
    // with 4 stages before one of 128 with 2.
    const double stages = c.spec && c.spec->tensor_cores() ? (c.spec->wgmma ? c.spec->wgmma_stages : c.spec->stages) : 0;
    // Before all of these, on a near tie a plan without a cluster beats one with: measured (H200,
    // sessions 46-47), clusters of 2 the model priced as ties ran no faster on GEMM 8192^3 and
    // rmsnorm_linear's and grouped_linear's GEMMs, and slower on the block's output projection X2
    // (contracting g, r, d): 624.9 us in clusters against 502.1 without in the block at s = 8192,
    // 486 against 408 alone. The multicast bytes saved do not pay for the blocks' lockstep.
    const bool clustered = k.cluster().has_value(), best_clustered = best.score < kInf && best.plan.cluster().has_value();
    const bool tie = score <= best.score * (1 + 1e-3);
    const bool same_traffic = traffic <= best_traffic_ * (1 + 1e-9);
    const bool cluster_breaks = tie && clustered != best_clustered;
    bool better = score < best.score * (1 - 1e-3) || (cluster_breaks && !clustered) ||
                  (!cluster_breaks && ((tie && traffic < best_traffic_ * (1 - 1e-9)) || (tie && same_traffic && stages > best_stages_) ||
                                       (tie && same_traffic && stages == best_stages_ && steps < best_steps_)));
    if (better) {
      best_traffic_ = traffic;
      best_stages_ = stages;
      best_steps_ = steps;
      best.plan = k;
      best.lemmas = lemmas;
      best.cost = c;
      best.score = score;
    }
    return score;
  }

  void search_tiles(const Diagram& d, const std::vector<StatementWeave>& view_weave, const std::vector<const StatementWeave*>& stmts, const std::vector<std::string>& groupable,
                    const std::vector<std::string>& streams, int passes, int warps, const std::set<std::string>& escaping,
                    KernelChoice& best, bool call) {
    std::string warp_axis;  // a woven axis: one that a statement reduces (lemma atomic-sum) splits no warps
    for (const auto& a : groupable)
      if (sizes_.at(a) >= 16 && std::all_of(stmts.begin(), stmts.end(), [&](const StatementWeave* w) { return !w->touches(a) || w->role(a) == AxisRole::woven; })) {
        warp_axis = a;
        break;
      }
    std::vector<std::string> hbm(escaping.begin(), escaping.end());
    for (const auto* w : stmts)
      for (const auto& r : w->reads)
        if (!index_.count(r) || std::none_of(stmts.begin(), stmts.end(), [&](const StatementWeave* x) { return x->statement->name == r; }))
          hbm.push_back(r);
    auto div = divisibility(p_, d, stmts, hbm, hw_, opt_, warps, warp_axis);
    auto lcm = [&](const std::string& a) -> std::int64_t {
      if (!so_.hardware_divisibility) return 1;
      auto it = div.find(a);
      return it == div.end() ? 1 : it->second.lcm;
    };
    std::vector<std::vector<std::int64_t>> options;
    for (const auto& a : groupable)  // a call is one launch of its callee: every axis whole
      options.push_back(call ? std::vector<std::int64_t>{sizes_.at(a)}
                             : honour_labels_ && labels_.group.count(a) ? std::vector<std::int64_t>{labels_.group.at(a).value}
                                                                        : sizes_for(sizes_.at(a), lcm(a), true));
    std::optional<std::string> stream;
    if (!streams.empty()) stream = streams.back();
    std::vector<std::int64_t> stream_sizes{0};
    if (stream) {
      stream_sizes = sizes_for(sizes_.at(*stream), lcm(*stream), false);
      stream_sizes.pop_back();  // streaming the whole axis in one chunk is keeping it whole
      if (honour_labels_ && labels_.stream.count(*stream)) stream_sizes = {labels_.stream.at(*stream).value};
      if (stream_sizes.empty()) return;
    }
    // Runs the passes on the candidate `params` (each checks its own move) and prices the plan the
    // labels they wrote say: what is priced is what the passes wrote. kInf when a pass refuses.
    const PassContext ctx{p_, d, sizes_, hw_, opt_, view_weave, nullptr};
    auto price = [&](const KernelPlan& params, bool* clusterable) -> double {
      KernelPipeline run = run_kernel_pipeline(ctx, params);
      if (!run.refused.empty()) return kInf;
      DiagnosticEngine diags;
      std::optional<KernelPlan> labelled = plan_of(run.labelled, diags);
      NAPKIN_ASSERT(labelled) << "the passes wrote labels that form no plan: " << diags.render();
      return consider(d, view_weave, stmts, escaping, *labelled, run.lemmas, clusterable, best);
    };
    auto evaluate = [&](const std::vector<std::int64_t>& g, std::int64_t s) -> double {
      KernelPlan k = candidate_plan(stmts, groupable, streams, passes, warps, call, g, s);
      bool clusterable = false;
      double score = price(k, &clusterable);
      const std::string problem = last_problem_;  // a variant's problem does not explain a failed search
      if (clusterable)  // a GEMM on the wgmma path: clusters of 2 along each grouped axis
        for (const auto& dir : k.directives) {
          if (dir.kind != Directive::Kind::group) continue;
          KernelPlan kc = k;
          Directive cd;
          cd.kind = Directive::Kind::cluster;
          cd.names = dir.names;
          cd.size = 2;
          kc.directives.push_back(cd);
          score = std::min(score, price(kc, nullptr));
        }
      last_problem_ = problem;
      return score;
    };
    // The tile grid (or coordinate descent over it), then (without hardware divisibility) a
    // pattern search by small steps.
    std::vector<std::int64_t> best_g;
    std::int64_t best_s = 0;
    double best_here = explore(options, stream_sizes, evaluate, best_g, best_s);
    if (so_.hardware_divisibility || best_here == kInf) return;
    pattern_search(groupable, stream, evaluate, best_g, best_s, best_here);
  }

  using Evaluate = std::function<double(const std::vector<std::int64_t>&, std::int64_t)>;

  /** Without hardware divisibility, refines the best tiles (`best_g`, and `best_s` along `stream`)
   *  by pattern search: every direction in {-1, 0, 1}^n (so that one tile can grow while another
   *  shrinks, along the capacity boundary), steps halving from 32 to 1, scored by `evaluate`. */
  void pattern_search(const std::vector<std::string>& groupable, const std::optional<std::string>& stream,
                      const Evaluate& evaluate, const std::vector<std::int64_t>& best_g,
                      std::int64_t best_s, double best_here) {
    std::vector<std::int64_t> x = best_g;
    if (stream) x.push_back(best_s);
    std::vector<std::int64_t> hi;
    for (const auto& a : groupable) hi.push_back(sizes_.at(a));
    if (stream) hi.push_back(sizes_.at(*stream) - 1);
    std::size_t dims = x.size(), directions = 1;
    for (std::size_t i = 0; i < dims; ++i) directions *= 3;
    for (std::int64_t step = 32; step >= 1; step /= 2)
      for (bool improved = true; improved;) {
        improved = false;
        for (std::size_t dir = 1; dir < directions; ++dir) {
          auto y = x;
          std::size_t code = dir;
          for (std::size_t i = 0; i < dims; ++i, code /= 3)
            y[i] = std::clamp<std::int64_t>(y[i] + (static_cast<std::int64_t>(code % 3) - 1) * step, 1, hi[i]);
          std::vector<std::int64_t> gg(y.begin(), y.begin() + static_cast<std::ptrdiff_t>(best_g.size()));
          double v = evaluate(gg, stream ? y.back() : 0);
          if (v < best_here) best_here = v, x = y, improved = true;
        }
      }
  }


  /** Most tile combinations (group sizes times stream sizes) tried one by one in a diagram larger
   *  searched by segments (partition.hpp); beyond it, coordinate descent. */
  static constexpr std::size_t kGridLimit = 64;

  /** The best of the tile combinations `options` (per grouped axis) x `stream_sizes` by
   *  `evaluate`: its score (kInf when none fits), and in `best_g`, `best_s` the combination.
   *  Every combination is tried for diagrams searched exactly, and for small grids. Otherwise, as
   *  the diagram's many candidate kernels would multiply a large grid: the diagonal (the i-th
   *  option of every axis together), then coordinate descent from its best point, one axis at a
   *  time over all its options, until no move improves (a local optimum of the grid). */
  double explore(const std::vector<std::vector<std::int64_t>>& options, const std::vector<std::int64_t>& stream_sizes,
                 const Evaluate& evaluate, std::vector<std::int64_t>& best_g, std::int64_t& best_s) {
    // Coordinates: the stream size first (it varies fastest in the grid), then each grouped axis.
    std::vector<std::vector<std::int64_t>> axes{stream_sizes};
    axes.insert(axes.end(), options.begin(), options.end());
    std::size_t grid = 1, longest = 0;
    for (const auto& a : axes) grid *= a.size(), longest = std::max(longest, a.size());
    double best = kInf;
    std::vector<std::size_t> at(axes.size(), 0);
    std::set<std::vector<std::size_t>> seen;  // descent revisits points: each is scored once
    auto point = [&](const std::vector<std::size_t>& ix) {
      if (!seen.insert(ix).second) return;
      std::vector<std::int64_t> g(options.size());
      for (std::size_t i = 0; i < options.size(); ++i) g[i] = options[i][ix[i + 1]];
      double v = evaluate(g, stream_sizes[ix[0]]);
      if (v < best) best = v, best_g = g, best_s = stream_sizes[ix[0]], at = ix;
    };
    std::vector<std::size_t> ix(axes.size(), 0);
    if (exact_ || grid <= kGridLimit) {
      while (true) {
        point(ix);
        std::size_t i = 0;
        while (i < ix.size() && ++ix[i] == axes[i].size()) ix[i++] = 0;
        if (i == ix.size()) return best;
      }
    }
    for (std::size_t k = 0; k < longest; ++k) {
      for (std::size_t i = 0; i < axes.size(); ++i) ix[i] = std::min(k, axes[i].size() - 1);
      point(ix);
    }
    // Tensor-core seeds: two grouped axes tiled (64 or 128, the option nearest), every other one
    // index at a time, the stream by the option nearest 64. A GEMM needs two tiled axes at once,
    // which the descent's one-axis moves cannot reach from a point with none (a per-group
    // projection Q[b,g,r,s,d] = contract(H, Wq; m) of a large diagram stayed SIMT).
    auto nearest = [&](std::size_t i, std::int64_t want) {
      std::size_t b = 0;
      for (std::size_t o = 0; o < axes[i].size(); ++o)
        if (std::llabs(axes[i][o] - want) < std::llabs(axes[i][b] - want)) b = o;
      return b;
    };
    for (std::size_t i = 1; i < axes.size(); ++i)
      for (std::size_t j = i + 1; j < axes.size(); ++j)
        for (const auto& [ti, tj] : {std::pair<std::int64_t, std::int64_t>{128, 128}, {128, 64}, {64, 128}}) {
          std::fill(ix.begin(), ix.end(), 0);
          ix[0] = nearest(0, 64), ix[i] = nearest(i, ti), ix[j] = nearest(j, tj);
          point(ix);
        }
    for (bool improved = best < kInf; improved;) {
      improved = false;
      for (std::size_t i = 0; i < axes.size(); ++i)
        for (std::size_t o = 0; o < axes[i].size(); ++o) {
          if (o == at[i]) continue;
          ix = at;
          ix[i] = o;
          double before = best;
          point(ix);
          improved |= best < before;
        }
    }
    return best;
  }

  /** Where the kernels were priced on kernel views (not the exact regime), prices them again on
   *  the searched diagram, so that their specs point into a diagram that outlives the search (the
   *  views are gone) at the same price. And in the whole schedule the kernels whose spec takes
   *  something from the kernels after them (lower_kernel_of: a flash_bwd kernel's causal skip
   *  writes only the zeros its readers read), which the search priced alone. Only the chosen
   *  kernels: once per schedule. */
  void reprice_on_searched(SearchResult& r) {
    for (std::size_t k = 0; k < r.kernels.size(); ++k) {
      const auto& spec = r.kernels[k].cost.spec;
      const bool readers = spec && spec->flash_bwd && !spec->flash_bwd->skip.empty();
      if (exact_ && !readers) continue;
      r.kernels[k].cost = cost_kernel(p_, d_, weave_, r.schedule, k, sizes_, hw_, opt_);
    }
  }

  void name_kernels(SearchResult& r) {
    std::map<std::string, int> used;
    for (std::size_t k = 0; k < r.schedule.kernels.size(); ++k) {
      auto fused = r.schedule.kernels[k].fused();
      std::string name = fused.size() == 1 ? fused[0] : fused.front() + "_to_" + fused.back();
      if (used[name]++) name += "_" + std::to_string(used[name]);
      r.schedule.kernels[k].name = name;
      r.kernels[k].plan.name = name;
      r.kernels[k].cost.name = name;
    }
  }

  const Program& p_;
  const Diagram& d_;
  const SizeMap& sizes_;
  const Hardware& hw_;
  const ModelOptions& opt_;
  const SearchOptions& so_;
  std::vector<StatementWeave> weave_;
  std::size_t n_ = 0;
  std::map<std::string, std::size_t> index_;
  std::vector<std::vector<std::size_t>> preds_;  ///< per statement: the statements it reads
  std::vector<KernelChoice> choices_;             ///< per candidate of the partitioner
  std::vector<std::size_t> single_;               ///< per statement: its candidate alone
  bool exact_ = false;                            ///< the partitioner's regime
  std::size_t scored_ = 0;
  double best_traffic_ = kInf;
  double best_steps_ = kInf;  ///< stream steps per block of the best candidate (a tie-break)
  double best_stages_ = -1;   ///< pipeline stages of the best candidate's priced path (a tie-break)
  std::string last_problem_;
  UserLabels labels_;           ///< constraints written in the diagram (user_labels.hpp)
  bool honour_labels_ = true;   ///< off while pricing the unfused comparison
};

}  // namespace

SearchResult search_schedule(const Program& p, const Diagram& d, const SizeMap& sizes, const Hardware& hw,
                             const ModelOptions& opt, const SearchOptions& so) {
  return Searcher(p, d, sizes, hw, opt, so).run();
}

std::pair<SearchResult, SearchResult> search_with_unfused(const Program& p, const Diagram& d, const SizeMap& sizes,
                                                          const Hardware& hw, const ModelOptions& opt, const SearchOptions& so) {
  Searcher s(p, d, sizes, hw, opt, so);
  SearchResult best = s.run();
  return {std::move(best), s.unfused()};
}

}  // namespace napkin
