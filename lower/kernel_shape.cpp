// The shape of one kernel (contract in kernel_shape.hpp): its statements in dataflow order, the
// arrays crossing its boundary, the partition of each axis, and the causal tiles it may skip.
#include "lower/kernel_shape.hpp"

#include <algorithm>
#include <set>

#include "diagrams/graph_view.hpp"

namespace napkin {

bool KernelShape::grouped(const std::string& axis) const {
  auto it = axes.find(axis);
  return it != axes.end() && it->second.kind == AxisPlan::Kind::group;
}

std::vector<const StatementWeave*> shape_weaves(const KernelShape& shape, const std::vector<StatementWeave>& weave) {
  std::vector<const StatementWeave*> out;
  for (const auto& s : shape.statements)
    for (const auto& w : weave)
      if (w.statement->name == s) out.push_back(&w);
  return out;
}

namespace {

class Shaper {
 public:
  Shaper(const Diagram& d, const std::vector<StatementWeave>& weave, const KernelPlan& plan, const SizeMap& sizes)
      : d_(d), weave_(weave), sizes_(sizes) {
    s_.plan = plan;
    s_.warps = plan.warps();
  }

  KernelShape run() {
    classify_arrays();
    plan_axes();
    atomic_outputs();
    causal_skip();
    return std::move(s_);
  }

 private:
  void classify_arrays() {
    std::set<std::string> mine;
    for (const auto& n : s_.plan.fused()) mine.insert(n);
    std::set<std::string> read_outside;
    NamedGraph g = dataflow_graph(d_);
    auto topo = g.topological_order();
    for (auto v : topo.value_or(std::vector<std::size_t>{}))
      for (const auto& w : weave_) {
        if (w.statement->name != g.names()[v]) continue;
        if (mine.count(w.statement->name)) {
          s_.statements.push_back(w.statement->name);
          stmts_.push_back(&w);
          s_.has_call |= w.has_call;
        } else {
          read_outside.insert(w.reads.begin(), w.reads.end());
        }
      }
    std::set<std::string> outs;
    for (const auto* o : d_.outputs()) outs.insert(o->name);
    for (const auto* w : stmts_) {
      for (const auto& r : w->reads)
        if (!mine.count(r) && std::find(s_.inputs.begin(), s_.inputs.end(), r) == s_.inputs.end()) s_.inputs.push_back(r);
      const std::string& n = w->statement->name;
      (outs.count(n) || read_outside.count(n) ? s_.outputs : s_.internal).push_back(n);
    }
  }

  /** The statements reducing a grouped axis (legal by the atomic-sum lemma alone:
   *  check_schedule.cpp). */
  void atomic_outputs() {
    for (const auto* w : stmts_)
      for (const auto& [a, r] : w->roles)
        if (r.role == AxisRole::reduced && s_.grouped(a) && !contains(s_.atomic, w->statement->name)) s_.atomic.push_back(w->statement->name);
  }

  static bool contains(const std::vector<std::string>& v, const std::string& x) { return std::find(v.begin(), v.end(), x) != v.end(); }

  void plan_axes() {
    std::set<std::string> touched;
    for (const auto* w : stmts_)
      for (const auto& [a, _] : w->roles) touched.insert(a);
    for (const auto* ad : d_.axes()) {
      if (!touched.count(ad->name)) continue;
      AxisPlan ap;
      ap.extent = sizes_.at(ad->name);
      ap.tile = ap.extent;
      if (auto g = s_.plan.group(ad->name)) {
        ap.kind = AxisPlan::Kind::group;
        ap.tile = std::min(*g, ap.extent);
        ap.count = (ap.extent + *g - 1) / *g;
      }
      for (const auto& [sa, size] : s_.plan.streams())
        if (sa == ad->name && ap.kind == AxisPlan::Kind::whole) {
          ap.kind = AxisPlan::Kind::stream;
          ap.tile = std::min(size, ap.extent);
          ap.count = (ap.extent + size - 1) / size;
        }
      s_.axes[ad->name] = ap;
      s_.axis_order.push_back(ad->name);
    }
    s_.blocks = 1;
    for (const auto& [a, ap] : s_.axes)
      if (ap.kind == AxisPlan::Kind::group) s_.blocks *= ap.count;
    for (const auto& a : s_.axis_order)
      if (s_.axes[a].kind == AxisPlan::Kind::group && s_.axes[a].tile > 1) {
        s_.warp_axis = a;
        break;
      }
  }

  /** A causal(q, x) mask feeding a softmax along x, with q grouped and x streamed or grouped:
   *  tiles where every x > every q are skipped (their probabilities are 0), when skipping is sound.
   *  A mask with a window (causal(q, x; window=W)) skips nothing: its tiles before the window are
   *  fully masked too, but the emitters' skip and interior-chunk logic know the diagonal alone. */
  void causal_skip() {
    for (const auto* w : stmts_)
      for (const Expr* m : w->causal_masks) {
        if (!is_plain_causal(*m)) continue;
        const std::string &qa = m->axes[0], &xa = m->axes[1];
        if (!s_.grouped(qa) || !s_.axes.count(xa) || s_.axes[xa].kind == AxisPlan::Kind::whole || !skip_is_sound(qa, xa)) continue;
        const AxisPlan &q = s_.axes[qa], &x = s_.axes[xa];
        double active = 0;
        for (std::int64_t i = 0; i < q.count; ++i) {
          std::int64_t q_hi = std::min((i + 1) * q.tile, q.extent) - 1;
          active += static_cast<double>(std::min(x.count, q_hi / x.tile + 1));
        }
        s_.causal_active_fraction = active / static_cast<double>(q.count * x.count);
        s_.causal_q = qa;
        s_.causal_x = xa;
      }
  }
  /** Whether a tile of (q, x) past the causal diagonal changes nothing the kernel writes, so that
   *  it may be skipped: every statement of the kernel touching x is
   *   - a softmax along x of mask(E, causal(q, x)) (written there or in a statement it reads), whose
   *     probabilities there are exactly 0, and not stored (its zeros would have to be written);
   *   - woven along x and not stored (its values there are read only by these statements);
   *   - a reduction over x only by contractions of such a softmax with arrays from outside the
   *     kernel (a zero factor: the term is 0 for finite operands), by max(A; x) and by
   *     sum(exp(A - M); x) of a causally masked A (logsumexp: the skipped terms are -inf, the
   *     identity of max, and exp(-inf - M) = 0 for the finite M of a row with a term on the
   *     diagonal, which a plain causal mask leaves in every row).
   *  Anything else (a stored woven array, another reduction or normaliser along x) would read or
   *  write the skipped tiles, and the skip is refused. */
  bool skip_is_sound(const std::string& qa, const std::string& xa) const {
    auto in_kernel = [&](const std::string& n) -> const StatementWeave* {
      for (const auto* v : stmts_)
        if (v->statement->name == n) return v;
      return nullptr;
    };
    auto is_causal_mask = [&](const Expr& e) {
      return e.kind == Expr::Kind::apply && e.op == Op::mask && e.args.size() == 2 && e.args[1]->kind == Expr::Kind::apply &&
             is_plain_causal(*e.args[1]) && e.args[1]->axes == AxisList{qa, xa};
    };
    auto stored = [&](const std::string& n) { return std::find(s_.outputs.begin(), s_.outputs.end(), n) != s_.outputs.end(); };
    std::set<std::string> zero_outside;  // softmax statements that are exactly 0 past the diagonal
    for (const auto* v : stmts_) {
      const Expr& e = *v->statement->expr;
      if (v->role(xa) != AxisRole::normalised || e.kind != Expr::Kind::apply || e.op != Op::softmax || e.axes != AxisList{xa}) continue;
      const Expr& arg = *e.args[0];
      const StatementWeave* src = arg.kind == Expr::Kind::ref ? in_kernel(arg.name) : nullptr;
      if (is_causal_mask(arg) || (src && is_causal_mask(*src->statement->expr))) zero_outside.insert(v->statement->name);
    }
    if (zero_outside.empty()) return false;
    for (const auto* v : stmts_) {
      if (!v->touches(xa)) continue;
      const std::string& n = v->statement->name;
      AxisRole r = v->role(xa);
      if (r == AxisRole::woven || r == AxisRole::normalised) {
        if (stored(n) || (r == AxisRole::normalised && !zero_outside.count(n))) return false;
        continue;
      }
      const auto masked = [&](const Expr& a) {
        const StatementWeave* src = a.kind == Expr::Kind::ref ? in_kernel(a.name) : nullptr;
        return is_causal_mask(a) || (src && is_causal_mask(*src->statement->expr));
      };
      if (!reductions_over_x_vanish(*v->statement->expr, xa, zero_outside, in_kernel, masked)) return false;
    }
    return true;
  }
  /** Whether every reduction over x inside `e` is a contraction of refs, one a statement of
   *  `zero_outside` and the others arrays from outside the kernel, or max(A; x) or
   *  sum(exp(A - M); x) with `masked(A)` (A causally masked). */
  template <class InKernel, class Masked>
  static bool reductions_over_x_vanish(const Expr& e, const std::string& xa, const std::set<std::string>& zero_outside, const InKernel& in_kernel,
                                       const Masked& masked) {
    if (e.kind != Expr::Kind::apply) return true;
    if (std::find(e.axes.begin(), e.axes.end(), xa) != e.axes.end() || (e.op == Op::contract && e.axes.empty())) {
      if (e.axes == AxisList{xa} && e.args.size() == 1) {
        const Expr& a = *e.args[0];
        if (e.op == Op::max) return masked(a);
        const bool shifted_exp = a.kind == Expr::Kind::apply && a.op == Op::exp && a.args[0]->kind == Expr::Kind::apply && a.args[0]->op == Op::sub;
        if (e.op == Op::sum && shifted_exp) return masked(*a.args[0]->args[0]);
      }
      if (e.op != Op::contract) return false;
      int zeros = 0;
      for (const auto& a : e.args) {
        if (a->kind != Expr::Kind::ref) return false;
        if (zero_outside.count(a->name)) ++zeros;
        else if (in_kernel(a->name)) return false;
      }
      return zeros == 1;
    }
    for (const auto& a : e.args)
      if (!reductions_over_x_vanish(*a, xa, zero_outside, in_kernel, masked)) return false;
    return true;
  }

  const Diagram& d_;
  const std::vector<StatementWeave>& weave_;
  const SizeMap& sizes_;
  KernelShape s_;
  std::vector<const StatementWeave*> stmts_;
};

}  // namespace

KernelShape shape_kernel(const Diagram& d, const std::vector<StatementWeave>& weave, const KernelPlan& plan, const SizeMap& sizes) {
  return Shaper(d, weave, plan, sizes).run();
}

}  // namespace napkin
