#include "derive/lemmas.hpp"

#include <algorithm>
#include <map>

#include "diagrams/diagnostics.hpp"
#include "diagrams/graph_view.hpp"

namespace napkin {

const std::vector<Lemma>& lemma_library() {
  static const std::vector<Lemma> table{
      {"elementwise", "an operation woven over the axis maps each chunk independently", "none: chunks concatenate",
       "paper §3 (post-composition with a map keeps streamability)"},
      {"associative-sum", "a sum (contraction, sum, mean) over the axis folds chunk by chunk", "running partial sums",
       "paper §3.1 (the dot product is streamable)"},
      {"max-monoid", "a maximum over the axis folds chunk by chunk", "running maximum", "paper §3 (monoid reductions)"},
      {"online-softmax", "softmax along the axis followed by a contraction over it folds chunk by chunk",
       "running max m, denominator l and output O, rescaled by exp(m_old - m_new)",
       "paper §3 (FlashAttention); Milakov & Gimelshein 2018"},
      {"normalised-contraction", "rmsnorm along the axis followed by a contraction over it folds chunk by chunk",
       "running contraction acc and sum of squares; divide by sqrt(mean + eps) at the end",
       "arXiv 2505.09326, Lemma 2 (normalised contractions)"},
      {"welford", "layernorm along the axis followed by a contraction over it folds chunk by chunk",
       "running x.w.W, w.W, b.W and Welford's (n, mean, M2); combine at the end",
       "Welford 1962; linearity of the contraction"},
      {"two-pass-normalisation", "a normalisation whose output leaves indexed by the axis streams in two passes",
       "pass 1 folds the statistics (online max and sum; Welford mean and M2; sum of squares); pass 2 re-reads and maps",
       "Milakov & Gimelshein 2018 (online normaliser); Welford 1962"},
  };
  return table;
}

const Lemma& lemma(const std::string& id) {
  for (const auto& l : lemma_library())
    if (l.id == id) return l;
  NAPKIN_ASSERT(false) << "unknown lemma " << id;
  return lemma_library().front();
}

namespace {
std::string normaliser_lemma(Op op) {
  return op == Op::softmax ? "online-softmax" : op == Op::rmsnorm ? "normalised-contraction" : "welford";
}
}  // namespace

StreamVerdict streamable(const std::vector<const StatementWeave*>& kernel, const std::string& axis,
                         const std::set<std::string>& escaping, int passes) {
  StreamVerdict v;
  std::map<std::string, const StatementWeave*> by_name;
  for (const auto* w : kernel) by_name[w->statement->name] = w;
  auto consumers = [&](const std::string& array) {
    std::vector<const StatementWeave*> out;
    for (const auto* w : kernel)
      if (std::find(w->reads.begin(), w->reads.end(), array) != w->reads.end()) out.push_back(w);
    return out;
  };
  auto fail = [&](const StatementWeave* w, std::string why) {
    v.ok = false;
    v.culprit = w->statement;
    v.why = std::move(why);
    return v;
  };
  // Arrays complete only after the stream loop (they reduce the axis); reading them inside the
  // loop, along the axis, would need a second pass.
  std::set<std::string> after_loop;
  std::set<std::string> normalised_upstream;  // normalisers along the axis and what depends on them
  for (const auto* w : kernel) {
    if (!w->touches(axis)) {  // computed after the loop if it needs a loop result (post-composition)
      for (const auto& in : w->reads)
        if (after_loop.count(in)) after_loop.insert(w->statement->name);
      continue;
    }
    const RoleSource& r = w->roles.at(axis);
    const std::string& name = w->statement->name;
    for (const auto& in : w->reads)
      if (normalised_upstream.count(in) && r.role != AxisRole::normalised) normalised_upstream.insert(name);
    for (const auto& in : w->reads)
      if (after_loop.count(in) && (r.role != AxisRole::reduced || w->statement->axes.end() != std::find(w->statement->axes.begin(), w->statement->axes.end(), axis)))
        return fail(w, "'" + name + "' reads '" + in + "' inside the loop over " + axis + ", but '" + in +
                           "' is complete only after it (it reduces " + axis + "); keep " + axis + " whole");
    switch (r.role) {
      case AxisRole::woven:
        v.uses.push_back({name, "elementwise"});
        break;
      case AxisRole::reduced: {
        // A reduction over the axis nested inside another one over it needs the inner result
        // complete inside the loop: a second pass.
        bool nested = false;
        walk(*w->statement->expr, [&](const Expr& n) {
          if (n.kind != Expr::Kind::apply || std::find(n.axes.begin(), n.axes.end(), axis) == n.axes.end() ||
              (n.op != Op::contract && n.op != Op::sum && n.op != Op::max && n.op != Op::mean && n.op != Op::softmax &&
               n.op != Op::layernorm && n.op != Op::rmsnorm))
            return;
          for (const auto& arg : n.args)
            walk(*arg, [&](const Expr& inner) {
              if (inner.kind == Expr::Kind::apply && &inner != &n && std::find(inner.axes.begin(), inner.axes.end(), axis) != inner.axes.end())
                nested = true;
            });
        });
        if (nested)
          return fail(w, "'" + name + "' reduces " + axis + " over a value that itself reduces or normalises along " + axis +
                             "; the inner result is complete only after the loop; keep " + axis + " whole");
        std::string id = r.op == Op::max ? "max-monoid" : "associative-sum";
        for (const auto& in : w->reads) {  // a contraction fed by a normaliser takes the normaliser's lemma
          auto it = by_name.find(in);
          if (passes == 1 && it != by_name.end() && it->second->touches(axis) &&
              it->second->roles.at(axis).role == AxisRole::normalised)
            id = normaliser_lemma(it->second->roles.at(axis).op);
        }
        v.uses.push_back({name, id});
        after_loop.insert(name);
        break;
      }
      case AxisRole::normalised: {
        std::string opn(op_name(r.op));
        if (passes == 2) {
          // Pass 1 folds statistics of inputs that exist in pass 1: not of another normaliser's output.
          for (const auto& in : w->reads)
            if (normalised_upstream.count(in))
              return fail(w, "two passes cannot chain normalisations along " + axis + ": '" + name + "' needs '" + in +
                                 "' normalised first (a third pass); split them into two kernels");
          normalised_upstream.insert(name);
          v.uses.push_back({name, "two-pass-normalisation"});
          break;
        }
        if (escaping.count(name))
          return fail(w, opn + " is not streamable along " + axis + ": its output is indexed by " + axis +
                             "; stream it together with the contraction that consumes it ('" + name +
                             "' leaves the kernel), or in two passes (stream " + axis + " by N twice)");
        auto users = consumers(name);
        if (users.empty())
          return fail(w, opn + " is not streamable along " + axis + ": its output is indexed by " + axis +
                             "; stream it together with the contraction that consumes it, or in two passes (stream " + axis + " by N twice)");
        for (const auto* u : users) {
          const RoleSource& ur = u->roles.at(axis);
          if (ur.role != AxisRole::reduced || ur.op != Op::contract)
            return fail(w, opn + " is not streamable along " + axis + ": its output is indexed by " + axis + " and '" +
                               u->statement->name + "' does not contract it over " + axis +
                               "; stream it together with the contraction that consumes it, or in two passes (stream " + axis + " by N twice)");
          // The running statistics are per row of the normaliser: the contraction must read it
          // directly (it is linear in it) and keep its rows.
          bool direct = false;
          for (const auto& arg : ur.node->args) direct |= arg->kind == Expr::Kind::ref && arg->name == name;
          for (const auto& a : w->statement->axes)
            if (a != axis && u->touches(a) && u->role(a) == AxisRole::reduced) direct = false;
          if (!direct)
            return fail(w, opn + " is not streamable along " + axis + " in one pass: '" + u->statement->name +
                               "' must contract " + name + " itself over " + axis + " only, keeping its other axes; stream it in two passes (stream " +
                               axis + " by N twice)");
        }
        v.uses.push_back({name, normaliser_lemma(r.op)});
        break;
      }
    }
  }
  return v;
}

}  // namespace napkin
