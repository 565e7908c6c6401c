#include "derive/search.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "derive/divisibility.hpp"
#include "diagrams/graph_view.hpp"

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

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

class Searcher {
 public:
  Searcher(const Program& p, const Diagram& d, const SizeMap& sizes, const Hardware& hw, const ModelOptions& opt,
           const SearchOptions& so)
      : p_(p), d_(d), sizes_(sizes), hw_(hw), opt_(opt), so_(so), weave_(weave_analysis(p, d)) {
    n_ = weave_.size();
    graph_ = std::make_unique<NamedGraph>(dataflow_graph(d));
    for (std::size_t i = 0; i < n_; ++i) index_[weave_[i].statement->name] = i;
    preds_.assign(n_, 0);
    for (std::size_t i = 0; i < n_; ++i)
      for (const auto& r : weave_[i].reads)
        if (index_.count(r)) preds_[i] |= bit(index_[r]);
  }

  /** Every statement its own kernel, in dataflow order (after run()). */
  SearchResult unfused() {
    SearchResult r;
    r.schedule.name = "unfused";
    r.schedule.diagram = d_.name;
    if (n_ == 0) return r;
    std::uint64_t covered = 0;
    while (std::popcount(covered) < static_cast<int>(n_)) {
      for (std::size_t i = 0; i < n_; ++i) {
        if ((covered & bit(i)) || (preds_[i] & ~covered) != 0) continue;
        const KernelChoice& c = kernel_best_.at(bit(i));
        if (c.score == kInf) throw UserError("no legal unfused schedule of diagram '" + d_.name + "' fits " + hw_.name + last_problem_);
        r.schedule.kernels.push_back(c.plan);
        r.kernels.push_back(c);
        covered |= bit(i);
      }
    }
    name_kernels(r);
    r.cost = total_of(r.kernels);
    r.candidates_scored = 0;
    return r;
  }

  SearchResult run() {
    NAPKIN_ASSERT(n_ <= 62) << "too many statements";
    if (n_ == 0) {  // nothing to compute (inputs passed straight to outputs): no kernel
      SearchResult r;
      r.schedule.name = "derived";
      r.schedule.diagram = d_.name;
      return r;
    }
    candidates();
    // covered -> (objective of the rest, its HBM bytes, first kernel). With a tolerance, partitions
    // within it of the best (below the model's resolution) go to the one moving fewer HBM bytes.
    struct Best {
      double score, hbm;
      std::uint64_t pick;
    };
    std::uint64_t all = n_ == 64 ? ~0ull : (1ull << n_) - 1;
    auto solve = [&](double tolerance) {
      std::map<std::uint64_t, Best> memo;
      std::function<Best(std::uint64_t)> best = [&](std::uint64_t covered) -> Best {
        if (covered == all) return {0, 0, 0};
        if (auto it = memo.find(covered); it != memo.end()) return it->second;
        Best b{kInf, kInf, 0};
        for (const auto& [mask, choice] : kernel_best_) {
          if (mask & covered) continue;
          std::uint64_t needs = 0;
          for (std::size_t i = 0; i < n_; ++i)
            if (mask & bit(i)) needs |= preds_[i];
          if ((needs & ~mask & ~covered) != 0) continue;  // not ready: a producer runs later
          if (choice.score == kInf) continue;
          Best rest = best(covered | mask);
          double v = choice.score + rest.score, hbm = choice.cost.hbm_bytes + rest.hbm;
          if (v < b.score * (1 - tolerance) || (v <= b.score * (1 + tolerance) && hbm < b.hbm)) b = {v, hbm, mask};
        }
        memo[covered] = b;
        return b;
      };
      best(0);
      return memo;
    };
    auto exact = solve(0), tied = solve(0.005);
    double singles = 0;
    for (std::size_t i = 0; i < n_; ++i) singles += kernel_best_.count(bit(i)) ? kernel_best_.at(bit(i)).score : kInf;
    auto total = [&](const std::map<std::uint64_t, Best>& memo) {  // objective along the chosen path
      double t = 0;
      for (std::uint64_t c = 0; c != all;) {
        std::uint64_t m = memo.at(c).pick;
        if (m == 0) return kInf;
        t += kernel_best_.at(m).score;
        c |= m;
      }
      return t;
    };
    if (exact.at(0).score == kInf)
      throw UserError("no legal schedule of diagram '" + d_.name + "' fits " + hw_.name + last_problem_);
    double t_exact = total(exact), t_tied = total(tied);
    const auto& memo = t_tied <= t_exact * 1.005 && t_tied <= singles ? tied : exact;
    SearchResult r;
    r.schedule.name = "derived";
    r.schedule.diagram = d_.name;
    for (std::uint64_t covered = 0; covered != all;) {
      std::uint64_t mask = memo.at(covered).pick;
      KernelChoice c = kernel_best_.at(mask);
      r.schedule.kernels.push_back(c.plan);
      r.kernels.push_back(std::move(c));
      covered |= mask;
    }
    name_kernels(r);
    r.cost = total_of(r.kernels);
    r.candidates_scored = scored_;
    return r;
  }

 private:
  static std::uint64_t bit(std::size_t i) { return 1ull << i; }

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

  // ---------------------------------------------------------------- candidate kernels
  void candidates() {
    std::vector<std::uint64_t> masks;
    if (n_ <= 12) {
      for (std::uint64_t m = 1; m < (1ull << n_); ++m)
        if (connected(m) && convex(m) && calls_alone(m)) masks.push_back(m);
    } else {
      for (std::size_t i = 0; i < n_; ++i) masks.push_back(bit(i));
      for (std::size_t len = 2; len <= 4; ++len)
        for (std::size_t i = 0; i + len <= n_; ++i) {
          std::uint64_t m = 0;
          for (std::size_t j = i; j < i + len; ++j) m |= bit(j);
          if (connected(m) && convex(m) && calls_alone(m)) masks.push_back(m);
        }
    }
    for (auto m : masks) kernel_best_[m] = best_plan(m);
  }

  /** Connected through dataflow edges, or through a shared operand (horizontal fusion: Q, K and
   *  V projections reading the same activations). */
  bool connected(std::uint64_t m) const {
    std::uint64_t seen = m & (~m + 1), frontier = seen;
    while (frontier) {
      std::uint64_t next = 0;
      for (std::size_t i = 0; i < n_; ++i) {
        if (!(frontier & bit(i))) continue;
        next |= preds_[i] & m;
        for (std::size_t j = 0; j < n_; ++j) {
          if (!(m & bit(j))) continue;
          if (preds_[j] & bit(i)) next |= bit(j);
          for (const auto& r : weave_[i].reads)
            if (std::find(weave_[j].reads.begin(), weave_[j].reads.end(), r) != weave_[j].reads.end()) next |= bit(j);
        }
      }
      frontier = next & ~seen;
      seen |= next;
    }
    return seen == m;
  }
  bool convex(std::uint64_t m) const {
    std::size_t off = d_.inputs().size();
    for (std::size_t o = 0; o < n_; ++o) {
      if (m & bit(o)) continue;
      bool from = false, to = false;
      for (std::size_t i = 0; i < n_; ++i) {
        if (!(m & bit(i))) continue;
        from |= graph_->reaches(off + i, off + o);
        to |= graph_->reaches(off + o, off + i);
      }
      if (from && to) return false;
    }
    return true;
  }
  bool calls_alone(std::uint64_t m) const {
    if (std::popcount(m) == 1) return true;
    for (std::size_t i = 0; i < n_; ++i)
      if ((m & bit(i)) && weave_[i].has_call) return false;
    return true;
  }

  // ---------------------------------------------------------------- best partition of one kernel
  KernelChoice best_plan(std::uint64_t mask) {
    std::vector<const StatementWeave*> stmts;
    for (std::size_t i = 0; i < n_; ++i)
      if (mask & bit(i)) stmts.push_back(&weave_[i]);
    std::set<std::string> escaping = escaping_arrays(d_, stmts, weave_);

    std::vector<std::string> axes, groupable, streamable_axes, two_pass_axes;
    for (const auto* a : d_.axes()) {
      bool touched = false, woven = true;
      for (const auto* w : stmts)
        if (w->touches(a->name)) touched = true, woven &= w->role(a->name) == AxisRole::woven;
      if (!touched) continue;
      axes.push_back(a->name);
      if (woven) groupable.push_back(a->name);
      if (!woven && streamable(stmts, a->name, escaping).ok) streamable_axes.push_back(a->name);
      else if (!woven && streamable(stmts, a->name, escaping, 2).ok) two_pass_axes.push_back(a->name);
    }
    KernelChoice best;
    best.score = kInf;
    best_traffic_ = kInf;
    bool call = stmts.size() == 1 && stmts[0]->has_call;
    std::vector<std::pair<std::vector<std::string>, int>> streams{{{}, 1}};
    if (!call) {
      for (const auto& a : streamable_axes) streams.push_back({{a}, 1});
      for (const auto& a : two_pass_axes) streams.push_back({{a}, 2});
      // A reduction over several axes folds over all of them, nested (outer chunks of 1).
      for (const auto* w : stmts)
        walk(*w->statement->expr, [&](const Expr& n) {
          if (n.kind != Expr::Kind::apply || n.axes.size() < 2 || (n.op != Op::contract && n.op != Op::sum)) return;
          std::vector<std::string> nested;
          for (const auto* a : d_.axes())
            if (std::find(n.axes.begin(), n.axes.end(), a->name) != n.axes.end() &&
                std::find(streamable_axes.begin(), streamable_axes.end(), a->name) != streamable_axes.end())
              nested.push_back(a->name);
          if (nested.size() >= 2) streams.push_back({nested, 1});
        });
    }
    std::vector<int> warp_options = call ? std::vector<int>{4} : std::vector<int>{4, 8};
    for (const auto& [st, passes] : streams)
      for (int warps : warp_options) search_tiles(stmts, groupable, st, passes, warps, escaping, best, call);
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

  void search_tiles(const std::vector<const StatementWeave*>& stmts, const std::vector<std::string>& groupable,
                    const std::vector<std::string>& streams, int passes, int warps, const std::set<std::string>& escaping,
                    KernelChoice& best, bool call) {
    std::string warp_axis;
    for (const auto& a : groupable)
      if (sizes_.at(a) >= 16) {
        warp_axis = a;
        break;
      }
    std::vector<std::string> hbm(escaping.begin(), escaping.end());
    for (const auto* w : stmts)
      for (const auto& r : w->reads)
        if (!index_.count(r) || std::none_of(stmts.begin(), stmts.end(), [&](const StatementWeave* x) { return x->statement->name == r; }))
          hbm.push_back(r);
    auto div = divisibility(p_, d_, stmts, hbm, hw_, opt_, warps, warp_axis);
    auto lcm = [&](const std::string& a) -> std::int64_t {
      if (!so_.hardware_divisibility) return 1;
      auto it = div.find(a);
      return it == div.end() ? 1 : it->second.lcm;
    };
    std::vector<std::vector<std::int64_t>> options;
    for (const auto& a : groupable)  // a call is one launch of its callee: every axis whole
      options.push_back(call ? std::vector<std::int64_t>{sizes_.at(a)} : sizes_for(sizes_.at(a), lcm(a), true));
    std::optional<std::string> stream;
    if (!streams.empty()) stream = streams.back();
    std::vector<std::int64_t> stream_sizes{0};
    if (stream) {
      stream_sizes = sizes_for(sizes_.at(*stream), lcm(*stream), false);
      stream_sizes.pop_back();  // streaming the whole axis in one chunk is keeping it whole
      if (stream_sizes.empty()) return;
    }
    std::vector<std::size_t> idx(options.size(), 0);
    auto plan_of = [&](const std::vector<std::int64_t>& g, std::int64_t s) {
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
    };
    // Scores `k`, keeps it in `best` when better; its score, or kInf when it does not fit.
    auto consider = [&](const KernelPlan& k, const std::vector<LemmaUse>& lemmas, bool* clusterable) -> double {
      Schedule one;
      one.diagram = d_.name;
      one.kernels = {k};
      KernelCost c = cost_kernel(p_, d_, weave_, one, 0, sizes_, hw_, opt_);
      ++scored_;
      if (!c.problems.empty()) {
        last_problem_ = ": " + c.problems.front();
        return kInf;
      }
      if (clusterable) *clusterable = c.clusterable;
      ScheduleCost sc;
      sc.t_total = c.t_total;
      sc.l2_to_smem_bytes = c.l2_to_smem_bytes;
      double score = objective(sc, so_);
      // Near ties (within 0.1%) go to the candidate that moves fewer bytes into SMEM: the model's
      // time hides memory under compute, the hardware only partly does.
      bool better = score < best.score * (1 - 1e-3) ||
                    (score <= best.score * (1 + 1e-3) && c.l2_to_smem_bytes + c.smem_read_bytes < best_traffic_);
      if (better) {
        best_traffic_ = c.l2_to_smem_bytes + c.smem_read_bytes;
        best.plan = k;
        best.lemmas = lemmas;
        best.cost = c;
        best.score = score;
      }
      return score;
    };
    auto evaluate = [&](const std::vector<std::int64_t>& g, std::int64_t s) -> double {
      KernelPlan k = plan_of(g, s);
      std::vector<LemmaUse> lemmas;
      if (!kernel_illegal(stmts, k, escaping, &lemmas).empty()) return kInf;
      bool clusterable = false;
      double score = consider(k, lemmas, &clusterable);
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
          score = std::min(score, consider(kc, lemmas, nullptr));
        }
      last_problem_ = problem;
      return score;
    };
    // Grid over all combinations, then (without hardware divisibility) coordinate descent by +-1.
    std::vector<std::int64_t> g(options.size());
    std::vector<std::int64_t> best_g;
    std::int64_t best_s = 0;
    double best_here = kInf;
    while (true) {
      for (std::size_t i = 0; i < options.size(); ++i) g[i] = options[i][idx[i]];
      for (auto s : stream_sizes) {
        double v = evaluate(g, s);
        if (v < best_here) best_here = v, best_g = g, best_s = s;
      }
      std::size_t i = 0;
      while (i < idx.size() && ++idx[i] == options[i].size()) idx[i++] = 0;
      if (i == idx.size()) break;
    }
    if (so_.hardware_divisibility || best_here == kInf) return;
    // Without divisibility, refine by pattern search: every direction in {-1, 0, 1}^n (so that one
    // tile can grow while another shrinks, along the capacity boundary), steps halving to 1.
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
  std::unique_ptr<NamedGraph> graph_;
  std::map<std::string, std::size_t> index_;
  std::vector<std::uint64_t> preds_;
  std::map<std::uint64_t, KernelChoice> kernel_best_;
  std::size_t scored_ = 0;
  double best_traffic_ = kInf;
  std::string last_problem_;
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
