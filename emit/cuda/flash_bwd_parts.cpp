// The steps the two paths of the flash_bwd renderer share (contract: flash_bwd_parts.hpp): grid
// decode, the causal skip's zeros, accumulators, the tiles' element-wise maps and broadcasts in
// the m16n8 fragment layout, the stores of tiles through SMEM staging, the outputs' epilogue.
#include "emit/cuda/flash_bwd_parts.hpp"

namespace napkin::cuda::bwd {

std::string n(std::int64_t v) { return std::to_string(v); }

std::string outer_count(const FlashBwdForm& f) {
  std::string o = "1";
  for (const auto& a : f.outer) o += " * N_" + a;
  return o;
}

void grid_and_chunks(const BwdKernel& b) {
  Code& k = b.k;
  const FlashBwdForm& f = b.f;
  const std::string &X = f.X, &Q = f.Q;
  k.line("int64_t bid = blockIdx.x;");
  k.line("[[maybe_unused]] const int64_t tiles_x = (N_" + X + " + T_X - 1) / T_X;");
  if (f.skip.empty()) {
    k.line("// grid: tiles of " + X + " (fastest: one head's blocks share its streamed chunks in L2) x " +
           (f.batch.empty() ? std::string("no batch axes") : join(f.batch)));
    k.line("const int64_t o_" + X + " = bid % tiles_x * T_X;");
    k.line("bid /= tiles_x;");
    decompose(k, "bid", f.batch);
  } else {  // FlashBwdForm::tile_chunks: the longest tiles first, so that no long block starts last
    k.line("// grid: " + (f.batch.empty() ? std::string("no batch axes") : join(f.batch)) + " (fastest) x tiles of " + X +
           ", the longest first (the causal skip leaves the tiles different numbers of chunks)");
    decompose(k, "bid", f.batch);
    k.line(std::string("const int64_t o_") + X + " = " + (f.skip == "after" ? "(tiles_x - 1 - bid)" : "bid") + " * T_X;");
  }
  k.line("const int n_x = static_cast<int>(min(int64_t{T_X}, N_" + X + " - o_" + X + "));");
  k.line("const int64_t chunks = (N_" + Q + " + T_Q - 1) / T_Q;");
  if (f.skip == "before")
    k.line("const int64_t kc_begin = min(chunks, o_" + X + " / T_Q), kc_end = chunks;  // causal: the chunks before this tile's first row are fully masked");
  else if (f.skip == "after")
    k.line("const int64_t kc_begin = 0, kc_end = min(chunks, (o_" + X + " + n_x - 1) / T_Q + 1);  // causal: the chunks past this tile's last row are fully masked");
  else
    k.line("const int64_t kc_begin = 0, kc_end = chunks;");
  k.line("const int64_t span = kc_end - kc_begin, steps = span * " + outer_count(f) + ";  // stream steps: chunks of " + Q +
         (f.outer.empty() ? std::string("") : ", inside the outer stream of " + join(f.outer)));
}

void step_indices(const BwdKernel& b, const std::string& it) {
  Code& k = b.k;
  k.line("const int64_t kc = kc_begin + " + it + " % span;  // the chunk of " + b.f.Q);
  if (b.f.outer.empty()) return;
  k.line("int64_t outer_" + it + " = " + it + " / span;");
  decompose(k, "outer_" + it, b.f.outer);
}

void chunk_bounds(const BwdKernel& b) {
  Code& k = b.k;
  k.line("const int64_t q0 = kc * T_Q;");
  k.line("const int n_q = static_cast<int>(min(int64_t{T_Q}, N_" + b.f.Q + " - q0));");
  k.line("[[maybe_unused]] const bool interior = n_x == T_X && n_q == T_Q;  // every index the maps read in range");
  k.line("// i_" + b.f.Q + " - i_" + b.f.X + " = cq - r + dqx: the masks over both axes compare 32-bit offsets (clamped: exact for bands under 2^29)");
  k.line("[[maybe_unused]] const int dqx = static_cast<int>(max(-(int64_t{1} << 30), min(int64_t{1} << 30, q0 - o_" + b.f.X + ")));");
}

namespace {

/** zlo_<tile>, zhi_<tile>: the skipped rows of Q whose zeros the tile's readers read over this
 *  block's X (BwdTile::zero_readers; lowering's flash_bwd_zero_rows, the same arithmetic). */
void zero_rows_read(const BwdKernel& b, const BwdTile& t) {
  Code& k = b.k;
  const FlashBwdForm& f = b.f;
  const std::string& name = t.s->name;
  const std::string &Q = f.Q, &X = f.X;
  k.line("// " + name + " is read after this kernel only by gemms walking the chunks inside its zero band (lower_kernel_of): its zeros are written");
  k.line("// only in the rows of " + Q + " whose tiles' chunks reach this block's " + X);
  k.line("int64_t zr_lo_" + name + " = N_" + Q + ", zr_hi_" + name + " = 0;");
  for (std::size_t i = 0; i < t.zero_readers.size(); ++i) {
    const ZeroReader& z = t.zero_readers[i];
    const std::string tm = std::to_string(z.TM), tk = std::to_string(z.TK), za = "za_" + name + "_" + std::to_string(i), zb = "zb_" + name + "_" + std::to_string(i);
    std::string lo = "int64_t{0}", hi = "N_" + Q;
    if (z.hi) {
      k.line("const int64_t " + za + " = o_" + X + " / " + tk + " * " + tk + " - (" + std::to_string(*z.hi) + ");  // tiles of " + tm + " rows, chunks of " + tk);
      lo = "(" + za + " > 0 ? " + za + " / " + tm + " * " + tm + " : int64_t{0})";
    }
    if (z.lo) {
      k.line("const int64_t " + zb + " = ((o_" + X + " + n_x - 1) / " + tk + " + 1) * " + tk + " - (" + std::to_string(*z.lo) + ");");
      hi = "(" + zb + " > 0 ? min(N_" + Q + ", (" + zb + " + " + tm + " - 1) / " + tm + " * " + tm + ") : int64_t{0})";
    }
    k.line("zr_lo_" + name + " = min(zr_lo_" + name + ", " + lo + "), zr_hi_" + name + " = max(zr_hi_" + name + ", " + hi + ");");
  }
  k.line("const int64_t zlo_" + name + " = max(zq_lo, zr_lo_" + name + "), zhi_" + name + " = max(zlo_" + name + ", min(zq_hi, zr_hi_" + name + "));");
}

}  // namespace

void zero_skipped(const BwdKernel& b) {
  Code& k = b.k;
  const FlashBwdForm& f = b.f;
  if (f.skip.empty()) return;
  k.line("// the skipped chunks' stored tiles are 0 (past the causal diagonal): written as zeros");
  k.line("const int64_t zq_lo = " + std::string(f.skip == "before" ? "0" : "min(N_" + f.Q + ", kc_end * T_Q)") + ", zq_hi = " +
         (f.skip == "before" ? "min(N_" + f.Q + ", kc_begin * T_Q)" : "N_" + f.Q) + ";");
  if (!f.outer.empty()) {
    k.open("for (int64_t zo = 0; zo < " + outer_count(f) + "; ++zo)");
    k.line("int64_t outer_zo = zo;");
    decompose(k, "outer_zo", f.outer);
  }
  for (const auto& t : f.tiles) {
    if (!t.stored) continue;
    const std::string& name = t.s->name;
    const std::string zlo = t.zero_readers.empty() ? "zq_lo" : "zlo_" + name, zhi = t.zero_readers.empty() ? "zq_hi" : "zhi_" + name;
    if (!t.zero_readers.empty()) zero_rows_read(b, t);
    const bool cols_x = t.s->axes.back() != f.Q;  // the lanes run along X unless Q is innermost
    const std::string rows = cols_x ? "(" + zhi + " - " + zlo + ")" : "static_cast<int64_t>(n_x)", cols = cols_x ? "static_cast<int64_t>(n_x)" : "(" + zhi + " - " + zlo + ")";
    const std::string row_idx = cols_x ? "const int64_t i_" + f.Q + " = " + zlo + " + rr;" : "const int64_t i_" + f.X + " = o_" + f.X + " + rr;";
    const std::string col_idx = cols_x ? "const int64_t i_" + f.X + " = o_" + f.X + " + cc;" : "const int64_t i_" + f.Q + " = " + zlo + " + cc;";
    if (t.staged) {  // the lanes' axis is innermost and 16-bit: 8 elements per lane and step
      // zl lanes per row, one chunk of 8 each (a row of at most 32 chunks: all of them), so a warp's
      // step covers 32 / zl rows (a row of 128 keys had left half the lanes idle)
      k.line("const int64_t zl = max(int64_t{1}, min(int64_t{32}, (" + cols + " + 7) / 8)), zr = 32 / zl;  // lanes per row (1 for an empty row), rows per warp step");
      k.open("for (int64_t rr = lane < zr * zl ? warp * zr + lane / zl : " + rows + "; rr < " + rows + "; rr += WARPS * zr)");
      k.line(row_idx);
      k.open("for (int64_t cc = lane % zl * 8; cc < " + cols + "; cc += zl * 8)");
      k.line(col_idx);
      k.line("T* dst = a." + name + " + " + b.c.index(name) + ";");
      k.line("if (vec_" + name + " && cc + 8 <= " + cols + ") *reinterpret_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0);");
      k.line("else for (int64_t j = 0; j < 8 && cc + j < " + cols + "; ++j) dst[j] = napkin::from_f<T>(0.0f);");
    } else {
      k.open("for (int64_t rr = warp; rr < " + rows + "; rr += WARPS)");
      k.line(row_idx);
      k.open("for (int64_t cc = lane; cc < " + cols + "; cc += 32)");
      k.line(col_idx);
      k.line("a." + name + "[" + b.c.index(name) + "] = napkin::from_f<" + b.c.ctype_of(name) + ">(0.0f);");
    }
    k.close();
    k.close();
  }
  if (!f.outer.empty()) k.close();
}

void accumulators(const BwdKernel& b) {
  for (const auto& o : b.f.outputs)
    b.k.line("float acc_" + o.out->name + "[MT][" + n(o.E / 8) + "][4] = {};  // registers: " + o.out->name + " accumulated over " + b.f.Q);
}

void store_flags(const BwdKernel& b) {
  for (const auto& t : b.f.tiles)
    if (t.staged)  // rows of the innermost axis are contiguous: 16-byte stores where the array and that axis's extent allow
      b.k.line("[[maybe_unused]] const bool vec_" + t.s->name + " = reinterpret_cast<uintptr_t>(a." + t.s->name + ") % 16 == 0 && N_" + t.s->axes.back() + " % 8 == 0;");
}

void tile_elements(const BwdKernel& b, const std::function<void()>& body) {
  Code& k = b.k;
  k.line("#pragma unroll");
  k.open("for (int mt = 0; mt < MT; ++mt)");
  k.line("#pragma unroll");
  k.open("for (int nt = 0; nt < T_Q / 8; ++nt)");
  k.line("#pragma unroll");
  k.open("for (int e = 0; e < 4; ++e)");
  k.line("const int r = warp * (T_X / WARPS) + mt * 16 + lane / 4 + (e / 2) * 8, cq = nt * 8 + (lane % 4) * 2 + e % 2;");
  k.line("const int64_t i_" + b.f.X + " = o_" + b.f.X + " + r, i_" + b.f.Q + " = q0 + cq;");
  k.line("(void)i_" + b.f.X + ", (void)i_" + b.f.Q + ", (void)r, (void)cq;");
  body();
  k.close();
  k.close();
  k.close();
}

void load_rows(const BwdKernel& b) {
  Code& k = b.k;
  for (const auto& a : b.f.row_vectors) {
    k.line("float row_" + a + "[MT][2];  // registers: " + a + " at this thread's rows of " + b.f.X);
    k.line("#pragma unroll");
    k.open("for (int mt = 0; mt < MT; ++mt)");
    k.line("#pragma unroll");
    k.open("for (int h = 0; h < 2; ++h)");
    k.line("const int64_t i_" + b.f.X + " = o_" + b.f.X + " + warp * (T_X / WARPS) + mt * 16 + lane / 4 + h * 8;");
    k.line("row_" + a + "[mt][h] = " + b.c.bounded_load(a, {b.f.X}) + ";");
    k.close();
    k.close();
  }
}

void load_cols(const BwdKernel& b) {
  Code& k = b.k;
  for (const auto& a : b.f.col_vectors) {
    k.line("float col_" + a + "[T_Q / 8][2];  // registers: " + a + " at this thread's columns of the chunk");
    k.line("#pragma unroll");
    k.open("for (int nt = 0; nt < T_Q / 8; ++nt)");
    k.line("#pragma unroll");
    k.open("for (int j = 0; j < 2; ++j)");
    k.line("const int64_t i_" + b.f.Q + " = q0 + nt * 8 + (lane % 4) * 2 + j;");
    k.line("col_" + a + "[nt][j] = " + b.c.bounded_load(a, {b.f.Q}) + ";");
    k.close();
    k.close();
  }
}

void tile_map(const BwdKernel& b, const BwdTile& t, bool masked) {
  Code& k = b.k;
  const FlashBwdForm& f = b.f;
  const std::string name = "t_" + t.s->name;
  const auto tiles = f.tile_names();
  // A causal or band mask over the tile's two axes tests i_b - i_a against its band. In 64 bits
  // per element that cost the causal backward 488 bytes of spills (ptxas, sm_90a); as the
  // element's 32-bit offsets in the tile plus the chunk's clamped dqx (chunk_bounds) it is one
  // integer compare of per-thread constants, exact for bands under 2^29.
  auto tile_mask = [&](const Expr& e) -> std::optional<std::string> {
    if (e.kind != Expr::Kind::apply || (e.op != Op::causal && e.op != Op::band) || e.axes.size() != 2) return std::nullopt;
    const MaskBand keep = mask_band(e);
    const std::int64_t limit = std::int64_t{1} << 29;
    if (keep.hi <= -limit || keep.hi >= limit || (keep.lo && (*keep.lo <= -limit || *keep.lo >= limit))) return std::nullopt;
    if (e.axes[0] == f.Q && e.axes[1] == f.X) return band_value(e, "(r - cq - dqx)");  // i_X - i_Q
    if (e.axes[0] == f.X && e.axes[1] == f.Q) return band_value(e, "(cq - r + dqx)");  // i_Q - i_X
    return std::nullopt;
  };
  NodeOverride over;
  over = [&](const Expr& e) -> std::optional<std::string> {
    if (&e == t.node) return name + "[mt][nt][e]";
    if (auto m = tile_mask(e)) return m;
    // exp as the forward's online softmax computes it (render_lemma.cpp): one ex2 of the scaled
    // argument, denormal results flushed (an absolute error under 2^-126: numeric.cuh exp2_ftz)
    if (e.kind == Expr::Kind::apply && e.op == Op::exp) return "napkin::exp2_ftz((" + b.c.value(*e.args[0], over) + ") * 1.4426950408889634f)";
    if (e.kind != Expr::Kind::ref) return std::nullopt;
    if (contains(tiles, e.name)) return "t_" + e.name + "[mt][nt][e]";
    if (contains(f.row_vectors, e.name)) return "row_" + e.name + "[mt][e / 2]";
    if (contains(f.col_vectors, e.name)) return "col_" + e.name + "[nt][e % 2]";
    return std::nullopt;
  };
  auto rounded = [&](std::string v) { return t.s->dtype ? "napkin::round_to<" + ctype(*t.s->dtype) + ">(" + v + ")" : v; };
  const std::string value = rounded(b.c.value(*t.s->expr, over));
  if (!masked) {
    NAPKIN_ASSERT(map_reads_registers_only(b, t)) << "an unmasked tile map reading global memory at the element's indices";
    if (t.node && value == name + "[mt][nt][e]") return;  // the identity on its accumulator
    k.line("// " + t.s->name + " element by element" + (t.node ? " (in place on its accumulator)" : "") + ", unmasked: past N_" + f.X + " or N_" + f.Q +
           " finite values of no meaning");
    tile_elements(b, [&] { k.line(name + "[mt][nt][e] = " + value + ";"); });
    return;
  }
  const std::string bounded = rounded(b.c.value(*t.s->expr, bounded_loads(b.c, over, {f.X, f.Q}, {})));
  k.line("// " + t.s->name + " element by element" + (t.node ? " (in place on its accumulator)" : "") +
         "; in a boundary chunk, elements past N_" + f.X + " or N_" + f.Q + " are 0");
  k.open("if (interior)");
  tile_elements(b, [&] { k.line(name + "[mt][nt][e] = " + value + ";"); });
  k.close(" else {");
  ++k.indent;
  tile_elements(b, [&] { k.line(name + "[mt][nt][e] = r < n_x && cq < n_q ? " + bounded + " : 0.0f;"); });
  k.close();
}

bool map_reads_registers_only(const BwdKernel& b, const BwdTile& t) {
  const FlashBwdForm& f = b.f;
  const auto tiles = f.tile_names();
  for (const auto& a : t.reads) {
    const bool contracted = t.node && (a == t.resident || a == t.streamed);  // read by its contraction, into the accumulator
    if (!contracted && !contains(tiles, a) && !contains(f.row_vectors, a) && !contains(f.col_vectors, a)) return false;
  }
  return true;
}

void mask_columns_past_n_q(const BwdKernel& b, const BwdTile& t) {
  Code& k = b.k;
  const std::string name = "t_" + t.s->name;
  k.line("// " + t.s->name + "'s columns past N_" + b.f.Q + " summed as zeros (selects, no branch: n_q = T_Q in an interior chunk)");
  tile_elements(b, [&] { k.line(name + "[mt][nt][e] = cq < n_q ? " + name + "[mt][nt][e] : 0.0f;"); });
}

void store_tile(const BwdKernel& b, const BwdTile& t, const StoreGroup& g) {
  Code& k = b.k;
  const FlashBwdForm& f = b.f;
  const std::string& name = t.s->name;
  const std::string ct = b.c.ctype_of(name);
  if (!t.staged) {
    k.line("// " + name + " stored element by element (not " + f.X + "-innermost in the operands' dtype: no staging)");
    tile_elements(b, [&] {
      k.line("if (r < n_x && cq < n_q) a." + name + "[" + b.c.index(name) + "] = napkin::from_f<" + ct +
             ">(t_" + name + "[mt][nt][e]);");
    });
    return;
  }
  const std::string P = "P_ST_" + name, st = "st_" + name, X = f.X, Q = f.Q;
  const std::string col = "(nt * 8 + (lane % 4) * 2 + e % 2)", row = "(warp * (T_X / WARPS) + mt * 16 + lane / 4 + (e / 2) * 8)";
  k.line("// " + name + " out: into its staging tile" + (t.x_inner ? " (transposed)" : "") + ", then rows of " + (t.x_inner ? X : Q) + " in 16-byte vectors");
  if (g.before) k.line(g.barrier + "  // the previous chunk's copy-out of the staging tile is done");
  k.line("T* " + st + " = reinterpret_cast<T*>(smem + OFF_ST_" + name + ");");
  k.line("#pragma unroll");
  k.open("for (int mt = 0; mt < MT; ++mt)");
  k.line("#pragma unroll");
  k.open("for (int nt = 0; nt < T_Q / 8; ++nt)");
  k.line("#pragma unroll");
  k.line("for (int e = 0; e < 4; ++e) " + st + "[" + (t.x_inner ? col + " * " + P + " + " + row : row + " * " + P + " + " + col) + "] = napkin::from_f<T>(t_" + name +
         "[mt][nt][e]);");
  k.close();
  k.close();
  k.line(g.barrier);
  // the group's threads copy out its rows of X: x_rows of them from x_lo
  const std::string lo = g.x_lo == "0" ? "" : g.x_lo + " + ";
  const std::string inner = t.x_inner ? g.x_rows : "T_Q", outer = t.x_inner ? "T_Q" : g.x_rows;
  k.open("for (int v = " + g.thread + "; v < " + outer + " * (" + inner + " / 8); v += " + g.count + ")");
  if (t.x_inner) {
    k.line("const int r = v / (" + inner + " / 8), c8 = " + lo + "v % (" + inner + " / 8) * 8;");
    k.line("const int64_t i_" + Q + " = q0 + r, i_" + X + " = o_" + X + " + c8;");
    k.line("if (r >= n_q) continue;");
    k.line("const int valid = n_x - c8;");
  } else {
    k.line("const int r = " + lo + "v / (" + inner + " / 8), c8 = v % (" + inner + " / 8) * 8;");
    k.line("const int64_t i_" + X + " = o_" + X + " + r, i_" + Q + " = q0 + c8;");
    k.line("if (r >= n_x) continue;");
    k.line("const int valid = n_q - c8;");
  }
  k.line("T* dst = a." + name + " + " + b.c.index(name) + ";");
  k.line("if (vec_" + name + " && valid >= 8) *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(" + st + " + r * " + P + " + c8);");
  k.line("else for (int j = 0; j < 8 && j < valid; ++j) dst[j] = " + st + "[r * " + P + " + c8 + j];");
  k.close();
}

void epilogue(const BwdKernel& b) {
  Code& k = b.k;
  const FlashBwdForm& f = b.f;
  for (const auto& o : f.outputs) {
    k.line("// " + o.out->name + "'s epilogue");
    k.line("#pragma unroll");
    k.open("for (int mt = 0; mt < MT; ++mt)");
    k.line("#pragma unroll");
    k.open("for (int nt = 0; nt < " + n(o.E / 8) + "; ++nt)");
    k.line("#pragma unroll");
    k.open("for (int e = 0; e < 4; ++e)");
    k.line("const int row = warp * (T_X / WARPS) + mt * 16 + lane / 4 + (e / 2) * 8;");
    k.line("if (row >= n_x) continue;");
    k.line("const int64_t i_" + f.X + " = o_" + f.X + " + row, i_" + o.e + " = nt * 8 + (lane % 4) * 2 + e % 2;");
    NodeOverride over = [&](const Expr& e) -> std::optional<std::string> {
      if (&e == o.node) return "acc_" + o.out->name + "[mt][nt][e]";
      return std::nullopt;
    };
    k.line("a." + o.out->name + "[" + b.c.index(o.out->name) + "] = napkin::from_f<" + b.c.ctype_of(o.out->name) + ">(" + b.c.value(*o.out->expr, over) + ");");
    k.close();
    k.close();
    k.close();
  }
}

}  // namespace napkin::cuda::bwd
