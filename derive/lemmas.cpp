#include "derive/lemmas.hpp"

#include <algorithm>
#include <cctype>
#include <functional>
#include <map>

#include "diagrams/diagnostics.hpp"
#include "diagrams/graph_view.hpp"
#include "diagrams/printer.hpp"

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
      {"online-rescaled-sum",
       "a sum over the axis of exp(E - M), M a max over the same axis (logsumexp), folds chunk by chunk",
       "running sum s of exp(E - m) at the running max m; s <- s * exp(m_old - m_new) + sum exp(E - m_new)",
       "Milakov & Gimelshein 2018 (online normaliser calculation)"},
      {"chan-centred-moment",
       "a sum or mean over the axis of (E - mu) * (E - mu), mu = mean(E) over the same axes, folds chunk by chunk",
       "Chan's (n, mean, M2): per chunk (n_b, mean_b, M2_b) combined with delta = mean_b - mean",
       "Chan, Golub & LeVeque 1979 (pairwise variance); Welford 1962"},
      {"atomic-sum",
       "a contraction over an axis grouped across thread blocks is the sum of the blocks' partial contractions, each added into a zeroed fp32 "
       "array in global memory by atomic adds (+ is associative and commutative: any order of the adds gives the sum, to rounding)",
       "fp32 partial sums in global memory, zeroed before the launch; the order of the adds, and so the rounding, varies from run to run",
       "paper §3.1 (associativity of the sum); PTX ISA 9.7.13.6 (red: atomic reduction in global memory)"},
  };
  return table;
}

const Lemma& lemma(const std::string& id) {
  for (const auto& l : lemma_library())
    if (l.id == id) return l;
  NAPKIN_ASSERT(false) << "unknown lemma " << id;
  return lemma_library().front();
}

const LemmaArithmetic* lemma_arithmetic(const std::string& id) {
  static const std::map<std::string, LemmaArithmetic> table{
      {"online-rescaled-sum",
       {{{"s", "0.0"}},
        {{"m_old", "the running max of M before this chunk"},
         {"m_new", "the running max of M after it"},
         {"part", "the chunk's sum with M read as m_new, exp(E - M) read as 0 where E = -inf"}},
        // An element with E = -inf adds exp(-inf - M) = 0 at every finite final max, so the part
        // reads it as 0 even while the running max is still -inf (where exp(-inf - -inf) would be
        // NaN); a NaN element (E = NaN, which the max skips) stays NaN. While the max has not
        // moved, the sum is not rescaled (exp(-inf - -inf) again). A final max of -inf means every
        // element was -inf or NaN: the written expression is NaN there (a row masked throughout,
        // the fp64 evaluator's value), so the finalise makes it NaN.
        {"$s = ($m_old == $m_new ? $s : $s * std::exp($m_old - $m_new)) + $part;"},
        "$m_new == -INFINITY ? NAN : $s"}},
      {"chan-centred-moment",
       {{{"n", "0.0"}, {"mean", "0.0"}, {"m2", "0.0"}},
        {{"n_b", "the chunk's element count"}, {"mean_b", "the chunk's mean of E"}, {"m2_b", "the chunk's sum of (E - mean_b)^2"}},
        {"const double chan_n = $n + $n_b, chan_delta = $mean_b - $mean;",
         "if (chan_n > 0) $m2 += $m2_b + chan_delta * chan_delta * $n * $n_b / chan_n;",
         "if (chan_n > 0) $mean += chan_delta * $n_b / chan_n;", "$n = chan_n;"},
        "$m2"}},
  };
  auto it = table.find(id);
  return it == table.end() ? nullptr : &it->second;
}

std::string render_template(const std::string& templ, const std::map<std::string, std::string>& vars) {
  std::string out;
  for (std::size_t i = 0; i < templ.size();) {
    if (templ[i] != '$') {
      out += templ[i++];
      continue;
    }
    std::size_t j = i + 1;
    while (j < templ.size() && (std::isalnum(static_cast<unsigned char>(templ[j])) || templ[j] == '_')) ++j;
    auto it = vars.find(templ.substr(i + 1, j - i - 1));
    NAPKIN_ASSERT(it != vars.end()) << "lemma template names $" << templ.substr(i + 1, j - i - 1) << " without a value";
    out += it->second;
    i = j;
  }
  return out;
}

namespace {

bool has(const std::vector<std::string>& v, const std::string& x) { return std::find(v.begin(), v.end(), x) != v.end(); }

/** The first array of `names` that `e` reads, or empty. */
std::string reads_any(const Expr& e, const std::set<std::string>& names) {
  std::string found;
  walk(e, [&](const Expr& n) {
    if (found.empty() && n.kind == Expr::Kind::ref && names.count(n.name)) found = n.name;
  });
  return found;
}

/** The factors of a product (`a * b * c`; a contraction multiplies its arguments). */
void factors(const Expr& e, std::vector<const Expr*>& out) {
  if (e.kind == Expr::Kind::apply && e.op == Op::mul) {
    for (const auto& a : e.args) factors(*a, out);
    return;
  }
  out.push_back(&e);
}

/** `E - R` with R a reference: R's name, else empty. */
std::string minus_ref(const Expr& e) {
  return e.kind == Expr::Kind::apply && e.op == Op::sub && e.args[1]->kind == Expr::Kind::ref ? e.args[1]->name : "";
}

/** The top-level reduction of statement `name` in the kernel when it is `op` over `axis`. */
const Expr* whole_reduction(const std::map<std::string, const StatementWeave*>& kernel, const std::string& name, Op op,
                            const std::string& axis) {
  auto it = kernel.find(name);
  if (it == kernel.end()) return nullptr;
  const Expr& e = *it->second->statement->expr;
  return e.kind == Expr::Kind::apply && e.op == op && has(e.axes, axis) ? &e : nullptr;
}

}  // namespace

ReductionForm reduction_form(const Expr& node, const std::string& axis,
                             const std::map<std::string, const StatementWeave*>& kernel,
                             const std::set<std::string>& after_loop) {
  ReductionForm f;
  std::string inner = reads_any(node, after_loop);
  if (inner.empty()) {
    f.lemma = node.op == Op::max ? "max-monoid" : "associative-sum";
    return f;
  }
  f.inner = inner;
  const std::string opn(op_name(node.op));
  f.why = "its " + opn + " over " + axis + " reads '" + inner + "', complete only after the loop over " + axis +
          "; no lemma folds this in one pass (online-rescaled-sum needs a sum of exp(E - M) with M = max(...; " + axis +
          "); chan-centred-moment needs (E - mu) * (E - mu) with mu = mean(E; " + axis + ")); keep " + axis + " whole";
  if (node.op == Op::max) return f;
  std::vector<const Expr*> fs;
  for (const auto& a : node.args) factors(*a, fs);
  std::vector<const Expr*> reading;
  for (const Expr* x : fs)
    if (!reads_any(*x, after_loop).empty()) reading.push_back(x);
  // online-rescaled-sum: one factor exp(E - M), M = max(...; axis) the whole statement, constant
  // along what the node reduces; E and the other factors free of loop results.
  if (reading.size() == 1 && node.op != Op::max) {
    const Expr& x = *reading[0];
    if (x.kind == Expr::Kind::apply && x.op == Op::exp && minus_ref(*x.args[0]) == inner &&
        reads_any(*x.args[0]->args[0], after_loop).empty()) {
      const Expr* m = whole_reduction(kernel, inner, Op::max, axis);
      bool constant = m != nullptr;
      if (m)
        for (const auto& a : kernel.at(inner)->statement->axes) constant &= !has(node.axes, a);
      if (constant) {
        f.lemma = "online-rescaled-sum";
        f.shifted_exp = &x;
        return f;
      }
    }
  }
  // chan-centred-moment: (E - mu) * (E - mu) alone, mu = mean(E; the node's axes).
  if (fs.size() == 2 && node.op != Op::max && minus_ref(*fs[0]) == inner && minus_ref(*fs[1]) == inner) {
    const Expr* mu = whole_reduction(kernel, inner, Op::mean, axis);
    std::string e0 = print_expr(*fs[0]->args[0]), e1 = print_expr(*fs[1]->args[0]);
    if (mu && e0 == e1 && print_expr(*mu->args[0]) == e0 && reads_any(*fs[0]->args[0], after_loop).empty() &&
        std::set<std::string>(mu->axes.begin(), mu->axes.end()) == std::set<std::string>(node.axes.begin(), node.axes.end())) {
      f.lemma = "chan-centred-moment";
      f.centred = fs[0]->args[0].ptr.get();
      return f;
    }
  }
  return f;
}

std::string atomic_problem(const StatementWeave& w, const std::string& axis, std::optional<DType> declared) {
  const Statement& s = *w.statement;
  if (!w.touches(axis) || w.role(axis) != AxisRole::reduced) return "'" + s.name + "' does not reduce " + axis;
  if (declared != DType::fp32) return "'" + s.name + "' is not declared fp32 (the precision of the atomic adds' partial sums)";
  const auto reducers = reducers_over(*s.expr, axis);
  if (reducers.size() != 1 || reducers[0]->op != Op::contract) return "'" + s.name + "' is not one contraction over " + axis;
  // The contraction under products, quotients (in the numerator) and negation only: a factor
  // outside it is free of the reduced axis (it is not among the statement's axes), so the sum of
  // the blocks' partials times the factor is the whole sum times it.
  std::function<bool(const Expr&)> linear = [&](const Expr& e) {
    if (&e == reducers[0]) return true;
    if (e.kind != Expr::Kind::apply) return false;
    if (e.op == Op::neg) return linear(*e.args[0]);
    if (e.op == Op::div) return linear(*e.args[0]) && reducers_over(*e.args[1], axis).empty();
    if (e.op == Op::mul) return linear(*e.args[0]) || linear(*e.args[1]);
    return false;
  };
  if (!linear(*s.expr)) return "'" + s.name + "' is not linear in its contraction over " + axis + " (only products, quotients and negation wrap it)";
  return {};
}

std::vector<const Expr*> reducers_over(const Expr& e, const std::string& axis) {
  std::vector<const Expr*> out;
  std::function<void(const Expr&)> visit = [&](const Expr& n) {
    if (n.kind == Expr::Kind::apply && (n.op == Op::contract || n.op == Op::sum || n.op == Op::max || n.op == Op::mean) &&
        has(n.axes, axis)) {
      out.push_back(&n);
      return;
    }
    for (const auto& a : n.args) visit(*a);
  };
  visit(e);
  return out;
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
        // Only nodes that reduce or normalise along the axis count as folds; pick (a gather's
        // one-hot select) names the axis after ';' but is element-wise in it, and so are the
        // positional ops (pos, causal, band): a function of the element's global indices, which
        // every emitter evaluates at the chunk's offset plus the index within it.
        auto folds = [&](const Expr& n) {
          return n.kind == Expr::Kind::apply && std::find(n.axes.begin(), n.axes.end(), axis) != n.axes.end() &&
                 (n.op == Op::contract || n.op == Op::sum || n.op == Op::max || n.op == Op::mean || n.op == Op::softmax ||
                  n.op == Op::layernorm || n.op == Op::rmsnorm);
        };
        bool nested = false;
        walk(*w->statement->expr, [&](const Expr& n) {
          if (!folds(n)) return;
          for (const auto& arg : n.args)
            walk(*arg, [&](const Expr& inner) { nested |= &inner != &n && folds(inner); });
        });
        if (nested)
          return fail(w, "'" + name + "' reduces " + axis + " over a value that itself reduces or normalises along " + axis +
                             "; the inner result is complete only after the loop; keep " + axis + " whole");
        if (has(w->statement->axes, axis))
          return fail(w, "'" + name + "' reduces " + axis + " inside its expression (" + std::string(op_name(r.op)) + ") but keeps " + axis +
                             " in its output: every element needs the complete reduction, known only after the loop; no lemma "
                             "streams a normaliser written as an expression; keep " + axis + " whole");
        std::string id = r.op == Op::max ? "max-monoid" : "associative-sum";
        for (const Expr* node : reducers_over(*w->statement->expr, axis)) {
          ReductionForm form = reduction_form(*node, axis, by_name, after_loop);
          if (form.lemma.empty()) return fail(w, "'" + name + "' is not streamable along " + axis + ": " + form.why);
          if (form.lemma == "online-rescaled-sum" || form.lemma == "chan-centred-moment") id = form.lemma;
        }
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
        int normalisers = 0;
        walk(*w->statement->expr, [&](const Expr& n) {
          normalisers += n.kind == Expr::Kind::apply && (n.op == Op::softmax || n.op == Op::layernorm || n.op == Op::rmsnorm) &&
                         has(n.axes, axis);
        });
        if (normalisers > 1)
          return fail(w, "'" + name + "' holds " + std::to_string(normalisers) + " normalisers along " + axis +
                             "; a stream carries the statistics of one per statement: give each a statement of its own");
        if (passes == 1 && r.node != w->statement->expr.ptr.get())
          return fail(w, opn + " inside an expression in '" + name + "' is not streamable along " + axis + " in one pass: the " +
                             normaliser_lemma(r.op) + " lemma needs the normaliser to be the whole statement that the contraction reads; "
                             "stream it in two passes (stream " + axis + " by N twice) or give it a statement of its own");
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
          int reads = 0;  // linear: the normaliser read once (contract(P, P; x) is quadratic in it)
          for (const auto& arg : ur.node->args) {
            direct |= arg->kind == Expr::Kind::ref && arg->name == name;
            walk(*arg, [&](const Expr& n) { reads += n.kind == Expr::Kind::ref && n.name == name; });
          }
          direct &= reads == 1;
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
