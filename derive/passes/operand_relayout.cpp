// Pass derive-operand-relayout: K-major copies of 8-bit operands stored MN-major, where the model
// prices them cheaper. The contract is in operand_relayout.hpp.
#include "derive/passes/operand_relayout.hpp"

#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "derive/rewrite_weighing.hpp"
#include "diagrams/graph_view.hpp"
#include "diagrams/printer.hpp"

namespace napkin {

namespace {

/** One copy the rewrite makes: of `source`, with `axes` (the contracted axis innermost). */
struct Copy {
  std::string source, name, contracted, inner;  ///< inner: the source's innermost axis
  AxisList axes;
  DType dtype = DType::bf16;
  const MmaShape* atom = nullptr;
};

/** The atom the tensor-core forms take for dtype `t`: the warpgroup row, else the warp row. */
const MmaShape* atom_for(const Hardware& hw, DType t) {
  if (const MmaShape* wg = hw.wgmma ? hw.warpgroup_mma(t) : nullptr) return wg;
  return hw.warp_mma(t);
}

class Relayout {
 public:
  Relayout(const Program& p, const Diagram& d, const Hardware& hw, const ModelOptions& opt) : d_(d), hw_(hw), opt_(opt), used_(names_in_use(p, d)) {}

  /** The rewritten diagram, each copy placed before the first statement that reads it; `copies`
   *  lists the copies it made. */
  Diagram build() {
    Diagram out = d_;
    out.items.clear();
    std::set<std::string> placed;
    for (const auto& item : d_.items) {
      const auto* st = std::get_if<Statement>(&item);
      if (!st) {
        out.items.push_back(item);
        continue;
      }
      Statement s = *st;
      std::set<std::string> read;
      s.expr = rewrite(st->expr, read);
      for (const auto& c : copies)
        if (read.count(c.name) && placed.insert(c.name).second) {
          Statement copy;
          copy.name = c.name;
          copy.axes = c.axes;
          copy.axis_locs.assign(c.axes.size(), st->loc);
          copy.dtype = c.dtype;
          copy.expr = make_ref(c.source, st->loc);
          copy.loc = st->loc;
          out.items.emplace_back(std::move(copy));
        }
      out.items.emplace_back(std::move(s));
    }
    return out;
  }

  std::vector<Copy> copies;

 private:
  ExprPtr rewrite(const ExprPtr& e, std::set<std::string>& read) {
    if (e->kind != Expr::Kind::apply) return e;
    Expr n = *e;
    bool changed = false;
    for (auto& a : n.args) {
      ExprPtr r = rewrite(a, read);
      changed |= r.ptr != a.ptr;
      a = r;
    }
    if (n.op == Op::contract && n.args.size() == 2)
      for (auto& a : n.args)
        if (const Copy* c = copy_for(*a, n.axes)) {
          a = make_ref(c->name, a->loc, a->level);
          read.insert(c->name);
          changed = true;
        }
    return changed ? rebuild(n) : e;
  }

  /** The copy operand `a` of a contraction over `reduced` needs, or null where it needs none. */
  const Copy* copy_for(const Expr& a, const AxisList& reduced) {
    if (a.kind != Expr::Kind::ref) return nullptr;
    const InputDecl* in = d_.find_input(a.name);
    if (!in || in->axes.size() < 2) return nullptr;
    const DType t = storage_dtype(d_, in->name, opt_);
    const MmaShape* atom = atom_for(hw_, t);
    if (!atom || atom->mn_major || contains(reduced, in->axes.back())) return nullptr;
    std::string k;
    for (const auto& x : in->axes)
      if (contains(reduced, x)) k = x;
    if (k.empty()) return nullptr;
    AxisList axes;
    for (const auto& x : in->axes)
      if (x != k) axes.push_back(x);
    axes.push_back(k);
    for (const auto& c : copies)
      if (c.source == in->name && c.axes == axes) return &c;
    copies.push_back({in->name, fresh_name(used_, in->name + "_k"), k, in->axes.back(), axes, t, atom});
    return &copies.back();
  }

  const Diagram& d_;
  const Hardware& hw_;
  const ModelOptions& opt_;
  std::set<std::string> used_;
};


std::string axes_text(const AxisList& axes) {
  std::string s = "[";
  for (std::size_t i = 0; i < axes.size(); ++i) s += (i ? "," : "") + axes[i];
  return s + "]";
}

/** The copies' kernels' share of the best schedule's time in `w` (seconds). */
double copies_time(const WeighedSearch& w, const std::vector<Copy>& copies) {
  double t = 0;
  if (const SearchResult* r = w.best())
    for (const auto& k : r->kernels)
      for (const auto& c : copies)
        if (k.plan.fused() == std::vector<std::string>{c.name}) t += k.cost.t_total;
  return t;
}

}  // namespace

OperandRelayoutResult relayout_operands(const Program& p, const Diagram& d, const SizeMap& sizes, const Hardware& hw, const ModelOptions& opt,
                                        const SearchOptions& so, std::optional<WeighedSearch> prior) {
  Relayout r(p, d, hw, opt);  // p: names the copies avoid
  OperandRelayoutResult out;
  std::vector<RewriteCandidate> sides(1);
  sides[0].diagram = std::make_shared<const Diagram>(r.build());  // searched where it will live: the plans point into it
  if (r.copies.empty()) {
    out.kept = std::move(prior);
    return out;
  }
  for (const auto& c : r.copies) sides[0].names.push_back(c.name);
  RewriteWeighing w = weigh_rewrites(p, d, sides, sizes, hw, opt, so, std::move(prior));
  const WeighedSearch& with = sides[0].weighed;
  const WeighedSearch& without = w.given;
  const bool changed = w.best.has_value();
  const double with_copies = copies_time(with, r.copies);
  for (const auto& c : r.copies) {
    const std::string why = c.source + " is stored " + c.inner + "-innermost; " + std::string(dtype_name(c.dtype)) + " " +
                            (c.atom->scope == "warpgroup" ? "wgmma" : "mma.sync") + " reads K-major operands only (the [[mma]] row " +
                            c.atom->ptx + " has no mn_major; PTX ISA " + (c.atom->scope == "warpgroup" ? "9.7.15.5.1" : "9.7.14.5.15") + ")";
    std::string detail = "predicted " + objective_text(with.objective, so) + " with the copy";
    if (so.objective == SearchOptions::Objective::time && std::isfinite(with.objective))
      detail += " (copies " + objective_text(with_copies, so) + ")";
    detail += " against " + objective_text(without.objective, so) + " reading " + c.source + " as stored";
    out.steps.push_back({"derive-operand-relayout", c.name,
                         changed ? why + ": transposed copy " + c.name + axes_text(c.axes) + " = " + c.source + ", " + c.contracted + " innermost"
                                 : why + ": no copy (reading " + c.source + " as stored is predicted faster)",
                         "a relayout is exact: the copy holds the same values in another order", detail});
  }
  keep_weighed(out, w, sides);
  return out;
}

std::vector<Step> operand_relayout_pass(const PassContext&, KernelCandidate&, Diagram&) { return {}; }

}  // namespace napkin
