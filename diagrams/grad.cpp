// Reverse mode on diagrams (contract: grad.hpp; the rules: adjoints.hpp).
#include "diagrams/grad.hpp"

#include <algorithm>
#include <functional>
#include <set>

#include "diagrams/adjoints.hpp"
#include "diagrams/diagnostics.hpp"
#include "diagrams/graph_view.hpp"
#include "diagrams/inline_calls.hpp"
#include "diagrams/printer.hpp"

namespace napkin {

namespace {

using grad::Term;

/** True if `e` holds an operation that is not element-wise: computing it twice costs a pass. */
bool expensive(const Expr& e) {
  bool found = false;
  walk(e, [&](const Expr& n) { found |= n.kind == Expr::Kind::apply && !is_elementwise(n.op) && !is_positional(n.op); });
  return found;
}

Statement statement(const std::string& name, const AxisList& axes, ExprPtr e) {
  Statement s;
  s.name = name;
  s.axes = axes;
  s.axis_locs.assign(axes.size(), SourceLoc{});
  s.expr = std::move(e);
  return s;
}

/** A normaliser node of `e` that is not `e` itself and holds no other, or nullptr. */
const Expr* inner_normaliser(const Expr& e, bool root = true) {
  for (const auto& a : e.args)
    if (const Expr* n = inner_normaliser(*a, false)) return n;
  return !root && is_normaliser(e) ? &e : nullptr;
}

/** `d` with every node `find` picks in a statement's expression moved into a statement of its own,
 *  named `<S>` + `suffix(node)` (fresh), placed before it, until `find` picks none. */
Diagram hoist_nodes(const Program& p, Diagram d, const std::function<const Expr*(const Expr&)>& find,
                    const std::function<std::string(const Expr&)>& suffix) {
  std::set<std::string> taken = declared_names(d);
  for (bool changed = true; changed;) {
    changed = false;
    for (std::size_t k = 0; k < d.items.size() && !changed; ++k) {
      auto* s = std::get_if<Statement>(&d.items[k]);
      const Expr* n = s ? find(*s->expr) : nullptr;
      if (!n) continue;
      Typer typer(d, p.diagrams, nullptr);
      const AxisList axes = *typer.axes_of(*n);
      Statement hoisted = statement(claim_name(s->name + suffix(*n), taken), axes, {});
      hoisted.expr = find_node(s->expr, n);
      s->expr = replace_node(s->expr, n, make_ref(hoisted.name, n->loc));
      d.items.insert(d.items.begin() + static_cast<std::ptrdiff_t>(k), std::move(hoisted));
      changed = true;
    }
  }
  return d;
}

/** `d` with every normaliser that is not a whole right-hand side in a statement `<S>_<op>` of its own. */
Diagram hoist_normalisers(const Program& p, Diagram d) {
  return hoist_nodes(p, std::move(d), [](const Expr& e) { return inner_normaliser(e); },
                     [](const Expr& n) { return "_" + std::string(op_name(n.op)); });
}

/** The first node of `e` that applies an element-wise function whose derivative reads its
 *  argument (grad::adjoint_reads_argument: silu, gelu, log, ...) to an expensive argument (a contraction or reduction): the
 *  argument, or nullptr. */
const Expr* expensive_argument(const Expr& e) {
  if (e.kind == Expr::Kind::apply && e.args.size() == 1 && grad::adjoint_reads_argument(e.op) && e.args[0]->kind == Expr::Kind::apply &&
      expensive(*e.args[0]))
    return e.args[0].ptr.get();
  for (const auto& a : e.args)
    if (const Expr* n = expensive_argument(*a)) return n;
  return nullptr;
}

/** `d` with every expensive argument of such a function in a forward statement `<S>_v` of its
 *  own (G = silu(contract(X, W1; m)) becomes G_v = contract(X, W1; m); G = silu(G_v)): the
 *  backward reads the pre-activation its adjoint needs as a forward statement, which it recomputes
 *  together with G in one kernel or which the forward saves (checkpoint.hpp), instead of a second
 *  contraction of its own (session 19: mlp_swiglu's backward computed X W1 twice, 0.34 ms of a
 *  training step). */
Diagram hoist_activation_arguments(const Program& p, Diagram d) {
  return hoist_nodes(p, std::move(d), [](const Expr& e) { return expensive_argument(e); }, [](const Expr&) { return std::string("_v"); });
}

/** The reverse sweep over one flat diagram. */
class Differentiator {
 public:
  Differentiator(const Program& p, Diagram fwd)
      : fwd_(std::move(fwd)), typer_(fwd_, p.diagrams, nullptr), taken_(declared_names(fwd_)) {
    for (const auto* s : fwd_.statements()) index(s->expr);
  }

  GradResult run(const std::vector<std::string>& wrt_asked, const std::vector<std::string>& save);

 private:
  void index(const ExprPtr& e) {
    node_ptr_[e.ptr.get()] = e;
    for (const auto& a : e->args) index(a);
  }
  std::vector<std::string> choose_wrt(const std::vector<std::string>& asked);
  std::set<std::string> depending_on(const std::set<std::string>& roots) const;
  bool active(const Expr& e) const {
    bool found = false;
    walk(e, [&](const Expr& n) { found |= n.kind == Expr::Kind::ref && active_.count(n.name); });
    return found;
  }
  Term keep(const Term& t, const std::string& base);
  Term value(const Expr& e);
  void save_statistics(const Statement& s);
  void backprop(const Expr& node, const Term& cot);
  Term adjoint(const std::string& name, const AxisList& primal, bool always_statement);
  std::optional<Term> rowsum_by_output(const Statement& p);
  ExprPtr recomputed(const Statement& s) const;
  Diagram backward(const std::vector<std::string>& wrt, const std::vector<std::pair<std::string, const OutputDecl*>>& cots);
  void hoist_contraction_operands(const std::vector<std::pair<std::string, const OutputDecl*>>& cots);
  Diagram forward() const;

  Diagram fwd_;
  mutable Typer typer_;  // axes_of is not const (it reports through its engine)
  std::set<std::string> taken_;
  std::map<const Expr*, ExprPtr> node_ptr_;
  std::set<std::string> active_;
  std::map<std::string, std::vector<Term>> contrib_;
  std::vector<Statement> bwd_;
  std::map<const Expr*, Term> kept_values_;
  const Statement* cur_ = nullptr;
  std::map<std::string, grad::SavedStats> stats_;          ///< by normaliser statement
  std::map<std::string, std::vector<Statement>> stat_defs_;  ///< forward statements of each's statistics
  std::vector<SavedStatistic> saved_;
  std::set<std::string> save_;        ///< forward statements to save rather than recompute
  std::vector<std::string> stored_;   ///< those of save_ the backward reads
  std::vector<std::string> recomputed_;
  std::map<std::string, Term> adjoints_;  ///< each statement's adjoint, once made
  /** The dtype a saved statement is stored in: its label, else the diagram's first output's. */
  DType stored_dtype(const Statement& s) const {
    if (s.dtype) return *s.dtype;
    const auto outs = fwd_.outputs();
    return outs.empty() ? DType::fp32 : outs.front()->dtype;
  }
};

std::set<std::string> Differentiator::depending_on(const std::set<std::string>& roots) const {
  std::set<std::string> out = roots;
  for (bool changed = true; changed;) {
    changed = false;
    for (const auto* s : fwd_.statements())
      if (!out.count(s->name))
        for (const auto& r : referenced_arrays(*s->expr, fwd_))
          if (out.count(r)) {
            changed = out.insert(s->name).second;
            break;
          }
  }
  return out;
}

std::vector<std::string> Differentiator::choose_wrt(const std::vector<std::string>& asked) {
  auto reaches_output = [&](const std::string& input) {
    auto deps = depending_on({input});
    for (const auto* o : fwd_.outputs())
      if (deps.count(o->name)) return true;
    return false;
  };
  std::vector<std::string> out;
  if (asked.empty()) {
    for (const auto* i : fwd_.inputs())
      if (!is_integer_dtype(i->dtype) && reaches_output(i->name)) out.push_back(i->name);
    if (out.empty()) throw UserError("no output of '" + fwd_.name + "' depends on a floating-point input: nothing to differentiate");
    return out;
  }
  for (const auto& w : asked) {
    const InputDecl* in = fwd_.find_input(w);
    if (!in) throw UserError("--wrt: '" + w + "' is not an input of diagram '" + fwd_.name + "'");
    if (is_integer_dtype(in->dtype))
      throw UserError("--wrt: input '" + w + "' is of the integer dtype " + std::string(dtype_name(in->dtype)) + ": it has no gradient");
    if (!reaches_output(w)) throw UserError("--wrt: no output of diagram '" + fwd_.name + "' depends on input '" + w + "'");
    if (std::find(out.begin(), out.end(), w) != out.end()) throw UserError("--wrt: input '" + w + "' is named twice");
    out.push_back(w);
  }
  return out;
}

Term Differentiator::keep(const Term& t, const std::string& base) {
  if (t.e->kind != Expr::Kind::apply) return t;
  std::string n = claim_name(base, taken_);
  bwd_.push_back(statement(n, t.axes, t.e));
  return grad::ref(n, t.axes);
}

Term Differentiator::value(const Expr& e) {
  if (cur_ && &e == cur_->expr.ptr.get()) return grad::ref(cur_->name, cur_->axes);
  if (e.kind == Expr::Kind::ref) {
    if (const auto* axes = fwd_.array_axes(e.name)) return grad::ref(e.name, *axes);
    return grad::axis_size(e.name);
  }
  const ExprPtr& ptr = node_ptr_.at(&e);
  if (!expensive(e)) return {ptr, *typer_.axes_of(e)};
  if (auto it = kept_values_.find(&e); it != kept_values_.end()) return it->second;
  Term kept = keep({ptr, *typer_.axes_of(e)}, cur_->name + "_v");
  kept_values_.emplace(&e, kept);
  return kept;
}

void Differentiator::save_statistics(const Statement& s) {
  const Expr& n = *s.expr;
  const ExprPtr& x = n.args[0];
  const AxisList rows = [&] {
    AxisList r;
    for (const auto& a : s.axes)
      if (!contains(n.axes, a)) r.push_back(a);
    return r;
  }();
  Number eps{1e-5, "1e-5"};
  for (const auto& b : n.bindings)
    if (b.key == "eps" && b.number) eps = *b.number;
  auto apply = [](Op op, std::vector<ExprPtr> args, const AxisList& axes = {}) {
    auto e = std::make_shared<Expr>();
    e->kind = Expr::Kind::apply, e->op = op, e->args = std::move(args), e->axes = axes;
    e->axis_locs.assign(axes.size(), SourceLoc{});
    return ExprPtr{std::move(e)};
  };
  auto add = [&](const std::string& what, ExprPtr e) {
    std::string name = claim_name(s.name + "_" + (what == "logsumexp" ? "lse" : what), taken_);
    stat_defs_[s.name].push_back(statement(name, rows, std::move(e)));
    saved_.push_back({name, s.name, what});
    return grad::ref(name, rows);
  };
  auto& st = stats_[s.name];
  if (n.op == Op::softmax) {
    st.lse = add("logsumexp", apply(Op::logsumexp, {x}, n.axes));
    return;
  }
  ExprPtr centred = x;
  if (n.op == Op::layernorm) {
    st.mean = add("mean", apply(Op::mean, {x}, n.axes));
    centred = apply(Op::sub, {x, st.mean->e});
  }
  ExprPtr ms = apply(Op::mean, {apply(Op::mul, {centred, centred})}, n.axes);
  st.rstd = add("rstd", apply(Op::rsqrt, {apply(Op::add, {ms, make_number(eps, {})})}));
}

void Differentiator::backprop(const Expr& node, const Term& cot) {
  if (node.kind == Expr::Kind::ref) {
    if (active_.count(node.name)) contrib_[node.name].push_back(cot);
    return;
  }
  if (node.kind != Expr::Kind::apply) return;
  std::size_t n_active = 0;
  for (const auto& a : node.args) n_active += active(*a);
  const bool reads_twice = n_active > 1 || node.op == Op::softmax || node.op == Op::layernorm ||
                           node.op == Op::rmsnorm || node.op == Op::l2norm;
  Term c = cot;
  if (reads_twice && expensive(*c.e)) c = keep(c, "d" + cur_->name + "_c");
  grad::RuleContext ctx;
  ctx.cot = c;
  ctx.value = [this](const Expr& e) { return value(e); };
  ctx.axes_of = [this](const Expr& e) { return *typer_.axes_of(e); };
  ctx.scalar = [this](const Expr& e) {
    bool scalar = true;
    walk(e, [&](const Expr& n) {
      scalar = scalar && !(n.kind == Expr::Kind::ref && !fwd_.find_axis(n.name)) && !(n.kind == Expr::Kind::apply && is_positional(n.op));
    });
    return scalar;
  };
  ctx.keep = [this](const Term& t, const std::string& what) { return keep(t, "d" + cur_->name + "_" + what); };
  if (auto it = stats_.find(cur_->name); it != stats_.end() && &node == cur_->expr.ptr.get()) ctx.saved = &it->second;
  if (&node == cur_->expr.ptr.get() && node.op == Op::softmax) ctx.softmax_rowsum = rowsum_by_output(*cur_);
  for (std::size_t i = 0; i < node.args.size(); ++i)
    if (active(*node.args[i]))
      if (auto ci = grad::operand_cotangent(node, i, ctx)) backprop(*node.args[i], *ci);
}

std::optional<Term> Differentiator::rowsum_by_output(const Statement& p) {
  // P's one reader: a statement O = contract(.., P, ..; r), P once, r none of P's rows.
  const Statement* reader = nullptr;
  for (const auto* s : fwd_.statements())
    for (const auto& r : referenced_arrays(*s->expr, fwd_))
      if (r == p.name) {
        if (reader) return std::nullopt;
        reader = s;
      }
  if (!reader || !adjoints_.count(reader->name)) return std::nullopt;
  const Expr& o = *reader->expr;
  if (o.kind != Expr::Kind::apply || o.op != Op::contract) return std::nullopt;
  std::size_t uses = 0;
  for (const auto& a : o.args) {
    if (a->kind == Expr::Kind::ref && a->name == p.name && !a->level) ++uses;
    else if (contains(referenced_arrays(*a, fwd_), p.name)) return std::nullopt;  // P inside another operand
  }
  const AxisList& normalised = p.expr->axes;
  AxisList rows;
  for (const auto& a : p.axes)
    if (!contains(normalised, a)) rows.push_back(a);
  for (const auto& r : o.axes)
    if (contains(rows, r)) return std::nullopt;
  const auto outputs = fwd_.outputs();
  const bool output = std::any_of(outputs.begin(), outputs.end(), [&](const OutputDecl* d) { return d->name == reader->name; });
  if (uses != 1 || !(output || save_.count(reader->name))) return std::nullopt;
  save_.insert(reader->name);  // the backward reads O from the forward
  AxisList others;
  for (const auto& a : reader->axes)
    if (!contains(rows, a)) others.push_back(a);
  Term prod = grad::binary(Op::mul, adjoints_.at(reader->name), grad::ref(reader->name, reader->axes));
  return keep(grad::sum_over(prod, others), "d" + p.name + "_rowsum");
}

Term Differentiator::adjoint(const std::string& name, const AxisList& primal, bool always_statement) {
  auto& cs = contrib_[name];
  if (cs.empty()) cs.push_back(grad::number(0));  // reached only through operations of derivative 0 (step, a mask)
  if (cs.size() == 1 && cs[0].e->kind == Expr::Kind::ref && !always_statement) return cs[0];
  Term sum = cs[0];
  for (std::size_t i = 1; i < cs.size(); ++i) sum = grad::binary(Op::add, sum, cs[i]);
  if (always_statement) sum = grad::expand(sum, primal);
  AxisList axes;
  for (const auto& a : primal)
    if (contains(sum.axes, a)) axes.push_back(a);
  NAPKIN_ASSERT(axes.size() == sum.axes.size()) << "the adjoint of " << name << " has axes " << print_axes(sum.axes)
                                                 << " beyond its array's " << print_axes(primal);
  std::string n = claim_name("d" + name, taken_);
  bwd_.push_back(statement(n, axes, sum.e));
  return grad::ref(n, axes);
}

ExprPtr Differentiator::recomputed(const Statement& s) const {
  auto it = stats_.find(s.name);
  if (it == stats_.end()) return s.expr;
  const auto& st = it->second;
  const Expr& n = *s.expr;
  Term x{n.args[0], *typer_.axes_of(*n.args[0])};
  if (n.op == Op::softmax) return grad::unary(Op::exp, grad::binary(Op::sub, x, *st.lse)).e;
  Term y = n.op == Op::layernorm ? grad::binary(Op::sub, x, *st.mean) : x;
  y = grad::binary(Op::mul, y, *st.rstd);
  if (n.args.size() > 1) y = grad::binary(Op::mul, y, {n.args[1], *typer_.axes_of(*n.args[1])});
  if (n.args.size() > 2) y = grad::binary(Op::add, y, {n.args[2], *typer_.axes_of(*n.args[2])});
  return y.e;
}

Diagram Differentiator::forward() const {
  Diagram d = fwd_;
  d.name = fwd_.name + "_fwd";
  d.trivia.leading = {std::string(" ") + fwd_.name + " with the row statistics its backward reads as extra outputs (napkin grad)"};
  d.items.clear();
  for (const auto& item : fwd_.items) {
    d.items.push_back(item);
    if (const auto* s = std::get_if<Statement>(&item); s && stat_defs_.count(s->name))
      for (const auto& st : stat_defs_.at(s->name))
        if (std::any_of(saved_.begin(), saved_.end(), [&](const SavedStatistic& sv) { return sv.name == st.name; })) d.items.emplace_back(st);
  }
  for (const auto& sv : saved_) {
    OutputDecl o;
    o.name = sv.name;
    o.dtype = DType::fp32;
    d.items.emplace_back(std::move(o));
  }
  const auto outputs = fwd_.outputs();
  for (const auto& name : stored_) {
    if (std::any_of(outputs.begin(), outputs.end(), [&](const OutputDecl* o) { return o->name == name; })) continue;  // an output already
    OutputDecl o;
    o.name = name;
    o.dtype = stored_dtype(*fwd_.find_statement(name));
    o.trivia.trailing = "saved for the backward";
    d.items.emplace_back(std::move(o));
  }
  return d;
}

Diagram Differentiator::backward(const std::vector<std::string>& wrt,
                                 const std::vector<std::pair<std::string, const OutputDecl*>>& cots) {
  // The forward statements the backward reads, transitively, recomputed.
  std::set<std::string> need;
  std::vector<ExprPtr> work;
  for (const auto& s : bwd_) work.push_back(s.expr);
  while (!work.empty()) {
    ExprPtr e = work.back();
    work.pop_back();
    walk(*e, [&](const Expr& n) {
      if (n.kind != Expr::Kind::ref || need.count(n.name)) return;
      const Statement* s = fwd_.find_statement(n.name);
      const bool statistic = std::any_of(saved_.begin(), saved_.end(), [&](const SavedStatistic& sv) { return sv.name == n.name; });
      if (!s && !fwd_.find_input(n.name) && !statistic) return;
      need.insert(n.name);
      if (s && !save_.count(n.name)) work.push_back(recomputed(*s));
    });
  }
  hoist_contraction_operands(cots);
  // A statistic whose statement is saved, not recomputed, is not read: the forward keeps it not.
  std::erase_if(saved_, [&](const SavedStatistic& sv) { return !need.count(sv.name); });
  Diagram d;
  d.name = fwd_.name + "_bwd";
  d.trivia.leading = {std::nullopt, std::string(" The backward of ") + fwd_.name + " (napkin grad): cotangents d<output> in, gradients d<input> out"};
  for (const auto* a : fwd_.axes()) d.items.emplace_back(*a);
  for (const auto* i : fwd_.inputs())
    if (need.count(i->name)) d.items.emplace_back(*i);
  for (const auto& [name, out] : cots) {
    InputDecl in;
    in.name = name;
    in.axes = *fwd_.array_axes(out->name);
    in.axis_locs.assign(in.axes.size(), SourceLoc{});
    in.dtype = out->dtype;
    in.trivia.trailing = "cotangent of " + out->name;
    d.items.emplace_back(std::move(in));
  }
  for (const auto* s : fwd_.statements())
    if (need.count(s->name) && save_.count(s->name)) {
      stored_.push_back(s->name);
      InputDecl in;
      in.name = s->name;
      in.axes = s->axes;
      in.axis_locs.assign(in.axes.size(), SourceLoc{});
      in.dtype = stored_dtype(*s);
      in.trivia.trailing = "saved by the forward";
      d.items.emplace_back(std::move(in));
    }
  for (const auto& sv : saved_) {
    InputDecl in;
    in.name = sv.name;
    for (const auto& st : stat_defs_.at(sv.statement))
      if (st.name == sv.name) in.axes = st.axes;
    in.axis_locs.assign(in.axes.size(), SourceLoc{});
    in.dtype = DType::fp32;
    in.trivia.trailing = "saved by the forward: " + sv.what + " of " + sv.statement;
    d.items.emplace_back(std::move(in));
  }
  for (const auto* s : fwd_.statements())
    if (need.count(s->name) && !save_.count(s->name)) {
      recomputed_.push_back(s->name);
      Statement copy = *s;
      copy.expr = recomputed(*s);
      copy.trivia = {};
      copy.trivia.trailing = stats_.count(s->name) ? "recomputed from the saved statistics" : "recomputed";
      d.items.emplace_back(std::move(copy));
    }
  for (const auto& s : bwd_) d.items.emplace_back(s);
  for (const auto& w : wrt) {
    OutputDecl o;
    o.name = "d" + w;
    for (const auto& s : bwd_)
      if (s.trivia.trailing == "gradient of " + w) o.name = s.name;
    o.dtype = fwd_.find_input(w)->dtype;
    d.items.emplace_back(std::move(o));
  }
  return d;
}

/** Two rewrites of the backward's statements, for the tensor-core forms. Every contraction operand
 *  that is an element-wise expression of
 *  arrays (an adjoint rule's product: dS = dP * P * (1 - P) under sigmoid attention, the SwiGLU
 *  gate's dG * silu'(G)) becomes a statement of its own, placed before its first reader and
 *  shared by every reader of the same expression: the contraction then reads an array, which the
 *  tensor-core forms take (lower/gemm_form.hpp, flash_bwd_form.hpp: operands are arrays), and
 *  the fusion search may still fuse the new statement with its producer or its readers. Its axes:
 *  those of the arrays it reads, in order of first appearance. And in a statement summing
 *  several contractions, each but the last becomes a statement `<name>_part` (its axes in the
 *  statement's order), read by the last one's epilogue: the GEMM form takes one contraction (or a
 *  pair sharing an operand), not a sum of unrelated ones. */
void Differentiator::hoist_contraction_operands(const std::vector<std::pair<std::string, const OutputDecl*>>& cots) {
  std::map<std::string, AxisList> axes;
  for (const auto& n : declared_names(fwd_))
    if (const auto* ax = fwd_.array_axes(n)) axes[n] = *ax;
  for (const auto& [name, out] : cots) axes[name] = *fwd_.array_axes(out->name);
  for (const auto& st : stat_defs_)
    for (const auto& def : st.second) axes[def.name] = def.axes;
  std::map<std::string, std::string> hoisted;  // printed expression -> its statement
  for (std::size_t i = 0; i < bwd_.size(); ++i) {
    axes[bwd_[i].name] = bwd_[i].axes;
    for (bool changed = true; changed;) {
      changed = false;
      const Expr* target = nullptr;
      ExprPtr target_ptr;
      walk(*bwd_[i].expr, [&](const Expr& n) {
        if (target || n.kind != Expr::Kind::apply || n.op != Op::contract) return;
        for (const auto& a : n.args) {
          if (a->kind != Expr::Kind::apply) continue;
          bool elementwise = true, reads_array = false;
          walk(*a, [&](const Expr& m) {
            if (m.kind == Expr::Kind::apply && !is_elementwise(m.op)) elementwise = false;
            if (m.kind == Expr::Kind::ref && axes.count(m.name)) reads_array = true;
          });
          if (elementwise && reads_array && !target) target = a.ptr.get(), target_ptr = a;
        }
      });
      if (!target) break;
      const std::string text = print_expr(*target);
      auto it = hoisted.find(text);
      if (it == hoisted.end()) {
        AxisList ax;
        walk(*target, [&](const Expr& m) {
          if (m.kind == Expr::Kind::ref && axes.count(m.name))
            for (const auto& a : axes.at(m.name))
              if (!contains(ax, a)) ax.push_back(a);
        });
        const std::string name = claim_name(bwd_[i].name + "_operand", taken_);
        Statement h = statement(name, ax, target_ptr);
        axes[name] = ax;
        bwd_.insert(bwd_.begin() + static_cast<std::ptrdiff_t>(i), std::move(h));
        ++i;
        it = hoisted.emplace(text, name).first;
      }
      bwd_[i].expr = replace_node(bwd_[i].expr, target, make_ref(it->second, target->loc));
      changed = true;
    }
    // A sum of contractions (dX = dG W1^T + dU W3^T): every contraction but the last its own
    // statement, which the last one's GEMM reads in its epilogue.
    for (bool changed = true; changed;) {
      changed = false;
      std::vector<ExprPtr> cons;
      std::function<void(const ExprPtr&)> collect = [&](const ExprPtr& e) {
        if (e->kind != Expr::Kind::apply) return;
        if (e->op == Op::contract) cons.push_back(e);
        else if (is_elementwise(e->op))
          for (const auto& a : e->args) collect(a);
      };
      collect(bwd_[i].expr);
      if (cons.size() < 2) break;
      const ExprPtr& first = cons.front();
      AxisList ax;
      bool typed = true;
      for (const auto& a : first->args) {
        if (a->kind != Expr::Kind::ref || !axes.count(a->name)) typed = false;
        else
          for (const auto& x : axes.at(a->name))
            if (!contains(first->axes, x) && !contains(ax, x)) ax.push_back(x);
      }
      if (!typed || std::any_of(ax.begin(), ax.end(), [&](const std::string& x) { return !contains(bwd_[i].axes, x); })) break;
      AxisList ordered;
      for (const auto& x : bwd_[i].axes)
        if (contains(ax, x)) ordered.push_back(x);
      const std::string name = claim_name(bwd_[i].name + "_part", taken_);
      axes[name] = ordered;
      bwd_[i].expr = replace_node(bwd_[i].expr, first.ptr.get(), make_ref(name, first->loc));
      bwd_.insert(bwd_.begin() + static_cast<std::ptrdiff_t>(i), statement(name, ordered, first));
      ++i;
      changed = true;
    }
  }
}

GradResult Differentiator::run(const std::vector<std::string>& wrt_asked, const std::vector<std::string>& save) {
  GradResult r;
  r.wrt = choose_wrt(wrt_asked);
  for (const auto& s : save) {
    if (!fwd_.find_statement(s))
      throw UserError("--save: '" + s + "' is not a statement of " + fwd_.name + "_fwd (the forward with calls inlined)");
    save_.insert(s);
  }
  active_ = depending_on({r.wrt.begin(), r.wrt.end()});
  std::vector<std::pair<std::string, const OutputDecl*>> cots;
  for (const auto* o : fwd_.outputs())
    if (active_.count(o->name)) {
      std::string n = claim_name("d" + o->name, taken_);
      cots.emplace_back(n, o);
      r.cotangents.push_back(n);
      contrib_[o->name].push_back(grad::ref(n, *fwd_.array_axes(o->name)));
    }
  auto order = dataflow_graph(fwd_).topological_order();
  NAPKIN_ASSERT(order) << fwd_.name << ": a cycle in a verified diagram";
  const std::size_t n_inputs = fwd_.inputs().size();
  const auto statements = fwd_.statements();
  for (auto it = order->rbegin(); it != order->rend(); ++it) {
    if (*it < n_inputs) continue;
    const Statement& s = *statements[*it - n_inputs];
    if (!active_.count(s.name) || !contrib_.count(s.name)) continue;
    cur_ = &s;
    Term ds = adjoint(s.name, s.axes, false);
    adjoints_.emplace(s.name, ds);
    if (is_normaliser(*s.expr)) save_statistics(s);
    backprop(*s.expr, ds);
  }
  cur_ = nullptr;
  for (const auto& w : r.wrt) {
    adjoint(w, fwd_.find_input(w)->axes, true);
    bwd_.back().trivia.trailing = "gradient of " + w;
  }
  Diagram bwd = backward(r.wrt, cots);  // first: it finds the statements saved and recomputed
  r.saved = saved_;
  r.file.diagrams.push_back(forward());
  r.file.diagrams.push_back(std::move(bwd));
  r.recomputed = recomputed_;
  r.stored = stored_;
  return r;
}

}  // namespace

GradResult differentiate(const Program& p, const Diagram& d, const std::vector<std::string>& wrt,
                         const std::vector<std::string>& save) {
  Diagram flat = hoist_activation_arguments(p, hoist_normalisers(p, inline_calls(p, d)));
  Differentiator diff(p, std::move(flat));
  return diff.run(wrt, save);
}

}  // namespace napkin
