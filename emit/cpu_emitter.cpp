#include "emit/cpu_emitter.hpp"

#include <cmath>
#include <cstdio>
#include <functional>
#include <set>

#include "derive/lemmas.hpp"
#include "diagrams/graph_view.hpp"

namespace napkin {

namespace {

std::string num(double v) {
  if (std::isinf(v)) return v > 0 ? "INFINITY" : "(-INFINITY)";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  std::string s = buf;
  if (s.find_first_of(".e") == std::string::npos) s += ".0";
  return "(" + s + ")";
}

/** A block-local buffer: row-major over `axes`, dimension T_<axis> each. */
struct Buf {
  std::string name;
  AxisList axes;
};

class FunctionEmitter {
 public:
  FunctionEmitter(const Program& p, const Diagram& d, const Derivation& dv, std::string fn, std::string& helpers)
      : p_(p), d_(d), dv_(dv), fn_(std::move(fn)), helpers_(helpers), typer_(d, p.diagrams, nullptr),
        weave_(weave_analysis(p, d)) {}

  std::string run() {
    line("static void " + fn_ + "(const double* const* in, double* const* out, const int64_t* sz) {");
    ++indent_;
    int i = 0;
    for (const auto* a : d_.axes()) line("const int64_t N_" + a->name + " = sz[" + std::to_string(i++) + "];");
    i = 0;
    for (const auto* in : d_.inputs()) line("const double* g_" + in->name + " = in[" + std::to_string(i++) + "];");
    std::set<std::string> outs;
    for (const auto* o : d_.outputs()) outs.insert(o->name);
    for (const auto* s : d_.statements())
      if (!outs.count(s->name)) {
        line("std::vector<double> hbm_" + s->name + "(" + global_size(s->axes) + ");  // in HBM between kernels");
        line("double* g_" + s->name + " = hbm_" + s->name + ".data();");
      }
    i = 0;
    for (const auto* o : d_.outputs()) {
      if (d_.find_input(o->name)) {
        line("std::copy(g_" + o->name + ", g_" + o->name + " + " + global_size(d_.find_input(o->name)->axes) + ", out[" +
             std::to_string(i++) + "]);  // an input that is also an output");
        continue;
      }
      line("double* g_" + o->name + " = out[" + std::to_string(i++) + "];");
    }
    for (std::size_t k = 0; k < dv_.chosen.kernels.size(); ++k) kernel(k);
    --indent_;
    line("}");
    return out_;
  }

 private:
  // ------------------------------------------------------------------ text helpers
  void line(const std::string& s) { out_ += std::string(2 * static_cast<std::size_t>(indent_), ' ') + s + "\n"; }
  void open(const std::string& s) { line(s + " {"), ++indent_; }
  void close() { --indent_, line("}"); }
  std::string global_size(const AxisList& axes) const {
    std::string s = "1";
    for (const auto& a : axes) s += " * N_" + a;
    return s;
  }
  std::string local_size(const AxisList& axes) const {
    std::string s = "1";
    for (const auto& a : axes) s += " * T_" + a;
    return s;
  }
  static std::string local_index(const AxisList& axes) {
    std::string s = "0";
    for (const auto& a : axes) s = "(" + s + ") * T_" + a + " + i_" + a;
    return s;
  }
  static std::string global_index(const AxisList& axes) {
    std::string s = "0";
    for (const auto& a : axes) s = "(" + s + ") * N_" + a + " + (o_" + a + " + i_" + a + ")";
    return s;
  }
  void loops(const AxisList& axes) {
    for (const auto& a : axes) open("for (int64_t i_" + a + " = 0; i_" + a + " < n_" + a + "; ++i_" + a + ")");
  }
  void end_loops(const AxisList& axes) {
    for (std::size_t i = 0; i < axes.size(); ++i) close();
  }
  std::string temp() { return "t" + std::to_string(temps_++); }
  std::string at(const Buf& b) const { return b.name + "[" + local_index(b.axes) + "]"; }
  AxisList axes_of(const Expr& e) { return typer_.axes_of(e).value_or(AxisList{}); }

  // ------------------------------------------------------------------ expressions
  /** Emits, before the statement's loops, every node of `e` that needs a buffer of its own. */
  void prepare(const Expr& e) {
    if (e.kind != Expr::Kind::apply || subst_.count(&e)) return;
    if (e.op == Op::call) return call(e);
    for (const auto& a : e.args) prepare(*a);
    switch (e.op) {
      case Op::contract: case Op::sum: case Op::max: case Op::mean: reduction(e); break;
      case Op::softmax: case Op::layernorm: case Op::rmsnorm: normalisation(e); break;
      default: break;
    }
  }

  /** The value of `e` inside loops over (at least) its axes. */
  std::string value(const Expr& e) {
    if (auto it = subst_.find(&e); it != subst_.end()) return at(it->second);
    switch (e.kind) {
      case Expr::Kind::number: return num(e.number.value);
      case Expr::Kind::ref:
        if (d_.array_axes(e.name)) return at(Buf{buffer_[e.name], *d_.array_axes(e.name)});
        return "static_cast<double>(N_" + e.name + ")";
      case Expr::Kind::apply: break;
    }
    auto v = [&](std::size_t i) { return value(*e.args.at(i)); };
    switch (e.op) {
      case Op::neg: return "(-" + v(0) + ")";
      case Op::exp:
        if (&e == shifted_exp_)  // online-rescaled-sum: exp(E - M) with E = -inf is 0 at any finite final max
          return "napkin_exp_shifted(" + value(*e.args[0]->args[0]) + ", " + value(*e.args[0]->args[1]) + ")";
        return "std::exp(" + v(0) + ")";
      case Op::log: return "std::log(" + v(0) + ")";
      case Op::relu: return "napkin_relu(" + v(0) + ")";
      case Op::gelu: return "napkin_gelu(" + v(0) + ")";
      case Op::gelu_tanh: return "napkin_gelu_tanh(" + v(0) + ")";
      case Op::silu: return "napkin_silu(" + v(0) + ")";
      case Op::sigmoid: return "napkin_sigmoid(" + v(0) + ")";
      case Op::tanh: return "std::tanh(" + v(0) + ")";
      case Op::rsqrt: return "(1.0 / std::sqrt(" + v(0) + "))";
      case Op::sqrt: return "std::sqrt(" + v(0) + ")";
      case Op::add: return "(" + v(0) + " + " + v(1) + ")";
      case Op::sub: return "(" + v(0) + " - " + v(1) + ")";
      case Op::mul: return "(" + v(0) + " * " + v(1) + ")";
      case Op::div: return "(" + v(0) + " / " + v(1) + ")";
      case Op::cast: return "napkin_round(" + v(0) + ", " + std::to_string(static_cast<int>(*e.dtype)) + ")";
      case Op::mask: return "(" + v(1) + " != 0.0 ? " + v(0) + " : -INFINITY)";
      case Op::abs: return "std::fabs(" + v(0) + ")";
      case Op::step: return "napkin_step(" + v(0) + ")";
      case Op::erf: return "std::erf(" + v(0) + ")";
      case Op::pow: return "std::pow(" + v(0) + ", " + v(1) + ")";
      case Op::minimum: return "std::fmin(" + v(0) + ", " + v(1) + ")";
      case Op::maximum: return "std::fmax(" + v(0) + ", " + v(1) + ")";
      case Op::pos: return "static_cast<double>(o_" + e.axes[0] + " + i_" + e.axes[0] + ")";
      case Op::pick:  // a select, not a product: an infinite entry off the target stays out
        return "(static_cast<double>(o_" + e.axes[0] + " + i_" + e.axes[0] + ") == " + v(1) + " ? " + v(0) + " : 0.0)";
      case Op::causal: case Op::band: {
        const std::string d = "((o_" + e.axes[1] + " + i_" + e.axes[1] + ") - (o_" + e.axes[0] + " + i_" + e.axes[0] + "))";
        const MaskBand keep = mask_band(e);
        std::string test = d + " <= " + std::to_string(keep.hi);
        if (keep.lo) test += " && " + d + " >= " + std::to_string(*keep.lo);
        return "(" + test + " ? 1.0 : 0.0)";
      }
      default: break;
    }
    NAPKIN_ASSERT(false) << "no value for " << op_name(e.op);
    return {};
  }

  void reduction(const Expr& e) {
    AxisList out = axes_of(e);
    Buf t{temp(), out};
    line("std::vector<double> " + t.name + "(" + local_size(out) + ");  // " + std::string(op_name(e.op)) + " over " + join(e.axes));
    open("");
    loops(out);
    line(std::string("double acc = ") + (e.op == Op::max ? "-INFINITY" : "0.0") + ";");
    loops(e.axes);
    std::string term = product_of(e);
    line(e.op == Op::max ? "acc = std::fmax(acc, " + term + ");" : "acc += " + term + ";");
    end_loops(e.axes);
    line(at(t) + " = acc" + (e.op == Op::mean ? " / static_cast<double>(" + count(e.axes) + ")" : "") + ";");
    end_loops(out);
    close();
    subst_[&e] = t;
  }
  std::string product_of(const Expr& e, const std::string& replace_ref = "", const std::string& with = "") {
    std::string s;
    for (const auto& a : e.args) {
      std::string v = (!replace_ref.empty() && a->kind == Expr::Kind::ref && a->name == replace_ref) ? with : value(*a);
      s += (s.empty() ? "" : " * ") + v;
    }
    return s.empty() ? "1.0" : s;
  }
  std::string count(const AxisList& axes) const {
    std::string s = "1";
    for (const auto& a : axes) s += " * n_" + a;
    return s;
  }
  static std::string join(const AxisList& a) {
    std::string s;
    for (std::size_t i = 0; i < a.size(); ++i) s += (i ? ", " : "") + a[i];
    return s;
  }

  double eps(const Expr& e) const {
    for (const auto& b : e.bindings)
      if (b.key == "eps" && b.number) return b.number->value;
    return 1e-5;
  }

  /** Softmax, layernorm or rmsnorm with its axis whole in the block: the evaluator's arithmetic. */
  void normalisation(const Expr& e) {
    AxisList out = axes_of(e);
    const std::string& a = e.axes[0];
    AxisList rows;
    for (const auto& x : out)
      if (x != a) rows.push_back(x);
    Buf t{temp(), out};
    line("std::vector<double> " + t.name + "(" + local_size(out) + ");  // " + std::string(op_name(e.op)) + " along " + a);
    std::string x = value(*e.args[0]), dst = at(t);
    open("");
    loops(rows);
    if (e.op == Op::softmax) {
      line("double m = -INFINITY, s = 0.0;");
      loops({a}), line("m = std::fmax(m, " + x + ");"), end_loops({a});
      loops({a}), line("{ const double v = " + x + "; " + dst + " = v == -INFINITY ? 0.0 : std::exp(v - m); }"), line("s += " + dst + ";"), end_loops({a});
      loops({a}), line(dst + " /= s;"), end_loops({a});
    } else {
      std::string n = "static_cast<double>(n_" + a + ")";
      line("double mu = 0.0, var = 0.0;");
      if (e.op == Op::layernorm) {
        loops({a}), line("mu += " + x + ";"), end_loops({a});
        line("mu /= " + n + ";");
        loops({a}), line("var += (" + x + " - mu) * (" + x + " - mu);"), end_loops({a});
      } else {
        loops({a}), line("var += " + x + " * " + x + ";"), end_loops({a});
      }
      line("var /= " + n + ";");
      loops({a});
      std::string y = "((" + x + " - mu) / std::sqrt(var + " + num(eps(e)) + "))";
      if (e.args.size() > 1) y += " * " + value(*e.args[1]);
      if (e.args.size() > 2) y += " + " + value(*e.args[2]);
      line(dst + " = " + y + ";");
      end_loops({a});
    }
    end_loops(rows);
    close();
    subst_[&e] = t;
  }

  // ------------------------------------------------------------------ statements
  void compute(const Statement& s) {
    prepare(*s.expr);
    line("// " + s.name + print_axes_comment(s.axes));
    loops(s.axes);
    std::string v = value(*s.expr);
    if (s.dtype) v = "napkin_round(" + v + ", " + std::to_string(static_cast<int>(*s.dtype)) + ")";
    line(at(Buf{buffer_[s.name], s.axes}) + " = " + v + ";");
    end_loops(s.axes);
  }
  static std::string print_axes_comment(const AxisList& a) { return "[" + join(a) + "]"; }

  void save(const std::string& array) {
    const AxisList& ax = *d_.array_axes(array);
    const bool atomic = std::find(atomic_.begin(), atomic_.end(), array) != atomic_.end();
    line(atomic ? "// add " + array + "'s partial sums over this block: registers -> HBM (atomic adds on the GPU: lemma atomic-sum)"
                : "// save " + array + ": registers -> HBM");
    loops(ax);
    line("g_" + array + "[" + global_index(ax) + "] " + (atomic ? "+=" : "=") + " " + at(Buf{buffer_[array], ax}) + ";");
    end_loops(ax);
  }
  void load(const std::string& array) {
    const AxisList& ax = *d_.array_axes(array);
    line("// load " + array + ": HBM -> SMEM tile");
    loops(ax);
    line(at(Buf{buffer_[array], ax}) + " = g_" + array + "[" + global_index(ax) + "];");
    end_loops(ax);
  }

  // ------------------------------------------------------------------ calls
  void call(const Expr& e) {
    std::vector<AxisList> args;
    for (const auto& a : e.args) args.push_back(axes_of(*a));
    CallShape shape = *typer_.call_shape(e, args);
    const Derivation* sub = nullptr;
    for (const auto& [stmt, dvp] : dv_.callees)
      if (stmt == current_statement_) sub = dvp.get();
    NAPKIN_ASSERT(sub) << "no derivation for the call in " << current_statement_;
    NAPKIN_ASSERT(sub->lifted) << "the derivation of the call in " << current_statement_ << " has no lifted callee";
    // The callee lifted over the woven axes (diagrams/lift.hpp): one call covers every woven index.
    const Diagram& callee = sub->lifted->diagram;
    const auto bind = caller_axes(*sub->lifted, shape);
    std::string fn = fn_ + "__" + current_statement_;
    helpers_ += FunctionEmitter(p_, callee, *sub, fn, helpers_).run() + "\n";
    Buf t{temp(), shape.result};
    line("std::vector<double> " + t.name + "(" + local_size(shape.result) + ");  // call " + shape.callee->name);
    const auto formals = callee.inputs();
    for (std::size_t j = 0; j < formals.size(); ++j) {
      AxisList caller;
      for (const auto& f : formals[j]->axes) caller.push_back(bind.at(f));
      line("std::vector<double> arg" + std::to_string(j) + "(" + global_size(caller) + ");");
      loops(caller);
      std::string idx = "0";
      for (const auto& c : caller) idx = "(" + idx + ") * N_" + c + " + i_" + c;
      line("arg" + std::to_string(j) + "[" + idx + "] = " + value(*e.args[j]) + ";");
      end_loops(caller);
    }
    std::string sizes, ins;
    for (const auto* a : callee.axes()) {
      std::string v;
      if (bind.count(a->name)) v = "N_" + bind.at(a->name);
      else {
        v = "int64_t{1}";
        for (const auto& f : a->size) v += " * " + (f.axis.empty() ? std::to_string(f.literal) : "csz[" + std::to_string(axis_pos(callee, f.axis)) + "]");
      }
      sizes += (sizes.empty() ? "" : ", ") + v;
    }
    for (std::size_t j = 0; j < formals.size(); ++j) ins += (j ? ", " : "") + std::string("arg") + std::to_string(j) + ".data()";
    AxisList out_caller;
    for (const auto& f : *callee.array_axes(callee.outputs()[0]->name)) out_caller.push_back(bind.at(f));
    line("std::vector<int64_t> csz;");
    for (const auto& part : split_sizes(sizes)) line("csz.push_back(" + part + ");");
    line("std::vector<double> res(" + global_size(out_caller) + ");");
    line("const double* cin[] = {" + ins + "};");
    line("double* cout[] = {res.data()};");
    line(fn + "(cin, cout, csz.data());");
    loops(out_caller);
    std::string idx = "0";
    for (const auto& c : out_caller) idx = "(" + idx + ") * N_" + c + " + i_" + c;
    line(at(t) + " = res[" + idx + "];");
    end_loops(out_caller);
    subst_[&e] = t;
  }
  static std::vector<std::string> split_sizes(const std::string& s) {
    std::vector<std::string> out;
    std::size_t start = 0;
    for (std::size_t i = 0; i <= s.size(); ++i)
      if (i == s.size() || (s[i] == ',' && i + 1 < s.size() && s[i + 1] == ' ')) {
        out.push_back(s.substr(start, i - start));
        start = i + 2;
      }
    return out;
  }
  static std::size_t axis_pos(const Diagram& d, const std::string& a) {
    std::size_t i = 0;
    for (const auto* x : d.axes()) {
      if (x->name == a) return i;
      ++i;
    }
    return 0;
  }

  // ------------------------------------------------------------------ kernels
  /** The contracted axis the CUDA kernel walks in chunks where the schedule keeps it whole
   *  (lowering's gemm K by T_K, flash x by T_X: lower/gemm_form.hpp, flash_form.hpp), with its
   *  chunk; nullopt when the schedule streams it already or the kernel has no such form. */
  static std::optional<std::pair<std::string, std::int64_t>> spec_chunk(const KernelChoice& kc) {
    const KernelSpec* spec = kc.cost.spec.get();
    std::optional<std::pair<std::string, std::int64_t>> c;
    if (spec && spec->gemm) c.emplace(spec->gemm->K, spec->gemm->TK);
    if (spec && spec->flash) c.emplace(spec->flash->x, spec->flash->TX);
    if (!c || kc.plan.streams_axis(c->first) || kc.cost.axes.at(c->first).kind != AxisPlan::Kind::whole) return std::nullopt;
    return c;
  }
  /** `kc` with the spec's chunked axis (spec_chunk) as an innermost stream directive and the
   *  lemmas that fold it (derive/lemmas.hpp streamable), so that the loop nest walks the chunks
   *  the CUDA kernel walks. */
  KernelChoice with_spec_chunk(const KernelChoice& kc, const std::vector<const StatementWeave*>& stmts) const {
    KernelChoice out = kc;
    const auto chunk = spec_chunk(kc);
    if (!chunk) return out;
    const std::set<std::string> escaping(kc.cost.outputs.begin(), kc.cost.outputs.end());
    StreamVerdict v = streamable(stmts, chunk->first, escaping);
    NAPKIN_ASSERT(v.ok) << "lowering chunks " << chunk->first << " of kernel " << kc.plan.name << ", which no lemma streams: " << v.why;
    Directive dir;
    dir.kind = Directive::Kind::stream;
    dir.names = {chunk->first};
    dir.size = chunk->second;
    out.plan.directives.push_back(dir);
    for (const auto& u : v.uses)
      if (std::none_of(out.lemmas.begin(), out.lemmas.end(), [&](const LemmaUse& x) { return x.statement == u.statement; })) out.lemmas.push_back(u);
    return out;
  }

  void kernel(std::size_t k) {
    const KernelChoice& kc0 = dv_.chosen.kernels[k];
    const KernelCost& cost = kc0.cost;
    std::string dirs;
    for (const auto& dir : kc0.plan.directives) dirs += (dirs.empty() ? "" : "; ") + directive_text(dir);
    line("");
    line("// kernel " + kc0.plan.name + ": " + dirs);
    open("");
    subst_.clear();
    buffer_.clear();
    std::vector<std::string> grid;
    for (const auto* a : d_.axes())
      if (cost.axes.count(a->name) && cost.axes.at(a->name).kind == AxisPlan::Kind::group) grid.push_back(a->name);
    atomic_ = cost.spec ? cost.spec->shape.atomic : std::vector<std::string>{};
    for (const auto& a : atomic_)  // every block adds into it: zeroed first, as the launcher does
      line("std::fill(g_" + a + ", g_" + a + " + " + global_size(*d_.array_axes(a)) + ", 0.0);  // zeroed: the blocks add into it");
    for (const auto& a : grid) {
      std::int64_t g = cost.axes.at(a).tile;
      open("for (int64_t o_" + a + " = 0; o_" + a + " < N_" + a + "; o_" + a + " += " + std::to_string(g) + ")");
      line("const int64_t T_" + a + " = " + std::to_string(g) + ", n_" + a + " = std::min<int64_t>(T_" + a + ", N_" + a + " - o_" + a + ");");
    }
    const auto chunk = spec_chunk(kc0);
    for (const auto& [a, ap] : cost.axes) {
      if (chunk && chunk->first == a) line("const int64_t T_" + a + " = " + std::to_string(chunk->second) + ";  // chunked as the CUDA kernel does");
      else if (ap.kind == AxisPlan::Kind::whole) line("const int64_t o_" + a + " = 0, T_" + a + " = N_" + a + ", n_" + a + " = N_" + a + ";");
      if (ap.kind == AxisPlan::Kind::stream) line("const int64_t T_" + a + " = " + std::to_string(ap.tile) + ";");
    }
    for (const auto& a : cost.inputs) buffer_[a] = "s_" + a;
    for (const auto& a : cost.internal) buffer_[a] = "r_" + a;
    for (const auto& a : cost.outputs) buffer_[a] = "r_" + a;
    for (const auto& [name, buf] : buffer_)
      line("std::vector<double> " + buf + "(" + local_size(*d_.array_axes(name)) + ");  // " +
           std::string(level_name(cost.level.count(name) ? cost.level.at(name) : MemLevel::reg)));
    std::vector<const StatementWeave*> stmts;
    NamedGraph g = dataflow_graph(d_);
    const auto order = g.topological_order();
    for (auto v : *order)
      for (const auto& w : weave_)
        if (w.statement->name == g.names()[v] && std::find(cost.statements.begin(), cost.statements.end(), w.statement->name) != cost.statements.end())
          stmts.push_back(&w);
    const KernelChoice kc = with_spec_chunk(kc0, stmts);
    auto stream = kc.plan.stream();
    if (!stream) {
      for (const auto& a : cost.inputs) load(a);
      for (const auto* w : stmts) {
        current_statement_ = w->statement->name;
        compute(*w->statement);
      }
      for (const auto& a : cost.outputs) save(a);
    } else {
      std::vector<std::string> axes;
      for (const auto& [ax, size] : kc.plan.streams()) axes.push_back(ax);
      streamed(kc, stmts, axes);
    }
    for (std::size_t i = 0; i < grid.size(); ++i) close();
    close();
  }

  bool carries(const std::string& array, const std::string& a) const {
    const AxisList& ax = *d_.array_axes(array);
    return std::find(ax.begin(), ax.end(), a) != ax.end();
  }

  /** The outermost nodes of `e` reducing a streamed axis: each folds into an accumulator. */
  std::vector<const Expr*> reducers(const Expr& e) const {
    std::vector<const Expr*> out;
    std::function<void(const Expr&)> visit = [&](const Expr& n) {
      if (n.kind == Expr::Kind::apply && (n.op == Op::contract || n.op == Op::sum || n.op == Op::max || n.op == Op::mean))
        for (const auto& x : stream_axes_)
          if (std::find(n.axes.begin(), n.axes.end(), x) != n.axes.end()) {
            out.push_back(&n);
            return;
          }
      for (const auto& a : n.args) visit(*a);
    };
    visit(e);
    return out;
  }

  bool touches_any(const StatementWeave& w) const {
    return std::any_of(stream_axes_.begin(), stream_axes_.end(), [&](const std::string& x) { return w.touches(x); });
  }
  AxisRole role_any(const StatementWeave& w) const {
    AxisRole r = AxisRole::woven;
    for (const auto& x : stream_axes_)
      if (w.touches(x) && w.role(x) != AxisRole::woven) r = w.role(x) == AxisRole::reduced ? AxisRole::reduced : (r == AxisRole::reduced ? r : w.role(x));
    return r;
  }
  bool carries_any(const std::string& array) const {
    return std::any_of(stream_axes_.begin(), stream_axes_.end(), [&](const std::string& x) { return carries(array, x); });
  }

  void streamed(const KernelChoice& kc, const std::vector<const StatementWeave*>& stmts, const std::vector<std::string>& axes) {
    stream_axes_ = axes;
    const std::string a = axes.back();  // normalisers and causal skipping have a single stream
    const KernelCost& cost = kc.cost;
    std::map<std::string, std::string> lemma;
    for (const auto& u : kc.lemmas) lemma[u.statement] = u.lemma;
    int passes = kc.plan.stream_passes();
    // Phases: statements without the axis and not needing loop results run before the loop.
    std::set<std::string> after;
    std::vector<const StatementWeave*> before, in_loop, post;
    for (const auto* w : stmts) {
      bool needs_after = false;
      for (const auto& r : w->reads) needs_after |= after.count(r) > 0;
      if (touches_any(*w)) in_loop.push_back(w);
      else (needs_after ? post : before).push_back(w);
      if ((touches_any(*w) && role_any(*w) == AxisRole::reduced) || needs_after) after.insert(w->statement->name);
    }
    for (const auto& in : cost.inputs)
      if (!carries_any(in)) load(in);
    for (const auto* w : before) current_statement_ = w->statement->name, compute(*w->statement);

    // Head: accumulators and normaliser state.
    std::map<std::string, const Expr*> norm_node;  // normaliser statement -> its node
    std::map<const Expr*, std::string> consumer_of;  // contraction node -> normaliser statement it consumes
    std::map<const Expr*, Buf> acc;
    for (const auto* w : in_loop) {
      const std::string& name = w->statement->name;
      const std::string& l = lemma[name];
      if (w->role(a) == AxisRole::normalised) {
        const Expr* n = w->roles.at(a).node;
        norm_node[name] = n;
        AxisList rows;  // the node's axes: a normaliser inside an expression may lack some of the statement's
        for (const auto& x : axes_of(*n))
          if (x != a) rows.push_back(x);
        state_rows_[name] = rows;
        line("// " + name + ": " + l + " state over rows [" + join(rows) + "]");
        // softmax: running max m, denominator l, last correction c; rmsnorm: sum of squares m2 and
        // count; layernorm: Welford's count, mean and M2.
        std::vector<std::string> state = n->op == Op::softmax   ? std::vector<std::string>{"m", "l", "c"}
                                         : n->op == Op::rmsnorm ? std::vector<std::string>{"m2", "cnt"}
                                                                : std::vector<std::string>{"cnt", "mean", "m2"};
        for (const auto& st : state)
          line("std::vector<double> " + st + "_" + name + "(" + local_size(rows) + ", " + (st == "m" ? "-INFINITY" : "0.0") + ");");
      }
    }
    for (const auto* w : in_loop) {
      if (role_any(*w) != AxisRole::reduced) continue;
      int i = 0;
      for (const Expr* r : reducers(*w->statement->expr)) {
        AxisList out = axes_of(*r);
        Buf b{"acc_" + w->statement->name + "_" + std::to_string(i++), out};
        acc[r] = b;
        const std::string& lem = lemma[w->statement->name];
        bool one_pass_consumer = lem == "online-softmax" || lem == "normalised-contraction" || lem == "welford";
        for (const auto& arg : r->args)
          if (one_pass_consumer && arg->kind == Expr::Kind::ref && norm_node.count(arg->name)) consumer_of[r] = arg->name;
        line("std::vector<double> " + b.name + "(" + local_size(out) + ", " + (r->op == Op::max ? "-INFINITY" : "0.0") +
             ");  // head: " + lemma[w->statement->name] + " accumulator");
        if (consumer_of.count(r) && norm_node[consumer_of[r]]->op == Op::layernorm)
          for (const char* extra : {"accw_", "accb_"})
            line("std::vector<double> " + std::string(extra) + b.name + "(" + local_size(out) + ", 0.0);");
      }
    }
    rescaled_.clear();
    forms_.clear();
    std::map<std::string, const StatementWeave*> kernel_by_name;
    for (const auto* w : stmts) kernel_by_name[w->statement->name] = w;
    for (auto& [r, b] : acc) {
      ReductionForm f = reduction_form(*r, a, kernel_by_name, after);
      NAPKIN_ASSERT(!f.lemma.empty()) << "a schedule checked as streamable has a reduction without a lemma: " << f.why;
      forms_[r] = f;
      if (f.lemma == "chan-centred-moment")
        for (const char* extra : {"chn_", "chm_"})
          line("std::vector<double> " + std::string(extra) + b.name + "(" + local_size(b.axes) + ", 0.0);  // " + f.lemma + " state");
      if (f.lemma == "online-rescaled-sum") rescaled_.insert(f.inner);
    }
    for (const auto& m : rescaled_) {  // the running max before each chunk, for the rescaling
      const Buf& b = acc.at(d_.find_statement(m)->expr.ptr.get());
      line("std::vector<double> old_" + b.name + "(" + local_size(b.axes) + ", -INFINITY);  // running max of " + m + " before the chunk");
    }
    // The model allows the skip only where it is sound (perfmodel/cost.cpp, skip_is_sound).
    // The softmax form's causal skip (kernel_shape.cpp: nothing written past the diagonal). A
    // flash_bwd kernel's skip stores zeros there instead (flash_bwd_causal_skip): the loop nest
    // computes those tiles, whose values are the same zeros.
    const bool bwd_skip = cost.spec && cost.spec->flash_bwd && !cost.spec->flash_bwd->skip.empty();
    std::string causal_q = cost.causal_active_fraction < 1 && cost.causal_x == a && !bwd_skip ? cost.causal_q : "";

    for (int pass = 1; pass <= passes; ++pass) {
      auto outside = subst_;  // temporaries of the loop body are local to it
      bool stats_pass = passes == 2 && pass == 1;
      line(passes == 2 ? (stats_pass ? "// pass 1: statistics" : "// pass 2: outputs") : "// body: one chunk of " + a + " at a time");
      for (const auto& x : axes) {
        open("for (int64_t o_" + x + " = 0; o_" + x + " < N_" + x + "; o_" + x + " += T_" + x + ")");
        line("const int64_t n_" + x + " = std::min<int64_t>(T_" + x + ", N_" + x + " - o_" + x + ");");
      }
      if (!causal_q.empty() && !cost.causal_lo && cost.causal_hi == 0)
        line("if (o_" + a + " > o_" + causal_q + " + n_" + causal_q + " - 1) break;  // causal: the remaining chunks are fully masked");
      else if (!causal_q.empty()) {  // a band lo <= i(a) - i(q) <= hi: chunks wholly before it or past it hold only zeros
        const std::string first = "o_" + causal_q, last = "(o_" + causal_q + " + n_" + causal_q + " - 1)";
        if (cost.causal_hi) line("if (o_" + a + " - " + last + " > " + std::to_string(*cost.causal_hi) + ") break;  // past the band: the remaining chunks are 0");
        if (cost.causal_lo)
          line("if (o_" + a + " + n_" + a + " - 1 - " + first + " < " + std::to_string(*cost.causal_lo) + ") continue;  // before the band: this chunk is 0");
      }
      for (const auto& in : cost.inputs)
        if (carries_any(in)) load(in);
      for (const auto* w : in_loop) {
        const std::string& name = w->statement->name;
        current_statement_ = name;
        subst_.erase(w->statement->expr.ptr.get());
        if (role_any(*w) == AxisRole::woven) {
          compute(*w->statement);
          if (!stats_pass && std::find(cost.outputs.begin(), cost.outputs.end(), name) != cost.outputs.end()) save(name);
        } else if (role_any(*w) == AxisRole::normalised) {
          normaliser_chunk(*w, a, lemma[name], passes == 2, stats_pass);
          if (!stats_pass && std::find(cost.outputs.begin(), cost.outputs.end(), name) != cost.outputs.end()) save(name);
        } else if (!stats_pass) {
          for (const Expr* r : reducers(*w->statement->expr)) {
            for (const auto& arg : r->args) prepare(*arg);
            bool running = rescaled_.count(name) && r == w->statement->expr.ptr.get();
            if (running) copy(acc.at(r), "old_" + acc.at(r).name);
            if (forms_[r].lemma == "online-rescaled-sum" || forms_[r].lemma == "chan-centred-moment")
              fold(*r, acc.at(r), forms_[r], acc);
            else
              accumulate(*r, acc.at(r), consumer_of.count(r) ? consumer_of[r] : "", a);
            if (running) copy(acc.at(r), buffer_[name], *d_.array_axes(name));  // read as the running max in this chunk
          }
        }
      }
      for (std::size_t i = 0; i < axes.size(); ++i) close();
      subst_ = outside;
    }
    finalise(acc, consumer_of, norm_node, a);
    for (const auto* w : in_loop)
      if (role_any(*w) == AxisRole::reduced) current_statement_ = w->statement->name, compute(*w->statement);
    for (const auto* w : post) current_statement_ = w->statement->name, compute(*w->statement);
    for (const auto& o : cost.outputs)
      if (!carries_any(o)) save(o);
  }

  /** Finalisation of a streamed kernel: the accumulators become the reductions' values (a mean's
   *  division; the normaliser lemma's finalise where the contraction consumed the normaliser in
   *  one pass: softmax's 1/l, rmsnorm's 1/sqrt(mean square + eps), layernorm's centring and scale). */
  void finalise(std::map<const Expr*, Buf>& acc, std::map<const Expr*, std::string>& consumer_of,
                std::map<std::string, const Expr*>& norm_node, const std::string& a) {
    line("// finalise");
    for (auto& [r, b] : acc) {
      std::string fix;
      if (r->op == Op::mean) {
        fix = " / static_cast<double>(1";
        for (const auto& x : r->axes) fix += " * N_" + x;
        fix += ")";
      }
      if (consumer_of.count(r)) {
        const std::string& n = consumer_of[r];
        const Expr* node = norm_node[n];
        AxisList rows = state_rows_[n];
        std::string row = at(Buf{"X", rows}).substr(1);
        auto st = [&](const std::string& s) { return s + "_" + n + "[" + local_index(rows) + "]"; };
        if (node->op == Op::softmax) fix = " / " + st("l");
        else if (node->op == Op::rmsnorm) fix = " / std::sqrt(" + st("m2") + " / static_cast<double>(N_" + a + ") + " + num(eps(*node)) + ")";
        open("");
        loops(b.axes);
        if (node->op == Op::layernorm) {
          line("const double inv = 1.0 / std::sqrt(" + st("m2") + " / " + st("cnt") + " + " + num(eps(*node)) + ");");
          line(at(b) + " = (" + at(b) + " - " + st("mean") + " * accw_" + b.name + "[" + local_index(b.axes) + "]) * inv + accb_" +
               b.name + "[" + local_index(b.axes) + "];");
        } else {
          line(at(b) + " = " + at(b) + fix + ";");
        }
        end_loops(b.axes);
        close();
        (void)row;
      } else if (auto lf = forms_.find(r); lf != forms_.end() && lemma_arithmetic(lf->second.lemma) &&
                 folded_value(lf->second, b, acc) != at(b)) {  // the lemma's finalise (derive/lemmas)
        loops(b.axes), line(at(b) + " = (" + folded_value(lf->second, b, acc) + ")" + fix + ";"), end_loops(b.axes);
      } else if (!fix.empty()) {
        loops(b.axes), line(at(b) + " = " + at(b) + fix + ";"), end_loops(b.axes);
      }
      subst_[r] = b;
    }
  }

  /** The finalise of a reduction folded by a lemma's arithmetic (derive/lemmas), over its state
   *  after the last chunk, rendered for the element of `b` the enclosing loops index. */
  std::string folded_value(const ReductionForm& f, const Buf& b, const std::map<const Expr*, Buf>& acc) {
    const LemmaArithmetic& la = *lemma_arithmetic(f.lemma);
    if (f.lemma == "online-rescaled-sum")
      return render_template(la.finalise, {{"s", at(b)}, {"m_new", at(acc.at(d_.find_statement(f.inner)->expr.ptr.get()))}});
    std::string idx = "[" + local_index(b.axes) + "]";
    return render_template(la.finalise, {{"n", "chn_" + b.name + idx}, {"mean", "chm_" + b.name + idx}, {"m2", at(b)}});
  }

  /** Copies buffer `b` into `dst` (indexed by `dst_axes`, a permutation of b's axes; b's by default). */
  void copy(const Buf& b, const std::string& dst, const AxisList& dst_axes = {}) {
    loops(b.axes);
    line(at(Buf{dst, dst_axes.empty() ? b.axes : dst_axes}) + " = " + at(b) + ";");
    end_loops(b.axes);
  }

  /** One chunk of a reduction that reads another reduction over the streamed axis, folded by the
   *  lemma's arithmetic (derive/lemmas: lemma_arithmetic): the chunk's values, then the update. */
  void fold(const Expr& r, const Buf& b, const ReductionForm& f, const std::map<const Expr*, Buf>& acc) {
    const LemmaArithmetic& la = *lemma_arithmetic(f.lemma);
    std::map<std::string, std::string> vars;
    line("// " + f.lemma + ": " + lemma(f.lemma).state);
    open("");
    loops(b.axes);
    if (f.lemma == "online-rescaled-sum") {
      const Buf& m = acc.at(d_.find_statement(f.inner)->expr.ptr.get());
      line("double part = 0.0;");
      shifted_exp_ = f.shifted_exp;
      loops(r.axes), line("part += " + product_of(r) + ";"), end_loops(r.axes);
      shifted_exp_ = nullptr;
      vars = {{"s", at(b)}, {"m_old", at(Buf{"old_" + m.name, m.axes})}, {"m_new", at(m)}, {"part", "part"}};
    } else {
      std::string e = value(*f.centred);
      // chunk_* names cannot clash with the loop nest's n_, i_, o_, T_ and N_ names of axes
      line("double chunk_n = 0.0, chunk_sum = 0.0, chunk_m2 = 0.0;");
      loops(r.axes), line("chunk_n += 1.0;"), line("chunk_sum += " + e + ";"), end_loops(r.axes);
      line("const double chunk_mean = chunk_n > 0 ? chunk_sum / chunk_n : 0.0;");
      loops(r.axes), line("chunk_m2 += (" + e + " - chunk_mean) * (" + e + " - chunk_mean);"), end_loops(r.axes);
      std::string idx = "[" + local_index(b.axes) + "]";
      vars = {{"n", "chn_" + b.name + idx}, {"mean", "chm_" + b.name + idx}, {"m2", at(b)},
              {"n_b", "chunk_n"}, {"mean_b", "chunk_mean"}, {"m2_b", "chunk_m2"}};
    }
    for (const auto& u : la.update) line(render_template(u, vars));
    end_loops(b.axes);
    close();
  }

  /** Adds one chunk's contribution to a reduction's accumulator; for a contraction consuming a
   *  normaliser, rescales (online softmax) or adds the layernorm side sums. */
  void accumulate(const Expr& r, const Buf& b, const std::string& norm, const std::string& a) {
    AxisList inner;
    for (const auto& x : r.axes) inner.push_back(x);
    const Expr* node = norm.empty() ? nullptr : norm_node_of(norm);
    if (node && node->op == Op::softmax) {
      line("// online softmax: rescale by exp(m_old - m_new), then add this chunk");
      loops(b.axes);
      line(at(b) + " *= c_" + norm + "[" + local_index(state_rows_[norm]) + "];");
      end_loops(b.axes);
    }
    open("");
    loops(b.axes);
    line(std::string("double part = ") + (r.op == Op::max ? "-INFINITY" : "0.0") + ";");
    if (node && node->op == Op::layernorm) line("double part_w = 0.0, part_b = 0.0;");
    loops(inner);
    std::string term = product_of(r);
    line(r.op == Op::max ? "part = std::fmax(part, " + term + ");" : "part += " + term + ";");
    if (node && node->op == Op::layernorm) {
      std::string w = node->args.size() > 1 ? value(*node->args[1]) : "1.0";
      std::string bb = node->args.size() > 2 ? value(*node->args[2]) : "0.0";
      line("part_w += " + product_of(r, norm, w) + ";");
      line("part_b += " + product_of(r, norm, bb) + ";");
    }
    end_loops(inner);
    line(r.op == Op::max ? at(b) + " = std::fmax(" + at(b) + ", part);" : at(b) + " += part;");
    if (node && node->op == Op::layernorm) {
      line("accw_" + b.name + "[" + local_index(b.axes) + "] += part_w;");
      line("accb_" + b.name + "[" + local_index(b.axes) + "] += part_b;");
    }
    end_loops(b.axes);
    close();
    (void)a;
  }
  const Expr* norm_node_of(const std::string& stmt) const {
    const Statement* s = d_.find_statement(stmt);
    for (const auto& w : weave_)
      if (w.statement == s)
        for (const auto& [ax, r] : w.roles)
          if (r.role == AxisRole::normalised) return r.node;
    return nullptr;
  }

  /** One chunk of a normaliser along the stream: updates its statistics and writes its buffer,
   *  unnormalised for a one-pass consumer, final in the second pass of a two-pass stream. */
  void normaliser_chunk(const StatementWeave& w, const std::string& a, const std::string& lemma_id, bool two_pass, bool stats_pass) {
    const Statement& s = *w.statement;
    const Expr* node = w.roles.at(a).node;
    // A normaliser inside an expression (checked: two passes only) writes its own buffer in pass
    // 2; the statement is then computed from it.
    const bool nested = s.expr.ptr.get() != node;
    NAPKIN_ASSERT(!nested || two_pass) << "a normaliser inside an expression streams in two passes only (derive/lemmas)";
    prepare(*node->args[0]);
    const AxisList& rows = state_rows_[s.name];
    auto st = [&](const std::string& x) { return x + "_" + s.name + "[" + local_index(rows) + "]"; };
    Buf out{buffer_[s.name], s.axes};
    if (nested && !stats_pass) {
      out = Buf{temp(), axes_of(*node)};
      line("std::vector<double> " + out.name + "(" + local_size(out.axes) + ");  // " + std::string(op_name(node->op)) + " along " + a);
    }
    std::string x = value(*node->args[0]), dst = at(out);
    line("// " + s.name + ": " + lemma_id + (two_pass ? (stats_pass ? " (statistics)" : " (map)") : ""));
    open("");
    loops(rows);
    if (node->op == Op::softmax) {
      if (!two_pass || stats_pass) {
        line("double mx = " + st("m") + ";");
        loops({a}), line("mx = std::fmax(mx, " + x + ");"), end_loops({a});
        // Only -inf (nothing unmasked yet) is guarded: a +inf max gives NaN, as the fp64 evaluator's
        // exp(inf - inf) does.
        line("const double corr = mx == -INFINITY ? 1.0 : std::exp(" + st("m") + " - mx);");
        line(st("l") + " *= corr;");
        line(st("c") + " = corr;");
        line(st("m") + " = mx;");
        loops({a});
        // Only a masked element (-inf) is skipped: a NaN element keeps its NaN although the max
        // (fmax, as the evaluator's) drops it, even in a chunk whose max is -inf (seed 300217).
        line("const double v = " + x + ";");
        line("const double p = v == -INFINITY ? 0.0 : std::exp(v - mx);");
        line(st("l") + " += p;");
        if (!two_pass) line(dst + " = p;");
        end_loops({a});
      } else {
        loops({a});
        line(dst + " = (" + st("m") + " == -INFINITY ? 0.0 : std::exp(" + x + " - " + st("m") + ")) / " + st("l") + ";");
        end_loops({a});
      }
    } else {
      bool layer = node->op == Op::layernorm;
      if (!two_pass || stats_pass) {
        loops({a});
        line("const double v = " + x + ";");
        if (layer) {  // Welford's update of (count, mean, M2)
          line(st("cnt") + " += 1.0;");
          line("const double delta = v - " + st("mean") + ";");
          line(st("mean") + " += delta / " + st("cnt") + ";");
          line(st("m2") + " += delta * (v - " + st("mean") + ");");
        } else {
          line(st("m2") + " += v * v;");
          line(st("cnt") + " += 1.0;");
        }
        if (!two_pass) line(dst + " = v" + (node->args.size() > 1 ? " * " + value(*node->args[1]) : "") + ";");
        end_loops({a});
      }
      if (two_pass && !stats_pass) {
        loops({a});
        std::string y = layer ? "((" + x + " - " + st("mean") + ") / std::sqrt(" + st("m2") + " / " + st("cnt") + " + " + num(eps(*node)) + "))"
                              : "(" + x + " / std::sqrt(" + st("m2") + " / " + st("cnt") + " + " + num(eps(*node)) + "))";
        if (node->args.size() > 1) y += " * " + value(*node->args[1]);
        if (node->args.size() > 2) y += " + " + value(*node->args[2]);
        line(dst + " = " + y + ";");
        end_loops({a});
      }
      if (layer && !two_pass) {
        // the consumer reads (x * w); the centring by the mean is applied at finalisation
        loops({a});
        line(dst + " = " + x + (node->args.size() > 1 ? " * " + value(*node->args[1]) : "") + ";");
        end_loops({a});
      }
    }
    end_loops(rows);
    close();
    if (nested && !stats_pass) {
      subst_[node] = out;
      compute(s);
    }
  }

  const Program& p_;
  const Diagram& d_;
  const Derivation& dv_;
  std::string fn_;
  std::string& helpers_;
  Typer typer_;
  std::vector<StatementWeave> weave_;
  std::string out_;
  int indent_ = 0;
  int temps_ = 0;
  std::map<const Expr*, Buf> subst_;
  std::map<std::string, std::string> buffer_;
  std::vector<std::string> atomic_;  ///< the kernel's outputs added up across its blocks (KernelShape::atomic)
  std::map<std::string, AxisList> state_rows_;
  std::set<std::string> rescaled_;                 ///< maxima read by an online-rescaled-sum, running in the loop
  const Expr* shifted_exp_ = nullptr;              ///< the exp(E - M) factor value() renders guarded (fold)
  std::map<const Expr*, ReductionForm> forms_;     ///< per accumulated reduction node, its lemma
  std::vector<std::string> stream_axes_;
  std::string current_statement_;
};

const char* kPreamble = R"(// Generated by napkin (emit --target cpu): the derived schedule as a CPU loop nest.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

static inline double napkin_relu(double x) { return x > 0 ? x : 0.0; }
/** 1 where x > 0, 0 where x <= 0, NaN where x is NaN (diagrams/eval.cpp). */
static inline double napkin_step(double x) { return std::isnan(x) ? x : x > 0 ? 1.0 : 0.0; }
static inline double napkin_gelu(double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }
static inline double napkin_gelu_tanh(double x) { return 0.5 * x * (1 + std::tanh(0.7978845608028654 * (x + 0.044715 * x * x * x))); }
static inline double napkin_silu(double x) { return x / (1 + std::exp(-x)); }
static inline double napkin_sigmoid(double x) { return 1 / (1 + std::exp(-x)); }
/** exp(e - m), 0 where e = -inf (its value at every finite m; derive/lemmas: online-rescaled-sum). */
static inline double napkin_exp_shifted(double e, double m) { return e == -INFINITY ? 0.0 : std::exp(e - m); }
/** Round to a dtype, as diagrams/dtype.cpp: index in DType order. */
static inline double napkin_round(double x, int t) {
  static const struct { int mant, emin; double max; bool inf, integer; } f[] = {
      {23, -126, 3.4028234663852886e38, true, false}, {10, -126, 3.4011621342146535e38, true, false},
      {7, -126, 3.3895313892515355e38, true, false},  {10, -14, 65504.0, true, false},
      {3, -6, 448.0, false, false},                    {2, -14, 57344.0, true, false},
      {0, 0, 127.0, false, true},                      {0, 0, 7.0, false, true},
      {0, 0, 2147483647.0, false, true}};  // diagrams/dtype.cpp's table, in DType's order
  if (std::isnan(x)) return x;
  if (f[t].integer) return std::fmax(-f[t].max - 1.0, std::fmin(f[t].max, std::nearbyint(x)));
  if (x == 0.0 || std::isinf(x)) return std::isinf(x) && !f[t].inf ? std::copysign(f[t].max, x) : x;
  int e = 0;
  std::frexp(x, &e);
  e = std::max(e - 1, f[t].emin);
  const double q = std::ldexp(1.0, e - f[t].mant);
  const double r = std::nearbyint(x / q) * q;
  if (std::fabs(r) > f[t].max) return f[t].inf ? std::copysign(INFINITY, x) : std::copysign(f[t].max, x);
  return r;
}

)";

}  // namespace

std::string emit_cpu(const Program& p, const Diagram& given, const Derivation& dv, const std::string& prefix) {
  const Diagram& d = dv.diagram(given);  // the schedules are of derive's rewrite where it made one
  std::string helpers;
  std::string main_fn = FunctionEmitter(p, d, dv, prefix + d.name, helpers).run();
  return std::string(kPreamble) + helpers + main_fn + "\nextern \"C\" void " + prefix +
         "run(const double* const* inputs, double* const* outputs, const int64_t* sizes) {\n  " + prefix + d.name +
         "(inputs, outputs, sizes);\n}\n";
}

}  // namespace napkin
