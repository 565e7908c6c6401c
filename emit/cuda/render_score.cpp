// The flash form's score chain (contract: render.hpp): S's contraction, the element-wise score
// maps and P's argument as one fp32 expression per element of the score tile, with the arrays
// the maps read bounded at the tile's edge; and the loops over the score tile in each MMA atom's
// fragment layout (mma.sync: m16n8 tiles per warp; wgmma: a consumer warpgroup's 64 rows), each
// element folded into the lemma's chunk state, then the lemma's update.
#include <functional>

#include "emit/cuda/render.hpp"

namespace napkin::cuda {

namespace {

/** `inner` with the folded scale taken out (lower/flash_scale.hpp): the node f.scaled rendered as
 *  its other operand through `inner` (that operand cannot hold f.scaled again: the score chain is
 *  a DAG). Without a fold, `inner` itself. */
NodeOverride unscaled(Context& c, const FlashForm& f, NodeOverride inner) {
  if (!f.scaled) return inner;
  const Expr* kept = &*f.scaled->args[f.scale == &*f.scaled->args[0] ? 1 : 0];
  return [&c, &f, kept, inner = std::move(inner)](const Expr& e) -> std::optional<std::string> {
    if (&e == f.scaled) return c.value(*kept, inner, f.inlined);
    return inner ? inner(e) : std::nullopt;
  };
}

/** Emits `body` once for each side of the running max: where the folded scale's sign is known
 *  only at run time, `if (!score_neg) positive else negative` (a branch uniform over the kernel),
 *  else once on the scale's side. */
void per_side(Code& k, const FlashLemma& lemma, const std::function<void(FlashLemma::Side)>& body) {
  if (!lemma.sides_at_run_time()) {
    body(FlashLemma::Side::as_scale);
    return;
  }
  k.open("if (!score_neg)");
  body(FlashLemma::Side::positive);
  k.close(" else {");
  ++k.indent;
  body(FlashLemma::Side::negative);
  k.close();
}

/** The plain causal(M, x) mask of `f`'s score map (a window or a bound causal has its general value). */
bool is_causal_mask(const Expr& e, const FlashForm& f) {
  return e.kind == Expr::Kind::apply && e.op == Op::mask && is_plain_causal(*e.args[1]) && e.args[1]->axes == AxisList{f.M, f.x};
}

/** The causal overrides shared by both score renderers: `over` renders the contraction as `acc`
 *  and a plain causal(M, x) as the 32-bit compare `c_rel - r_rel <= diag` (setting `*causal`);
 *  the interior override drops the mask node altogether (every key of the chunk at or before
 *  every row's diagonal). */
struct CausalOverrides {
  NodeOverride over, interior;
};

/** The interior chunk's override: the contraction as `acc`, a plain causal mask node replaced by
 *  its masked operand, rendered through this same override. */
struct DropCausalMask {
  Context& c;
  const FlashForm& f;
  std::string acc;
  std::optional<std::string> operator()(const Expr& e) const {
    if (&e == f.cs) return acc;
    if (is_causal_mask(e, f)) return c.value(*e.args[0], unscaled(c, f, *this), f.inlined);
    return std::nullopt;
  }
};

CausalOverrides causal_overrides(Context& c, const FlashForm& f, const std::string& acc, bool* causal) {
  CausalOverrides o;
  o.over = [&f, acc, causal](const Expr& e) -> std::optional<std::string> {
    if (&e == f.cs) return acc;
    if (!is_plain_causal(e) || e.axes != AxisList{f.M, f.x}) return std::nullopt;  // a window: the general value
    *causal = true;
    return std::string("(c_rel - r_rel <= diag ? 1.0f : 0.0f)");
  };
  o.interior = DropCausalMask{c, f, acc};
  return o;
}

}  // namespace

ScoreChain score_chain(Context& c, const FlashForm& f, const NodeOverride& over, const NodeOverride& interior) {
  ScoreChain s;
  s.value = c.value(*f.score, unscaled(c, f, over), f.inlined);
  s.bounded = c.value(*f.score, unscaled(c, f, bounded_loads(c, over, {f.M, f.x}, f.inlined)), f.inlined);
  s.interior = interior ? c.value(*f.score, unscaled(c, f, interior), f.inlined) : s.value;
  s.reads_rows = c.value(*f.score, unscaled(c, f, bounded_loads(c, over, {f.M}, f.inlined)), f.inlined) != s.value;
  return s;
}

std::string flash_scale_value(Context& c, const FlashForm& f) {
  if (!f.scaled) return "";
  const std::string v = c.value(*f.scale);
  return f.scale_divides ? "(1.0f / " + v + ")" : v;
}

void score_comment(Code& k, const FlashForm& f) {
  k.line("// " + f.S->name + " and " + f.P->name +
         (f.normaliser_lemma.empty() ? " element by element; keys past N_" + f.x + " give P = 0" : "'s argument element by element; keys past N_" + f.x + " are masked"));
}

void flash_scores_fragments(Code& k, Context& c, const FlashForm& f, const FlashLemma& lemma) {
  const std::string &x = f.x, &M = f.M;
  // Score values: P's argument with S inlined, the contraction overridden by the accumulator and a
  // causal(M, x) by a compare of 32-bit offsets in the tile. The arrays it reads (masks, biases:
  // not staged in tiles) are read against their extents (rows past N_M, keys past N_x), except in
  // an interior chunk of a full tile, where every index is in range.
  bool causal = false;
  const CausalOverrides over = causal_overrides(c, f, "S_reg[mt][nt][e]", &causal);
  const bool softmax = lemma.softmax();
  const ScoreChain chain = score_chain(c, f, over.over, over.interior);
  score_comment(k, f);
  // Interior chunks of a full tile read every index in range: no bound on the maps' loads and
  // no select of the keys past N_x (a uniform branch: the whole block's chunk). Causal, an m16
  // tile of a warp is interior where the chunk's last key is at or before its first row: the mask
  // is dropped there (a branch uniform over the warp).
  k.line("const bool interior = " + std::string(chain.reads_rows ? "n_q == T_Q && " : "") + "(kc + 1) * T_X <= N_" + x + ";  // every index the score map reads in range");
  if (causal)
    k.line("const int diag = static_cast<int>(max(int64_t{-T_Q}, min(int64_t{T_X}, o_" + M + " - kc * T_X)));  // key offset - row offset at the diagonal");
  k.line("#pragma unroll");
  k.open("for (int mt = 0; mt < MT; ++mt)");
  lemma.chunk_begin(k);
  auto elements = [&](const std::string& value, bool masked, FlashLemma::Side side) {
    k.line("#pragma unroll");
    k.open("for (int nt = 0; nt < T_X / 8; ++nt)");
    k.line("#pragma unroll");
    k.open("for (int e = 0; e < 4; ++e)");
    k.line("const int r_rel = warp * (T_Q / WARPS) + mt * 16 + lane / 4 + (e / 2) * 8, c_rel = nt * 8 + (lane % 4) * 2 + e % 2;");
    k.line("const int64_t i_" + M + " = o_" + M + " + r_rel, i_" + x + " = kc * T_X + c_rel;");
    k.line("(void)i_" + M + ", (void)i_" + x + ", (void)r_rel, (void)c_rel;");
    k.line("const float v = " + value + ";");
    const std::string note = softmax ? ";" : ";  // P, no normaliser";
    k.line(masked ? "S_reg[mt][nt][e] = i_" + x + " < N_" + x + " ? v : " + lemma.fill(side) + note : "S_reg[mt][nt][e] = v" + note);
    lemma.element(k, side);
    k.close();
    k.close();
  };
  k.open(causal ? "if (interior && T_X - 1 - (warp * (T_Q / WARPS) + mt * 16) <= diag)" : "if (interior)");
  if (causal) k.line("// interior: every key of the chunk in range and at or before every row's diagonal");
  per_side(k, lemma, [&](FlashLemma::Side side) { elements(chain.interior, false, side); });
  k.close(" else {");
  ++k.indent;
  elements(chain.bounded, true, FlashLemma::Side::as_scale);
  k.close();
  lemma.update(k, f.P->name);
  k.close();
}

WarpgroupScores::WarpgroupScores(Context& c, const FlashForm& f) : f_(f) {
  const CausalOverrides over = causal_overrides(c, f, "S_reg[nt * 4 + e]", &causal_);
  chain_ = score_chain(c, f, over.over, over.interior);
}

void WarpgroupScores::elements(Code& k, const FlashLemma& lemma, const std::string& value, bool masked, FlashLemma::Side side) const {
  const std::string &M = f_.M, &x = f_.x;
  k.line("#pragma unroll");
  k.open("for (int nt = 0; nt < T_X / 8; ++nt)");
  k.line("#pragma unroll");
  k.open("for (int e = 0; e < 4; ++e)");
  k.line("const int c_rel = nt * 8 + (lane % 4) * 2 + e % 2, r_rel = warp * 16 + lane / 4 + (e / 2) * 8;");
  k.line("const int64_t i_" + M + " = o_" + M + " + cw * 64 + r_rel, i_" + x + " = kc * T_X + c_rel;");
  k.line("(void)i_" + M + ", (void)i_" + x + ", (void)r_rel;");
  k.line("const float v = " + value + ";");
  k.line(masked ? "S_reg[nt * 4 + e] = c_rel < x_left ? v : " + lemma.fill(side) + ";" : "S_reg[nt * 4 + e] = v;");
  lemma.element(k, side);
  k.close();
  k.close();
}

void WarpgroupScores::render(Code& k, const FlashLemma& lemma) const {
  const std::string &score = chain_.bounded, &score_interior = chain_.interior;
  score_comment(k, f_);
  lemma.chunk_begin(k);
  k.line("const int x_left = static_cast<int>(min(int64_t{T_X}, N_" + f_.x + " - kc * T_X));  // valid keys in the chunk");
  // Interior chunks (every key of the chunk in range, and, causal, at or before every row's
  // diagonal) take the score without the bound's select: one compare and select fewer per element
  // (the mask is the chunk's, so the branch is uniform over the warpgroup).
  std::string interior = "x_left == T_X";
  if (causal_) {
    k.line("const int diag = static_cast<int>(max(int64_t{-64}, min(int64_t{T_X}, o_" + f_.M + " + cw * 64 - kc * T_X)));");
    interior += " && diag >= T_X - 1";
  }
  if (chain_.reads_rows) interior += " && n_q >= (cw + 1) * 64";
  k.open("if (" + interior + ")");
  k.line(std::string("// interior chunk: no key past the end") + (causal_ ? ", every key at or before every row's diagonal" : "") +
         (chain_.reads_rows ? ", every row of the warpgroup in range" : ""));
  per_side(k, lemma, [&](FlashLemma::Side side) { elements(k, lemma, score_interior, false, side); });
  k.close(" else {");
  ++k.indent;
  elements(k, lemma, score, true, FlashLemma::Side::as_scale);
  k.close();
  lemma.update(k, f_.P->name);
}

}  // namespace napkin::cuda
