// The normaliser lemmas of the CUDA renderers (contract: render.hpp): each lemma's state, init,
// update and finalise arithmetic, written once. The flash form's online softmax serves both
// flash variants (mma.sync fragments, wgmma consumer warpgroups); the rows kernels' statistics
// serve softmax, layernorm and rmsnorm along a row.
#include "emit/cuda/render.hpp"

namespace napkin::cuda {

namespace {
/** log2 e as the generated code writes it: exponentials are napkin::exp2_ftz of values scaled by it. */
const std::string kLog2e = "1.44269504f";
}  // namespace

FlashLemma::FlashLemma(const FlashForm& f, bool per_tile, std::string s, std::string o_rescale, bool defer_o, std::string scale)
    : softmax_(!f.normaliser_lemma.empty()),
      defer_o_(defer_o),
      signed_(softmax_ && !scale.empty() && f.scale_sign_at_run_time),
      lazy_(softmax_ && defer_o),
      stats_(!f.stats.empty()),
      x_(f.x),
      m_(per_tile ? "m_reg[mt]" : "m_reg"),
      l_(per_tile ? "l_reg[mt]" : "l_reg"),
      s_(std::move(s)),
      o_rescale_(std::move(o_rescale)),
      scale_(softmax_ ? std::move(scale) : std::string()) {}

void FlashLemma::constants(Code& k) const {
  if (softmax_) k.line("constexpr float LOG2E = " + kLog2e + ";");
}

void FlashLemma::init(Code& k) const {
  if (!softmax_) return;
  if (signed_) {
    k.line("// the softmax's scale, folded into the exponent; its sign known only now (lower/flash_scale.hpp): the running max");
    k.line("// is kept over -B where it is negative, and a scale of 0 is taken as 2^-126 (a key past the end still gives 0)");
    k.line("const float score_scale = " + scale_ + ";");
    k.line("const bool score_neg = score_scale < 0.0f;");
    k.line("const float score_log2 = (score_scale == 0.0f ? 1.17549435e-38f : score_scale) * LOG2E, max_log2 = fabsf(score_log2);");
  } else if (!scale_.empty()) {
    k.line("const float score_scale = " + scale_ + ", score_log2 = score_scale * LOG2E;  // the softmax's scale, folded into the exponent (lower/flash_scale.hpp)");
  }
  if (m_ == "m_reg") {
    k.line("float m_reg[2] = {-INFINITY, -INFINITY}, l_reg[2] = {0.0f, 0.0f};  // rows lane/4 and lane/4 + 8 of the warp's 16" +
           std::string(lazy_ ? "; m_reg the reference max of P = exp(S - m)" : ""));
    if (lazy_ && stats_) k.line("float m_max[2] = {-INFINITY, -INFINITY};  // the rows' true running max, for the row statistics");
    return;
  }
  k.line("float m_reg[MT][2], l_reg[MT][2];  // registers: running max and this thread's partial sum, rows lane/4 and lane/4 + 8");
  k.line("#pragma unroll");
  k.line("for (int mt = 0; mt < MT; ++mt) m_reg[mt][0] = m_reg[mt][1] = -INFINITY, l_reg[mt][0] = l_reg[mt][1] = 0.0f;");
}

void FlashLemma::chunk_begin(Code& k) const {
  if (softmax_) k.line("float mx[2] = {" + m_ + "[0], " + m_ + "[1]};");
}

std::string FlashLemma::fill(Side side) const {
  if (!softmax_) return "0.0f";
  if (side == Side::negative) return "INFINITY";
  return side == Side::as_scale && signed_ ? "(score_neg ? INFINITY : -INFINITY)" : "-INFINITY";
}

void FlashLemma::element(Code& k, Side side) const {
  if (!softmax_) return;
  std::string v = s_;
  if (side == Side::negative) v = "-" + s_;
  else if (side == Side::as_scale && signed_) v = "(score_neg ? -" + s_ + " : " + s_ + ")";
  k.line("mx[e / 2] = fmaxf(mx[e / 2], " + v + ");");
}

void FlashLemma::update(Code& k, const std::string& P) const {
  if (!softmax_) return;
  if (lazy_) {
    update_lazy(k, P);
    return;
  }
  const std::string corr = defer_o_ ? "corr[h]" : "corr";
  k.line("// online softmax (" + P + "): new running max" +
         (defer_o_ ? "; l and O are rescaled by exp(m_old - m_new)" : ", rescale l and O by exp(m_old - m_new)"));
  if (defer_o_) {
    k.line("float corr[2];");
    k.line("#pragma unroll");
  }
  k.open("for (int h = 0; h < 2; ++h)");
  k.line("mx[h] = napkin::quad_max(mx[h]);");
  k.line((defer_o_ ? "corr[h]" : "const float corr") + std::string(" = mx[h] == -INFINITY ? 1.0f : napkin::exp2_ftz((") + m_ + "[h] - mx[h]) * " + max_factor() + ");");
  k.line(m_ + "[h] = mx[h];");
  k.line(l_ + "[h] *= " + corr + ";");
  if (!defer_o_) {
    k.line("#pragma unroll");
    k.line(o_rescale_);
  }
  k.close();
  exponentials(k, "mx");
}

void FlashLemma::update_lazy(Code& k, const std::string& P) const {
  const std::string f = max_factor(), tau = flit(kLazyRescaleLog2), bound = std::to_string(static_cast<int>(kLazyRescaleLog2));
  k.line("// online softmax (" + P + "), lazily rescaled: the chunk's row max; the reference max m_reg moves, and l and O are");
  k.line("// rescaled by exp(m_old - m_new), only where the max passed it by more than " + bound + " in the exponent (P <= 2^" + bound + " meanwhile)");
  k.line("float corr[2];");
  k.line("#pragma unroll");
  k.open("for (int h = 0; h < 2; ++h)");
  k.line("mx[h] = napkin::quad_max(mx[h]);");
  if (stats_) k.line("m_max[h] = fmaxf(m_max[h], mx[h]);");
  k.line("const bool moves = (mx[h] - m_reg[h]) * " + f + " > " + tau + ";  // the first chunk with a finite score: +inf > " + bound + "; none yet: NaN, false");
  k.line("corr[h] = moves ? napkin::exp2_ftz((m_reg[h] - mx[h]) * " + f + ") : 1.0f;");
  k.line("if (moves) m_reg[h] = mx[h];");
  k.line("l_reg[h] *= corr[h];");
  k.close();
  exponentials(k, "m_reg");
}

void FlashLemma::exponentials(Code& k, const std::string& m) const {
  const std::string f = max_factor();
  k.line("const float ms[2] = {" + m + "[0] == -INFINITY ? 0.0f : " + m + "[0] * " + f + ", " + m + "[1] == -INFINITY ? 0.0f : " + m + "[1] * " + f + "};");
  k.line("#pragma unroll");
  k.open("for (int nt = 0; nt < T_X / 8; ++nt)");
  k.line("#pragma unroll");
  k.open("for (int e = 0; e < 4; ++e)");
  k.line(s_ + " = napkin::exp2_ftz(" + s_ + " * " + exp_factor() + " - ms[e / 2]);  // P, unnormalised");
  k.line(l_ + "[e / 2] += " + s_ + ";");
  k.close();
  k.close();
}

void FlashLemma::rescale_o(Code& k) const {
  if (!softmax_ || !defer_o_) return;
  // Under a warp vote: with the lazy reference max the corrections are 1 in all but a row's first
  // chunks. (An exact max, moving at every new maximum, made the vote a loss: H100, 941 against 912 us.)
  k.open("if (__any_sync(0xffffffffu, corr[0] != 1.0f || corr[1] != 1.0f))");
  k.line("#pragma unroll");
  k.line(o_rescale_);
  k.close();
}

void FlashLemma::finalise(Code& k) const {
  if (!softmax_) return;
  k.line("float inv_l[2], l_tot[2];  // 1 / l, and l summed over the quad");
  k.line("#pragma unroll");
  k.line("for (int h = 0; h < 2; ++h) { l_tot[h] = napkin::quad_sum(" + l_ + "[h]); inv_l[h] = l_tot[h] > 0.0f ? 1.0f / l_tot[h] : " + std::string(kNanF) + "; }");  // l = 0: a row masked throughout, NaN as in the fp64 evaluator
}

std::string FlashLemma::statistic(char which, const std::string& h) const {
  // lazy: the true max, and l brought from the reference max to it, l exp(m_reg - m_max)
  const std::string m = (lazy_ ? std::string("m_max") : m_) + "[" + h + "]";
  if (which == 'm') return scale_.empty() ? m : "(" + m + (signed_ ? " * fabsf(score_scale))" : " * score_scale)");
  const std::string l = lazy_ ? "l_tot[" + h + "] * napkin::exp2_ftz((m_reg[" + h + "] - " + m + ") * " + max_factor() + ")" : "l_tot[" + h + "]";
  return "(" + m + " == -INFINITY ? " + std::string(kNanF) + " : " + l + ")";
}

std::string FlashLemma::result(const std::string& acc, const std::string& h) const {
  return softmax_ ? "(" + acc + " * inv_l[" + h + "])" : acc;
}

std::string FlashLemma::finalise_note() const { return softmax_ ? "O / l (normalised contraction)" : "O (a plain sum over " + x_ + ")"; }

RowsLemma::RowsLemma(Context& c, const Expr& e, std::string tag) : c_(c), e_(e), tag_(std::move(tag)) {}

bool RowsLemma::reduction() const { return e_.op == Op::sum || e_.op == Op::max || e_.op == Op::mean; }

void RowsLemma::init(Code& k) const {
  const std::string m = var("m"), l = var("l"), n = var("n"), s1 = var("s1"), s2 = var("s2");
  if (reduction()) {
    k.line(e_.op == Op::max ? "float " + m + " = -INFINITY;  // the running max (max-monoid)" : "float " + s1 + " = 0.0f;  // the running sum (associative sum, paper §3.1)");
    return;
  }
  if (e_.op == Op::softmax) {
    k.line("float " + m + " = -INFINITY, " + l + " = 0.0f;  // online max and sum (paper §4, one pass)");
    return;
  }
  k.line("float " + n + " = 0.0f, " + s1 + " = 0.0f, " + s2 + " = 0.0f;  // count, sum and sum of squares of v - shift");
  if (e_.op != Op::layernorm) return;
  k.open("const float " + var("shift") + " = [&]");
  k.line("const int64_t i_" + e_.axes[0] + " = 0;");
  k.line("return " + c_.value(*e_.args[0]) + ";");
  k.close("();");
}

void RowsLemma::update(Code& k) const {
  const std::string m = var("m"), l = var("l"), v = var("v"), s1 = var("s1"), dv = var("dv");
  if (reduction()) {
    k.line(e_.op == Op::max ? m + " = fmaxf(" + m + ", " + v + ");" : s1 + " += " + v + ";");
    return;
  }
  if (e_.op == Op::softmax) {
    k.line("if (" + v + " > " + m + ") { " + l + " = " + l + " * (" + m + " == -INFINITY ? 0.0f : __expf(" + m + " - " + v + ")); " + m + " = " + v + "; }");
    k.line(l + " += " + v + " == -INFINITY ? 0.0f : __expf(" + v + " - " + m + ");");
    return;
  }
  k.line(e_.op == Op::layernorm ? "const float " + dv + " = " + v + " - " + var("shift") + ";" : "const float " + dv + " = " + v + ";");
  k.line(var("n") + " += 1.0f; " + s1 + " += " + dv + "; " + var("s2") + " += " + dv + " * " + dv + ";");
}

void RowsLemma::update_group(Code& k) const {
  const std::string vg = var("vg");
  if (e_.op != Op::softmax) {
    k.line("#pragma unroll");
    k.open("for (int j = 0; j < 8; ++j)");
    k.line("const float " + var("v") + " = " + vg + "[j];");
    update(k);
    k.close();
    return;
  }
  const std::string m = var("m"), l = var("l"), gm = var("gm"), mL = var("mL");
  auto mx = [&](const std::string& a, const std::string& b) { return "fmaxf(" + a + ", " + b + ")"; };
  auto at = [&](int j) { return vg + "[" + std::to_string(j) + "]"; };
  k.line("const float " + gm + " = " + mx(mx(mx(at(0), at(1)), mx(at(2), at(3))), mx(mx(at(4), at(5)), mx(at(6), at(7)))) + ";  // the access's max");
  k.line("if (" + gm + " > " + m + ") { " + l + " *= " + m + " == -INFINITY ? 0.0f : napkin::exp2_ftz((" + m + " - " + gm + ") * " + kLog2e + "); " + m + " = " + gm + "; }");
  k.open("if (" + m + " != -INFINITY)");  // else every value so far is -inf: nothing to add (and -inf - -inf is NaN)
  k.line("const float " + mL + " = " + m + " * " + kLog2e + ";");
  k.line("#pragma unroll");
  k.line("for (int j = 0; j < 8; ++j) " + l + " += napkin::exp2_ftz(fmaf(" + vg + "[j], " + kLog2e + ", -" + mL + "));  // 2^(-inf) = 0 for a masked value");
  k.close();
}

void RowsLemma::merge(Code& k) const {
  const bool softmax = e_.op == Op::softmax;
  const std::string m = var("m"), l = var("l"), n = var("n"), s1 = var("s1"), s2 = var("s2");
  auto shfl = [](const std::string& x) { return "__shfl_xor_sync(0xffffffffu, " + x + ", o)"; };
  k.line("// over the lanes of one team: an aligned power-of-two group of the warp");
  k.open("for (int o = TEAM_LANES / 2; o > 0; o /= 2)");
  if (reduction()) {
    k.line(e_.op == Op::max ? m + " = fmaxf(" + m + ", " + shfl(m) + ");" : s1 + " += " + shfl(s1) + ";");
    k.close();
    k.open("if (TEAM_WARPS > 1)");
    k.line("if (lane == 0) stats_smem[warp][0] = " + (e_.op == Op::max ? m : s1) + ";");
    k.line("__syncthreads();");
    k.line("const int first = warp / TEAM_WARPS * TEAM_WARPS;");
    if (e_.op == Op::max) k.line(m + " = -INFINITY; for (int w = 0; w < TEAM_WARPS; ++w) " + m + " = fmaxf(" + m + ", stats_smem[first + w][0]);");
    else k.line(s1 + " = 0.0f; for (int w = 0; w < TEAM_WARPS; ++w) " + s1 + " += stats_smem[first + w][0];");
    k.line("__syncthreads();");
    k.close();
    return;
  }
  if (softmax) {
    k.line("const float m2 = " + shfl(m) + ", l2 = " + shfl(l) + ";");
    k.line("const float mm = fmaxf(" + m + ", m2);");
    k.line(l + " = (" + m + " == -INFINITY ? 0.0f : " + l + " * __expf(" + m + " - mm)) + (m2 == -INFINITY ? 0.0f : l2 * __expf(m2 - mm));");
    k.line(m + " = mm;");
  } else {
    k.line(n + " += " + shfl(n) + ", " + s1 + " += " + shfl(s1) + ", " + s2 + " += " + shfl(s2) + ";");
  }
  k.close();
  k.open("if (TEAM_WARPS > 1)");
  if (softmax) {
    k.line("if (lane == 0) stats_smem[warp][0] = " + m + ", stats_smem[warp][1] = " + l + ";");
    k.line("__syncthreads();");
    k.line("const int first = warp / TEAM_WARPS * TEAM_WARPS;");
    k.line(m + " = -INFINITY;");
    k.line("for (int w = 0; w < TEAM_WARPS; ++w) " + m + " = fmaxf(" + m + ", stats_smem[first + w][0]);");
    k.line(l + " = 0.0f;");
    k.line("for (int w = 0; w < TEAM_WARPS; ++w) " + l + " += stats_smem[first + w][0] == -INFINITY ? 0.0f : stats_smem[first + w][1] * __expf(stats_smem[first + w][0] - " + m + ");");
  } else {
    k.line("if (lane == 0) stats_smem[warp][0] = " + n + ", stats_smem[warp][1] = " + s1 + ", stats_smem[warp][2] = " + s2 + ";");
    k.line("__syncthreads();");
    k.line("const int first = warp / TEAM_WARPS * TEAM_WARPS;");
    k.line(n + " = 0.0f, " + s1 + " = 0.0f, " + s2 + " = 0.0f;");
    k.line("for (int w = 0; w < TEAM_WARPS; ++w) " + n + " += stats_smem[first + w][0], " + s1 + " += stats_smem[first + w][1], " + s2 + " += stats_smem[first + w][2];");
  }
  k.line("__syncthreads();");
  k.close();
}

void RowsLemma::finalise(Code& k) const {
  if (reduction()) return;
  if (e_.op == Op::softmax) {
    const std::string m = var("m"), l = var("l");
    k.line("const float " + var("mlog") + " = " + m + " == -INFINITY || !(" + l + " > 0.0f) ? " + std::string(kNanF) + " : fmaf(" + m +
           ", " + kLog2e + ", __log2f(" + l + "));  // y = 2^(v log2 e - mlog) = e^(v - m) / l; a row masked throughout: NaN as in the fp64 evaluator");
    return;
  }
  const std::string n = var("n"), s1 = var("s1"), s2 = var("s2"), m2 = var("m2");
  if (e_.op == Op::layernorm) {
    k.line("const float " + var("mean") + " = " + var("shift") + " + " + s1 + " / " + n + ";");
    k.line("const float " + m2 + " = fmaxf(" + s2 + " - " + s1 + " * " + s1 + " / " + n + ", 0.0f);  // sum of squared deviations from the mean");
  } else {
    k.line("const float " + m2 + " = " + s2 + ";  // rmsnorm: the sum of squares");
  }
  k.line("const float " + var("inv") + " = rsqrtf(" + m2 + " / " + n + " + " + flit(eps_of(e_)) + ");");
}

std::string RowsLemma::map() const {
  const std::string m = var("m"), v = var("v");
  if (e_.op == Op::max) return m;
  if (e_.op == Op::sum) return var("s1");
  if (e_.op == Op::mean) return var("s1") + " / static_cast<float>(N_" + e_.axes[0] + ")";
  if (e_.op == Op::softmax) return "napkin::exp2_ftz(fmaf(" + v + ", " + kLog2e + ", -" + var("mlog") + "))";  // mlog NaN: a row masked throughout
  std::string y = e_.op == Op::layernorm ? "(" + v + " - " + var("mean") + ") * " + var("inv") : v + " * " + var("inv");
  if (e_.args.size() > 1) y += " * " + var("w");
  if (e_.args.size() > 2) y += " + " + var("bias");
  return y;
}

}  // namespace napkin::cuda
