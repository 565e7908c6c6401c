// Strategy flash: S = f(contract(Q, K; d)), P = softmax(g(S); x), O = h(contract(P, V; x)) with x
// streamed: FlashAttention-2's loop, derived (paper §4, online softmax). Contract: see
// strategies.hpp. One thread block per (q tile, batch index); its WARPS warps own 16 * MT rows
// of q each; Q's tile is loaded once into registers (ldmatrix); per chunk of x, K and V arrive by
// cp.async into double buffers (K of the next chunk loads during this chunk's softmax, V during
// the next S), S = Q K^T and O += P V run on mma.sync, and S, P, the running max m and sum l
// never leave registers. Causal masks skip the chunks past the tile's last row. Where the hardware
// has wgmma and TMA, emit_flash_wgmma (flash_wgmma.cpp) adds the sm_90a variant, picked at run time.
#include <algorithm>

#include "emit/cuda/flash_form.hpp"
#include "emit/cuda/preamble.hpp"

namespace napkin::cuda {

std::optional<KernelEmit> emit_flash(Context& c, const KernelChoice& kc, const Hardware& hw, std::string& why) {
  if (c.options().reference) return why = "reference mode", std::nullopt;
  const Diagram& d = c.diagram();
  const KernelCost& cost = kc.cost;
  auto streams = kc.plan.streams();
  if (streams.size() > 1 || kc.plan.stream_passes() != 1) return why = "more than one stream, or a two-pass stream", std::nullopt;
  // x is the softmax's axis: streamed by the schedule, or kept whole and walked in chunks of 64.
  std::string x;
  for (const auto& name : cost.statements) {
    const Statement* st = d.find_statement(name);
    if (st->expr->kind == Expr::Kind::apply && st->expr->op == Op::softmax) x = st->expr->axes[0];
  }
  if (x.empty() || (!streams.empty() && streams[0].first != x)) return why = "no softmax along the streamed axis", std::nullopt;
  if (streams.empty() && (!cost.axes.count(x) || cost.axes.at(x).kind != AxisPlan::Kind::whole)) return why = "the softmax axis is grouped", std::nullopt;
  const std::int64_t TX = streams.empty() ? 64 : streams[0].second;
  const std::string x_note = streams.empty() ? "kept whole in the schedule, walked in chunks of 64" : "streamed by " + std::to_string(TX);
  // Find P (softmax along x), S (the contraction it reads), O (the contraction of P).
  const Statement *S = nullptr, *P = nullptr, *O = nullptr;
  const Expr *cs = nullptr, *co = nullptr;
  for (const auto& name : cost.statements) {
    const Statement* st = d.find_statement(name);
    if (st->expr->kind == Expr::Kind::apply && st->expr->op == Op::softmax && st->expr->axes[0] == x) P = st;
  }
  if (!P || cost.statements.size() != 3) return why = "not contraction, softmax, contraction", std::nullopt;
  for (const auto& name : cost.statements) {
    const Statement* st = d.find_statement(name);
    if (st == P) continue;
    std::vector<const Expr*> cons;
    bool other = false;
    walk(*st->expr, [&](const Expr& e) {
      if (e.kind != Expr::Kind::apply) return;
      if (e.op == Op::contract) cons.push_back(&e);
      else if (!is_elementwise(e.op) && e.op != Op::causal) other = true;
    });
    if (other || cons.size() != 1 || cons[0]->args.size() != 2 || cons[0]->axes.size() != 1) return why = "statements are not single contractions", std::nullopt;
    const Expr* e = cons[0];
    if (e->axes[0] == x && e->args[0]->kind == Expr::Kind::ref && e->args[0]->name == P->name) O = st, co = e;
    else S = st, cs = e;
  }
  if (!S || !O || !cs || !co) return why = "no S -> P -> O chain", std::nullopt;
  const std::string dk = cs->axes[0];
  const Expr &q_ref = *cs->args[0], &k_ref = *cs->args[1], &v_ref = *co->args[1];
  if (q_ref.kind != Expr::Kind::ref || k_ref.kind != Expr::Kind::ref || v_ref.kind != Expr::Kind::ref) return why = "operands are not arrays", std::nullopt;
  std::string Qn = q_ref.name, Kn = k_ref.name, Vn = v_ref.name;
  AxisList qa = c.axes(Qn), ka = c.axes(Kn), va = c.axes(Vn);
  if (contains(qa, x)) std::swap(Qn, Kn), std::swap(qa, ka);
  std::string M;
  for (const auto& dir : kc.plan.directives)
    if (dir.kind == Directive::Kind::group && M.empty() && contains(qa, dir.names[0]) && !contains(ka, dir.names[0])) M = dir.names[0];
  if (M.empty() || !contains(ka, x)) return why = "no grouped query axis", std::nullopt;
  const std::string dv = va.back();  // the value dimension: V's innermost axis
  if (dv == x || !contains(O->axes, dv)) return why = "V's innermost axis is not an output axis", std::nullopt;
  if (qa.back() != dk || ka.back() != dk || false) return why = "Q, K, V not stored with the head dimension innermost", std::nullopt;
  DType dt = c.dtype(Qn);
  if ((dt != DType::bf16 && dt != DType::fp16) || c.dtype(Kn) != dt || c.dtype(Vn) != dt) return why = "operands are not all bf16 or all fp16", std::nullopt;
  const MmaShape* mma = hw.warp_mma(dt);
  if (!mma || mma->m != 16 || mma->n != 8 || mma->k != 16) return why = "no m16n8k16 mma.sync", std::nullopt;
  const int warps = kc.plan.warps();
  const std::int64_t TQ = *kc.plan.group(M);
  const std::int64_t DK = cost.axes.at(dk).extent, DV = cost.axes.at(dv).extent;
  if (TQ % (16 * warps) != 0 || TX % 16 != 0 || DK % 16 != 0 || DV % 16 != 0) return why = "tiles not multiples of the mma shape", std::nullopt;
  if (cost.axes.at(dk).kind != AxisPlan::Kind::whole || cost.axes.at(dv).kind != AxisPlan::Kind::whole) return why = "head dimensions not whole", std::nullopt;
  const double smem = 2.0 * static_cast<double>(TQ * (DK + 8) + 2 * TX * (DK + 8) + 2 * TX * (DV + 8));
  if (smem > hw.smem_max_per_block_bytes) return why = "tiles do not fit SMEM", std::nullopt;
  AxisList batch;
  for (const auto& a : O->axes)
    if (a != M && a != dv) batch.push_back(a);
  bool causal = false;
  walk(*P->expr, [&](const Expr& e) { causal |= e.kind == Expr::Kind::apply && e.op == Op::causal && e.axes[0] == M && e.axes[1] == x; });
  const bool skip = causal && cost.causal_active_fraction < 1 && cost.causal_x == x && cost.causal_q == M;

  FlashForm f{x, M, dk, dv, Qn, Kn, Vn, S, P, O, cs, co, batch, dt, TQ, TX, DK, DV, warps, skip, x_note};
  const std::string ns = kernel_ns(kc.plan.name), T = ctype(dt), mf = "napkin::" + mma_function(*mma);
  Code k;
  k.line(describe_plan(kc.plan));
  k.line("// strategy flash: q = " + M + " (group " + std::to_string(TQ) + ", " + std::to_string(warps) + " warps x " + std::to_string(TQ / warps) +
         " rows), " + x + " " + x_note + " with the online-softmax lemma; " + dk + " = " + std::to_string(DK) + " and " + dv +
         " = " + std::to_string(DV) + " whole (compile-time)");
  k.line("// " + S->name + " and " + P->name + " live in registers only; " + mma->ptx);
  k.open("namespace " + ns);
  k.line("using T = " + T + ";");
  k.line("constexpr int T_Q = " + std::to_string(TQ) + ", T_X = " + std::to_string(TX) + ", D_K = " + std::to_string(DK) + ", D_V = " +
         std::to_string(DV) + ";");
  k.line("constexpr int WARPS = " + std::to_string(warps) + ", THREADS = WARPS * 32, MT = T_Q / (16 * WARPS);");
  k.line("constexpr int P_Q = D_K + 8, P_K = D_K + 8, P_V = D_V + 8;  // SMEM rows padded by 16 bytes");
  k.line("constexpr int OFF_K = T_Q * P_Q, OFF_V = OFF_K + 2 * T_X * P_K;  // Q tile, then K and V double buffers");
  k.line("constexpr size_t SMEM_BYTES = sizeof(T) * (OFF_V + 2 * T_X * P_V);");
  k.line("constexpr float LOG2E = 1.44269504f;");
  k.line("");
  k.line("__global__ void __launch_bounds__(THREADS) kernel(const Args a) {");
  ++k.indent;
  c.declare_sizes(k);
  k.line("extern __shared__ __align__(16) unsigned char smem_raw[];");
  k.line("T* smem = reinterpret_cast<T*>(smem_raw);");
  k.line("const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;");
  k.line("// grid: tiles of " + M + " (fastest: consecutive blocks share K and V in L2) x " + join(batch));
  k.line("int64_t bid = blockIdx.x;");
  k.line("const int64_t tiles_q = (N_" + M + " + T_Q - 1) / T_Q, o_" + M + " = bid % tiles_q * T_Q;");
  k.line("bid /= tiles_q;");
  decompose(k, "bid", batch);
  k.line("const int n_q = static_cast<int>(min(int64_t{T_Q}, N_" + M + " - o_" + M + "));");
  auto origin = [&](const std::string& arr, const std::string& row_axis, const std::string& row0) {
    return "a." + arr + " + " + offset(c, arr, [&](const std::string& ax) { return ax == row_axis ? row0 : (contains(batch, ax) ? "i_" + ax : "0"); });
  };
  k.line("const T* g_Q = " + origin(Qn, M, "o_" + M) + ";  // " + Qn + " tile [" + M + "][" + dk + "]");
  k.line("const T* g_K = " + origin(Kn, x, "0") + ";  // " + Kn + " [" + x + "][" + dk + "]");
  k.line("const T* g_V = " + origin(Vn, x, "0") + ";  // " + Vn + " [" + x + "][" + dv + "]");
  k.line("const int64_t rs_Q = " + stride(c, Qn, M) + ", rs_K = " + stride(c, Kn, x) + ", rs_V = " + stride(c, Vn, x) + ";");
  k.line("const bool vec = rs_Q % 8 == 0 && rs_K % 8 == 0 && rs_V % 8 == 0 && ((reinterpret_cast<uintptr_t>(g_Q) | reinterpret_cast<uintptr_t>(g_K) | "
         "reinterpret_cast<uintptr_t>(g_V)) % 16) == 0;");
  if (skip)
    k.line("const int64_t chunks = min((N_" + x + " + T_X - 1) / T_X, (o_" + M + " + n_q - 1) / T_X + 1);  // causal: later chunks are fully masked");
  else
    k.line("const int64_t chunks = (N_" + x + " + T_X - 1) / T_X;");
  k.open("auto load_k = [&](int64_t kc)");
  k.line("napkin::load_tile<T_X, D_K, P_K, THREADS>(smem + OFF_K + (kc % 2) * T_X * P_K, g_K + kc * T_X * rs_K, rs_K, static_cast<int>(min(int64_t{T_X}, N_" +
         x + " - kc * T_X)), D_K, vec);");
  k.close(";");
  k.open("auto load_v = [&](int64_t kc)");
  k.line("napkin::load_tile<T_X, D_V, P_V, THREADS>(smem + OFF_V + (kc % 2) * T_X * P_V, g_V + kc * T_X * rs_V, rs_V, static_cast<int>(min(int64_t{T_X}, N_" +
         x + " - kc * T_X)), D_V, vec);");
  k.close(";");
  k.line("// prologue: Q and the first K chunk (one cp.async group), the first V chunk (another)");
  k.line("napkin::load_tile<T_Q, D_K, P_Q, THREADS>(smem, g_Q, rs_Q, n_q, D_K, vec);");
  k.line("if (chunks > 0) load_k(0);");
  k.line("napkin::cp_async_commit();");
  k.line("if (chunks > 0) load_v(0);");
  k.line("napkin::cp_async_commit();");
  k.line("napkin::cp_async_wait<1>();");
  k.line("__syncthreads();");
  k.line("uint32_t qf[MT][D_K / 16][4];  // registers: this warp's rows of Q as mma A fragments");
  k.line("#pragma unroll");
  k.line("for (int mt = 0; mt < MT; ++mt)");
  k.line("#pragma unroll");
  k.line("  for (int kk = 0; kk < D_K / 16; ++kk) napkin::frag_a(qf[mt][kk], smem, P_Q, warp * (T_Q / WARPS) + mt * 16, kk * 16, lane);");
  k.line("float o[MT][D_V / 8][4] = {};  // registers: O accumulator (unnormalised)");
  k.line("float m_run[MT][2], l_run[MT][2];  // registers: running max and this thread's partial sum, rows lane/4 and lane/4 + 8");
  k.line("#pragma unroll");
  k.line("for (int mt = 0; mt < MT; ++mt) m_run[mt][0] = m_run[mt][1] = -INFINITY, l_run[mt][0] = l_run[mt][1] = 0.0f;");
  k.open("for (int64_t kc = 0; kc < chunks; ++kc)");
  k.line("napkin::cp_async_wait<1>();  // K of chunk kc has landed");
  k.line("__syncthreads();");
  k.line("if (kc + 1 < chunks) load_k(kc + 1);  // next K into the other buffer, during this chunk");
  k.line("napkin::cp_async_commit();");
  k.line("const T* sK = smem + OFF_K + (kc % 2) * T_X * P_K;");
  k.line("float s[MT][T_X / 8][4] = {};  // registers: S = Q K^T for this chunk");
  k.line("#pragma unroll");
  k.open("for (int kk = 0; kk < D_K / 16; ++kk)");
  k.line("#pragma unroll");
  k.open("for (int nt = 0; nt < T_X / 16; ++nt)");
  k.line("uint32_t kb[4];");
  k.line("napkin::frag_b(kb, sK, P_K, nt * 16, kk * 16, lane);");
  k.line("#pragma unroll");
  k.line("for (int mt = 0; mt < MT; ++mt) " + mf + "(s[mt][2 * nt], qf[mt][kk], kb), " + mf + "(s[mt][2 * nt + 1], qf[mt][kk], kb + 2);");
  k.close();
  k.close();
  // Score values: P's argument with S inlined, the contraction overridden by the accumulator. The
  // arrays it reads (masks, biases: not staged in tiles) are read against their extents (rows past
  // N_M, keys past N_x), except in an interior chunk of a full tile, where every index is in range.
  NodeOverride over_s = [&](const Expr& e) -> std::optional<std::string> {
    if (&e == cs) return std::string("s[mt][nt][e]");
    return std::nullopt;
  };
  const std::string score = c.value(*P->expr->args[0], over_s, {S->name});
  const std::string score_bounded = c.value(*P->expr->args[0], bounded_loads(c, over_s, {M, x}, {S->name}), {S->name});
  k.line("// " + S->name + " and " + P->name + "'s argument element by element; keys past N_" + x + " are masked");
  const bool reads_rows = c.value(*P->expr->args[0], bounded_loads(c, over_s, {M}, {S->name}), {S->name}) != score;
  if (score_bounded != score)
    k.line("const bool interior = " + std::string(reads_rows ? "n_q == T_Q && " : "") + "(kc + 1) * T_X <= N_" + x + ";  // every index the score map reads in range");
  k.line("#pragma unroll");
  k.open("for (int mt = 0; mt < MT; ++mt)");
  k.line("float mx[2] = {m_run[mt][0], m_run[mt][1]};");
  auto elements = [&](const std::string& value) {
    k.line("#pragma unroll");
    k.open("for (int nt = 0; nt < T_X / 8; ++nt)");
    k.line("#pragma unroll");
    k.open("for (int e = 0; e < 4; ++e)");
    k.line("const int64_t i_" + M + " = o_" + M + " + warp * (T_Q / WARPS) + mt * 16 + lane / 4 + (e / 2) * 8;");
    k.line("const int64_t i_" + x + " = kc * T_X + nt * 8 + (lane % 4) * 2 + e % 2;");
    k.line("(void)i_" + M + ";");
    k.line("const float v = " + value + ";");
    k.line("s[mt][nt][e] = i_" + x + " < N_" + x + " ? v : -INFINITY;");
    k.line("mx[e / 2] = fmaxf(mx[e / 2], s[mt][nt][e]);");
    k.close();
    k.close();
  };
  if (score_bounded == score) {
    elements(score);
  } else {
    k.open("if (interior)");
    elements(score);
    k.close(" else {");
    ++k.indent;
    elements(score_bounded);
    k.close();
  }
  k.line("// online softmax (" + P->name + "): new running max, rescale l and O by exp(m_old - m_new)");
  k.open("for (int h = 0; h < 2; ++h)");
  k.line("mx[h] = napkin::quad_max(mx[h]);");
  k.line("const float corr = mx[h] == -INFINITY ? 1.0f : exp2f((m_run[mt][h] - mx[h]) * LOG2E);");
  k.line("m_run[mt][h] = mx[h];");
  k.line("l_run[mt][h] *= corr;");
  k.line("#pragma unroll");
  k.line("for (int nt = 0; nt < D_V / 8; ++nt) o[mt][nt][2 * h] *= corr, o[mt][nt][2 * h + 1] *= corr;");
  k.close();
  k.line("const float ms[2] = {mx[0] == -INFINITY ? 0.0f : mx[0] * LOG2E, mx[1] == -INFINITY ? 0.0f : mx[1] * LOG2E};");
  k.line("#pragma unroll");
  k.open("for (int nt = 0; nt < T_X / 8; ++nt)");
  k.line("#pragma unroll");
  k.open("for (int e = 0; e < 4; ++e)");
  k.line("s[mt][nt][e] = exp2f(s[mt][nt][e] * LOG2E - ms[e / 2]);  // P, unnormalised");
  k.line("l_run[mt][e / 2] += s[mt][nt][e];");
  k.close();
  k.close();
  k.close();
  k.line("napkin::cp_async_wait<1>();  // V of chunk kc has landed");
  k.line("__syncthreads();");
  k.line("const T* sV = smem + OFF_V + (kc % 2) * T_X * P_V;");
  k.line("// O += P V: P's accumulator layout is the A fragment layout of the next mma (FlashAttention-2)");
  k.line("#pragma unroll");
  k.open("for (int kk = 0; kk < T_X / 16; ++kk)");
  k.line("uint32_t pa[MT][4];");
  k.line("#pragma unroll");
  k.open("for (int mt = 0; mt < MT; ++mt)");
  k.line("pa[mt][0] = napkin::pack2<T>(s[mt][2 * kk][0], s[mt][2 * kk][1]);");
  k.line("pa[mt][1] = napkin::pack2<T>(s[mt][2 * kk][2], s[mt][2 * kk][3]);");
  k.line("pa[mt][2] = napkin::pack2<T>(s[mt][2 * kk + 1][0], s[mt][2 * kk + 1][1]);");
  k.line("pa[mt][3] = napkin::pack2<T>(s[mt][2 * kk + 1][2], s[mt][2 * kk + 1][3]);");
  k.close();
  k.line("#pragma unroll");
  k.open("for (int nt = 0; nt < D_V / 16; ++nt)");
  k.line("uint32_t vb[4];");
  k.line("napkin::frag_b_t(vb, sV, P_V, nt * 16, kk * 16, lane);");
  k.line("#pragma unroll");
  k.line("for (int mt = 0; mt < MT; ++mt) " + mf + "(o[mt][2 * nt], pa[mt], vb), " + mf + "(o[mt][2 * nt + 1], pa[mt], vb + 2);");
  k.close();
  k.close();
  k.line("if (kc + 1 < chunks) load_v(kc + 1);  // next V into the other buffer, during the next S");
  k.line("napkin::cp_async_commit();");
  k.close();
  k.line("napkin::cp_async_wait<0>();");
  k.line("// finalise: O / l (normalised contraction), then " + O->name + "'s epilogue, predicated at the edges");
  k.line("#pragma unroll");
  k.open("for (int mt = 0; mt < MT; ++mt)");
  k.line("float inv_l[2];");
  k.line("#pragma unroll");
  k.line("for (int h = 0; h < 2; ++h) { const float l = napkin::quad_sum(l_run[mt][h]); inv_l[h] = l > 0.0f ? 1.0f / l : 0.0f; }");
  k.line("#pragma unroll");
  k.open("for (int nt = 0; nt < D_V / 8; ++nt)");
  k.line("#pragma unroll");
  k.open("for (int e = 0; e < 4; ++e)");
  k.line("const int row = warp * (T_Q / WARPS) + mt * 16 + lane / 4 + (e / 2) * 8;");
  k.line("if (row >= n_q) continue;");
  k.line("const int64_t i_" + M + " = o_" + M + " + row, i_" + dv + " = nt * 8 + (lane % 4) * 2 + e % 2;");
  NodeOverride over_o = [&](const Expr& e) -> std::optional<std::string> {
    if (&e == co) return std::string("(o[mt][nt][e] * inv_l[e / 2])");
    return std::nullopt;
  };
  k.line("a." + O->name + "[" + c.index(O->name) + "] = napkin::from_f<" + c.ctype_of(O->name) + ">(" + c.value(*O->expr, over_o) + ");");
  k.close();
  k.close();
  k.close();
  --k.indent;
  k.line("}");
  KernelEmit r;
  r.strategy = "flash";
  r.stored.insert(O->name);
  Code l;
  l.line("if (a.N_" + dk + " != " + std::to_string(DK) + " || a.N_" + dv + " != " + std::to_string(DV) + ") return napkin_fail(\"" + ns +
         ": this kernel was emitted for " + dk + " = " + std::to_string(DK) + ", " + dv + " = " + std::to_string(DV) + "\");");
  std::string blocks = "((a.N_" + M + " + " + std::to_string(TQ) + " - 1) / " + std::to_string(TQ) + ")";
  for (const auto& b : batch) blocks += " * a.N_" + b;
  l.line("const int64_t blocks = " + blocks + ";");
  l.line("if (blocks == 0) return 0;");
  add_hopper_variant(r, k, l, hw, ns, [&](const std::string& fallback, std::string& why_not) { return emit_flash_wgmma(c, kc, f, hw, fallback, why_not); });
  k.close("  // namespace " + ns);
  r.device_code = k.text;
  r.launch_code = l.text;
  return r;
}

}  // namespace napkin::cuda
