// Epilogues of the CUDA renderers (contract: render.hpp): the output tile computed from the
// accumulators (the lemma's finalise, the element-wise epilogue of the stored statement) and
// stored within the arrays' extents, paired where adjacent and aligned.
#include "emit/cuda/render.hpp"

namespace napkin::cuda {

NodeOverride gemm_accumulators(const GemmForm& g, const std::function<std::string(std::size_t)>& acc) {
  return [&g, acc](const Expr& e) -> std::optional<std::string> {
    for (std::size_t i = 0; i < g.gemms.size(); ++i)
      if (g.gemms[i].node == &e) return acc(i);
    return std::nullopt;
  };
}

// Each stored statement's value expands every statement of the kernel it reads in place (from the
// accumulators), stored ones included: H = G * U beside stored G and U must not read G and U back
// from global memory, where this very epilogue has not written them yet (napkin_torch's first GPU
// run, session 15: NaN gradients of the SwiGLU MLP from uninitialised buffers; the bench harness
// had passed on buffers left from its earlier runs).
void gemm_epilogue(Code& code, Context& c, const KernelChoice& kc, const GemmForm& g, const std::function<void(const std::function<void()>&)>& loops,
                   const std::function<std::string(std::size_t)>& acc, std::set<std::string>& stored) {
  const Diagram& d = c.diagram();
  const NodeOverride over = gemm_accumulators(g, acc);
  auto values = [&] {  // v_<o>[q] for q = 0, 1 at i_<N> = o_<N> + col + q
    std::vector<std::string> v;
    bool uses_n = false;
    for (const auto& o : kc.cost.outputs) {
      v.push_back("v_" + o + "[q] = " + c.value(*d.find_statement(o)->expr, over, kc.cost.statements) + ";");
      uses_n |= v.back().find("i_" + g.N) != std::string::npos;
      code.line("float v_" + o + "[2];");
    }
    code.line("#pragma unroll");
    code.open("for (int q = 0; q < 2; ++q)");
    if (uses_n) code.line("const int64_t i_" + g.N + " = o_" + g.N + " + col + q;");
    for (const auto& line : v) code.line(line);
    code.close();
  };
  // Interior tiles: every output stored with N innermost can take one paired store per element pair.
  std::string interior = "n_M == T_M && n_N == T_N && N_" + g.N + " % 2 == 0";
  for (const auto& o : kc.cost.outputs) {
    if (c.axes(o).empty() || c.axes(o).back() != g.N) interior.clear();
    if (interior.empty()) break;
    interior += " && reinterpret_cast<uintptr_t>(a." + o + ") % (2 * sizeof(*a." + o + ")) == 0";
  }
  if (!interior.empty()) {
    code.line("// interior tile, pairs aligned: unpredicated paired stores");
    code.open("if (" + interior + ")");
    loops([&] {
      code.line("const int64_t i_" + g.M + " = o_" + g.M + " + row;");
      values();
      code.line("const int64_t i_" + g.N + " = o_" + g.N + " + col;");
      for (const auto& o : kc.cost.outputs) code.line("napkin::store2(a." + o + " + " + c.index(o) + ", v_" + o + ");");
    });
    code.close(" else {");
    ++code.indent;
  }
  loops([&] {
    code.open("if (row < n_M && col < n_N)");
    code.line("const int64_t i_" + g.M + " = o_" + g.M + " + row;");
    for (const auto& o : kc.cost.outputs) code.line("float v_" + o + "[2] = {}; int64_t x_" + o + "[2] = {};");
    code.line("#pragma unroll");
    code.open("for (int q = 0; q < 2; ++q)");
    code.line("if (col + q >= n_N) break;");
    code.line("const int64_t i_" + g.N + " = o_" + g.N + " + col + q;");
    for (const auto& o : kc.cost.outputs) {
      code.line("x_" + o + "[q] = " + c.index(o) + ";");
      code.line("v_" + o + "[q] = " + c.value(*d.find_statement(o)->expr, over, kc.cost.statements) + ";");
    }
    code.close();
    for (const auto& o : kc.cost.outputs) code.line("napkin::store_pair(a." + o + ", x_" + o + ", v_" + o + ", col + 1 < n_N);");
    code.close();
  });
  if (!interior.empty()) {
    --code.indent;
    code.line("}");
  }
  stored.insert(kc.cost.outputs.begin(), kc.cost.outputs.end());
}

std::function<std::string(std::size_t)> gemm_accumulator(const GemmForm& g, const KernelPath& p, int joint_first) {
  const bool integer = is_integer_dtype(g.dtype), wgmma = p.wgmma();
  return [integer, wgmma, joint_first](std::size_t i) {
    std::string a;
    if (!wgmma) a = "acc" + std::to_string(i) + "[mt][nt][h * 2 + q]";
    else if (joint_first >= 0) a = std::string("acc0[ms][") + (static_cast<int>(i) == joint_first ? "" : "T_N / 2 + ") + "nt * 4 + h * 2 + q]";
    else a = "acc" + std::to_string(i) + "[ms][nt * 4 + h * 2 + q]";
    return integer ? "static_cast<float>(" + a + ")" : a;  // int32 -> fp32: exact below 2^24, then within 2^-24 relative
  };
}

void gemm_fragment_loops(Code& code, const KernelPath& p, bool by_32_columns, const std::function<void()>& body) {
  code.line("#pragma unroll");
  code.open(p.wgmma() ? "for (int ms = 0; ms < MS; ++ms)" : "for (int mt = 0; mt < MT; ++mt)");
  code.line("#pragma unroll");
  code.open(by_32_columns ? "for (int ng = 0; ng < T_N / 32; ++ng)" : p.wgmma() ? "for (int nt = 0; nt < T_N / 8; ++nt)" : "for (int nt = 0; nt < NT; ++nt)");
  code.line("#pragma unroll");
  code.open("for (int h = 0; h < 2; ++h)");
  const std::string row = p.wgmma() ? "const int row = r0 + ms * 64 + warp * 16 + lane / 4 + h * 8" : "const int row = warp * WM + mt * 16 + lane / 4 + h * 8";
  code.line(row + (by_32_columns ? ";" : ", col = nt * 8 + (lane % 4) * 2;"));
  body();
  code.close();
  code.close();
  code.close();
}

void gemm_path_epilogue(Code& code, Context& c, const KernelChoice& kc, const GemmForm& g, const KernelPath& p, int joint_first, std::set<std::string>& stored) {
  const auto acc = gemm_accumulator(g, p, joint_first);
  auto loops = [&](bool by_32_columns) {
    return [&code, &p, by_32_columns](const std::function<void()>& body) { gemm_fragment_loops(code, p, by_32_columns, body); };
  };
  if (!p.wgmma()) {
    code.line("// epilogue: accumulator elements (row, col + q) of each m16n8 tile -> outputs");
    gemm_epilogue(code, c, kc, g, loops(false), acc, stored);
    return;
  }
  code.line("// epilogue: per m64 subtile, warp w holds rows 16w..16w+15 as m16n8 accumulator tiles");
  // Tiles through SMEM by TMA (the edge tiles too where lowering says so: KernelSpec::tma_store_edges),
  // or interior tiles by 16-byte stores (16-bit outputs); the rest, and everything on the
  // mma.sync atom, by the bounded and paired stores of gemm_epilogue. (Edge tiles by TMA with
  // bounded epilogue inputs, measured on the H200 in session 45, bias + GELU at 4096 x 1024 x
  // 4096 / 4000: bounds on every tile 97.8 / 97.9 us against 94.2 unbounded; a branch between two
  // copies of the staging 94.2 / 107 us; a select between two expressions 179 us.)
  const bool tma_store = kc.cost.spec->tma_store;
  const std::string wide = tma_store ? "" : wide_store_condition(c, kc, g);
  if (tma_store) {
    const bool edges = kc.cost.spec->tma_store_edges;
    code.line(std::string(edges ? "// every tile with a row and a column in range" : "// interior tiles") +
              " through SMEM by TMA unless the host turned it off (napkin::tma_store_enabled)");
    code.open(edges ? "if (tma_store && n_M > 0 && n_N > 0)" : "if (tma_store && n_M == T_M && n_N == T_N)");
    gemm_tma_store_epilogue(code, c, kc, g, acc);
  } else if (!wide.empty()) {
    code.open("if (" + wide + ")");
    gemm_wide_store_epilogue(code, c, kc, g, loops(true), acc, stored);
  }
  if (tma_store || !wide.empty()) {
    code.close(" else {");
    ++code.indent;
  }
  gemm_epilogue(code, c, kc, g, loops(false), acc, stored);
  if (tma_store || !wide.empty()) {
    --code.indent;
    code.line("}");
  }
}

void flash_epilogue_fragments(Code& k, Context& c, const FlashForm& f, const FlashLemma& lemma, const std::vector<std::string>& outputs) {
  const std::string &M = f.M, &dv = f.dv;
  const Statement* O = f.O;
  const Expr* co = f.co;
  k.line("// finalise: " + lemma.finalise_note() + ", then " + O->name + "'s epilogue, predicated at the edges");
  k.line("#pragma unroll");
  k.open("for (int mt = 0; mt < MT; ++mt)");
  lemma.finalise(k);
  k.line("#pragma unroll");
  k.open("for (int nt = 0; nt < D_V / 8; ++nt)");
  k.line("#pragma unroll");
  k.open("for (int e = 0; e < 4; ++e)");
  k.line("const int row = warp * (T_Q / WARPS) + mt * 16 + lane / 4 + (e / 2) * 8;");
  k.line("if (row >= n_q) continue;");
  k.line("const int64_t i_" + M + " = o_" + M + " + row, i_" + dv + " = nt * 8 + (lane % 4) * 2 + e % 2;");
  NodeOverride over_o = [&](const Expr& e) -> std::optional<std::string> {
    if (&e == co) return lemma.result("O_reg[mt][nt][e]", "e / 2");
    return std::nullopt;
  };
  k.line("a." + O->name + "[" + c.index(O->name) + "] = napkin::from_f<" + c.ctype_of(O->name) + ">(" + c.value(*O->expr, over_o) + ");");
  k.close();
  k.close();
  flash_store_stats(k, c, f, lemma, outputs, "warp * (T_Q / WARPS) + mt * 16 + lane / 4 + h * 8");
  k.close();
}

void flash_epilogue_pairs(Code& k, Context& c, const FlashForm& f, const FlashLemma& lemma, const std::vector<std::string>& outputs) {
  const std::string& M = f.M;
  k.line("// finalise: " + lemma.finalise_note() + ", then " + f.O->name + "'s epilogue, two adjacent columns per store");
  lemma.finalise(k);
  k.line("#pragma unroll");
  k.open("for (int nt = 0; nt < D_V / 8; ++nt)");
  k.line("#pragma unroll");
  k.open("for (int h = 0; h < 2; ++h)");
  k.line("const int row = cw * 64 + warp * 16 + lane / 4 + h * 8;");
  k.line("if (row >= n_q) continue;");
  k.line("const int64_t i_" + M + " = o_" + M + " + row;");
  k.line("float v[2];");
  k.line("int64_t at[2];");
  k.line("#pragma unroll");
  k.open("for (int q = 0; q < 2; ++q)");
  k.line("const int64_t i_" + f.dv + " = nt * 8 + (lane % 4) * 2 + q;");
  NodeOverride over_o = [&](const Expr& e) -> std::optional<std::string> {
    if (&e == f.co) return lemma.result("O_reg[nt * 4 + h * 2 + q]", "h");
    return std::nullopt;
  };
  k.line("at[q] = " + c.index(f.O->name) + ";");
  k.line("v[q] = " + c.value(*f.O->expr, over_o) + ";");
  k.close();
  k.line("napkin::store_pair(a." + f.O->name + ", at, v, true);");
  k.close();
  k.close();
  flash_store_stats(k, c, f, lemma, outputs, "cw * 64 + warp * 16 + lane / 4 + h * 8");
}

void flash_store_stats(Code& k, Context& c, const FlashForm& f, const FlashLemma& lemma, const std::vector<std::string>& outputs, const std::string& row_of_h) {
  std::vector<const Statement*> stored;
  std::vector<std::string> names;
  for (const Statement* st : f.stats) {
    names.push_back(st->name);
    if (std::find(outputs.begin(), outputs.end(), st->name) != outputs.end()) stored.push_back(st);
  }
  if (stored.empty()) return;
  const Diagram& d = c.diagram();
  k.line("// the softmax's row statistics (" + join(names) + "): from the running max m and sum l, by the quad's first lane");
  k.line("#pragma unroll");
  k.open("for (int h = 0; h < 2; ++h)");
  k.line("const int row = " + row_of_h + ";");
  k.line("if (lane % 4 != 0 || row >= n_q) continue;");
  k.line("const int64_t i_" + f.M + " = o_" + f.M + " + row;");
  const NodeOverride over = [&](const Expr& n) -> std::optional<std::string> {
    if (const char which = flash_statistic(d, f, n)) return lemma.statistic(which, "h");
    return std::nullopt;
  };
  for (const Statement* st : stored)
    k.line("a." + st->name + "[" + c.index(st->name) + "] = napkin::from_f<" + c.ctype_of(st->name) + ">(" + c.value(*st->expr, over, names) + ");");
  k.close();
}

}  // namespace napkin::cuda
