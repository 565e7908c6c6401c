// Strategy flash_bwd (lower/flash_bwd_form.hpp): FlashAttention-2's backward loop, derived (Dao
// 2023, Algorithm 2). Contract: see strategies.hpp. One thread block per (tile of T_X rows of X,
// batch index); its WARPS warps own T_X / WARPS rows each. The resident operands' tiles (K, V)
// are staged once by cp.async; the streamed operands (Q, dO) arrive per chunk of T_Q into double
// buffers. Per chunk, in dataflow order, each tile statement is computed transposed (X rows, Q
// columns) in mma.sync accumulator fragments (S^T = K Q^T on m16n8k16, its element-wise map in
// place), each accumulated output takes its tile as the A operand straight from the registers
// (dV += P^T dO, the fragment repacked to 16 bits as in the forward's O += P V), and each stored
// tile is written transposed into an SMEM staging tile and copied out in 16-byte rows. The
// outputs' fp32 accumulators stay in registers across the stream and are stored once.
#include "emit/cuda/preamble.hpp"
#include "emit/cuda/render.hpp"

namespace napkin::cuda {

namespace {

struct BwdKernel {
  Context& c;
  const KernelChoice& kc;
  const FlashBwdForm& f;
  const MmaShape& mma;
  Code& k;
};

std::string n(std::int64_t v) { return std::to_string(v); }

/** The plan's comment, the namespace, the tile constants and the SMEM layout (elements of T):
 *  resident tiles [T_X][P_<A>], then streamed double buffers [2][T_Q][P_<A>], then staging tiles
 *  [T_Q][P_ST]. */
void head(const BwdKernel& b) {
  Code& k = b.k;
  const FlashBwdForm& f = b.f;
  k.line(describe_plan(b.kc.plan));
  k.line("// strategy flash_bwd: " + f.X + " grouped by " + n(f.TX) + " (" + n(f.warps) + " warps x " + n(f.TX / f.warps) + " rows), " + f.Q +
         " streamed by " + n(f.TQ) + "; tiles " + join(f.tile_names()) + " in registers (transposed: " + f.X + " rows, " + f.Q + " columns); " +
         b.mma.ptx);
  if (!f.skip.empty())
    k.line("// causal: the chunks of " + f.Q + " " + (f.skip == "before" ? "before the tile's first" : "past the tile's last") + " row of " + f.X +
           " are fully masked and skipped (" + std::to_string(static_cast<int>(f.active_fraction * 100 + 0.5)) + "% of the chunks run)");
  k.open("namespace " + kernel_ns(b.kc.plan.name));
  k.line("using T = " + ctype(f.dtype) + ";");
  k.line("constexpr int T_X = " + n(f.TX) + ", T_Q = " + n(f.TQ) + ", WARPS = " + n(f.warps) + ", THREADS = WARPS * 32, MT = T_X / (16 * WARPS);");
  std::string off = "0";
  for (const auto& o : f.operands) {
    k.line("constexpr int W_" + o.array + " = " + n(o.width) + ", P_" + o.array + " = W_" + o.array + " + 8, OFF_" + o.array + " = " + off + ";  // " +
           (o.streamed ? "streamed, 2 x [T_Q][P]: " : "resident [T_X][P]: ") + o.array + " [" + o.rows + "][" + o.cols + "]");
    off = "OFF_" + o.array + " + " + (o.streamed ? "2 * T_Q" : "T_X") + " * P_" + o.array;
  }
  for (const auto& t : f.tiles)
    if (t.staged) {
      const std::string rows = t.x_inner ? "T_Q" : "T_X", pitch = t.x_inner ? "T_X + 8" : "T_Q + 8";
      k.line("constexpr int OFF_ST_" + t.s->name + " = " + off + ", P_ST_" + t.s->name + " = " + pitch + ";  // staging [" + rows + "][" + pitch + "] of " +
             t.s->name);
      off = "OFF_ST_" + t.s->name + " + " + rows + " * P_ST_" + t.s->name;
    }
  k.line("constexpr size_t SMEM_BYTES = sizeof(T) * (" + off + ");");
  k.line("");
  k.line("__global__ void __launch_bounds__(THREADS) kernel(const Args a) {");
  ++k.indent;
  b.c.declare_sizes(k);
  k.line("extern __shared__ __align__(16) unsigned char smem_raw[];");
  k.line("T* smem = reinterpret_cast<T*>(smem_raw);");
  k.line("const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;");
}

/** Grid decode (tiles of X fastest: consecutive blocks share the streamed chunks in L2), the
 *  operands' origins and row strides, the chunk loader and the prologue (resident tiles and the
 *  first chunk in one cp.async group). */
void staging(const BwdKernel& b) {
  Code& k = b.k;
  const FlashBwdForm& f = b.f;
  const std::string &X = f.X, &Q = f.Q;
  k.line("// grid: tiles of " + X + " x " + (f.batch.empty() ? std::string("no batch axes") : join(f.batch)));
  k.line("int64_t bid = blockIdx.x;");
  k.line("const int64_t tiles_x = (N_" + X + " + T_X - 1) / T_X, o_" + X + " = bid % tiles_x * T_X;");
  k.line("bid /= tiles_x;");
  decompose(k, "bid", f.batch);
  k.line("const int n_x = static_cast<int>(min(int64_t{T_X}, N_" + X + " - o_" + X + "));");
  std::string vec = "true", ptrs = "0";
  for (const auto& o : f.operands) {
    const std::string origin = offset(b.c, o.array, [&](const std::string& ax) {
      if (ax == X) return "o_" + X;
      return contains(f.batch, ax) ? "i_" + ax : std::string("0");
    });
    k.line("const T* g_" + o.array + " = a." + o.array + " + " + origin + ";");
    k.line("const int64_t rs_" + o.array + " = " + stride(b.c, o.array, o.rows) + ";");
    vec += " && rs_" + o.array + " % 8 == 0";
    ptrs += " | reinterpret_cast<uintptr_t>(g_" + o.array + ")";
  }
  k.line("const bool vec = " + vec + " && ((" + ptrs + ") % 16) == 0;  // 16-byte cp.async");
  k.line("const int64_t chunks = (N_" + Q + " + T_Q - 1) / T_Q;");
  if (f.skip == "before")
    k.line("const int64_t kc_begin = min(chunks, o_" + X + " / T_Q), kc_end = chunks;  // causal: the chunks before this tile's first row are fully masked");
  else if (f.skip == "after")
    k.line("const int64_t kc_begin = 0, kc_end = min(chunks, (o_" + X + " + n_x - 1) / T_Q + 1);  // causal: the chunks past this tile's last row are fully masked");
  else
    k.line("const int64_t kc_begin = 0, kc_end = chunks;");
  k.open("auto load_chunk = [&](int64_t kc)");
  k.line("const int rows = static_cast<int>(min(int64_t{T_Q}, N_" + Q + " - kc * T_Q));");
  for (const auto& o : f.operands)
    if (o.streamed)
      k.line("napkin::load_tile<T_Q, W_" + o.array + ", P_" + o.array + ", THREADS>(smem + OFF_" + o.array + " + (kc % 2) * T_Q * P_" + o.array + ", g_" +
             o.array + " + kc * T_Q * rs_" + o.array + ", rs_" + o.array + ", rows, W_" + o.array + ", vec);");
  k.close(";");
  k.line("// prologue: the resident tiles and the first chunk");
  for (const auto& o : f.operands)
    if (!o.streamed)
      k.line("napkin::load_tile<T_X, W_" + o.array + ", P_" + o.array + ", THREADS>(smem + OFF_" + o.array + ", g_" + o.array + ", rs_" + o.array +
             ", n_x, W_" + o.array + ", vec);");
  k.line("if (kc_begin < kc_end) load_chunk(kc_begin);");
  k.line("napkin::cp_async_commit();");
}

/** Zeros into the stored tiles over the skipped chunks (their values there are exactly 0:
 *  flash_bwd_causal_skip): each warp takes rows of one axis, its lanes the other (the array's
 *  innermost where it is X or Q), 16-byte zero vectors where the row is contiguous and aligned. */
void zero_skipped(const BwdKernel& b) {
  Code& k = b.k;
  const FlashBwdForm& f = b.f;
  if (f.skip.empty()) return;
  k.line("// the skipped chunks' stored tiles are 0 (past the causal diagonal): written as zeros");
  k.line("const int64_t zq_lo = " + std::string(f.skip == "before" ? "0" : "min(N_" + f.Q + ", kc_end * T_Q)") + ", zq_hi = " +
         (f.skip == "before" ? "min(N_" + f.Q + ", kc_begin * T_Q)" : "N_" + f.Q) + ";");
  for (const auto& t : f.tiles) {
    if (!t.stored) continue;
    const std::string& name = t.s->name;
    const bool cols_x = t.s->axes.back() != f.Q;  // the lanes run along X unless Q is innermost
    const std::string rows = cols_x ? "(zq_hi - zq_lo)" : "static_cast<int64_t>(n_x)", cols = cols_x ? "static_cast<int64_t>(n_x)" : "(zq_hi - zq_lo)";
    const std::string row_idx = cols_x ? "const int64_t i_" + f.Q + " = zq_lo + rr;" : "const int64_t i_" + f.X + " = o_" + f.X + " + rr;";
    const std::string col_idx = cols_x ? "const int64_t i_" + f.X + " = o_" + f.X + " + cc;" : "const int64_t i_" + f.Q + " = zq_lo + cc;";
    k.open("for (int64_t rr = warp; rr < " + rows + "; rr += WARPS)");
    k.line(row_idx);
    if (t.staged) {  // the lanes' axis is innermost and 16-bit: 8 elements per lane and step
      k.open("for (int64_t cc = lane * 8; cc < " + cols + "; cc += 256)");
      k.line(col_idx);
      k.line("T* dst = a." + name + " + " + b.c.index(name) + ";");
      k.line("if (vec_" + name + " && cc + 8 <= " + cols + ") *reinterpret_cast<uint4*>(dst) = make_uint4(0, 0, 0, 0);");
      k.line("else for (int64_t j = 0; j < 8 && cc + j < " + cols + "; ++j) dst[j] = napkin::from_f<T>(0.0f);");
    } else {
      k.open("for (int64_t cc = lane; cc < " + cols + "; cc += 32)");
      k.line(col_idx);
      k.line("a." + name + "[" + b.c.index(name) + "] = napkin::from_f<" + b.c.ctype_of(name) + ">(0.0f);");
    }
    k.close();
    k.close();
  }
}

/** The accumulators of the outputs, fp32 in m16n8 fragments. */
void accumulators(const BwdKernel& b) {
  for (const auto& o : b.f.outputs)
    b.k.line("float acc_" + o.out->name + "[MT][" + n(o.E / 8) + "][4] = {};  // registers: " + o.out->name + " accumulated over " + b.f.Q);
}

/** The loops over the thread's elements of a tile (mt, nt, e): `r` and `cq`, the element's row
 *  of X and column of Q inside the tile (32-bit), and i_<X>, i_<Q> set, running `body`. */
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

/** Arrays the element-wise maps read along one side of the tile only (beside the batch axes):
 *  `rows` those over X (loaded once per block into row_<A>[MT][2], the two rows of each m16 tile
 *  a thread holds), `cols` those over Q (per chunk into col_<A>[T_Q / 8][2]). */
struct Broadcasts {
  std::vector<std::string> rows, cols;
};

Broadcasts broadcasts(const BwdKernel& b) {
  Broadcasts out;
  const FlashBwdForm& f = b.f;
  const auto tiles = f.tile_names();
  for (const auto& t : f.tiles)
    for (const auto& a : t.reads) {
      if (contains(tiles, a) || f.operand(a) >= 0 || !b.c.diagram().array_axes(a)) continue;
      bool has_x = false, has_q = false, other = false;
      for (const auto& ax : b.c.axes(a)) has_x |= ax == f.X, has_q |= ax == f.Q, other |= ax != f.X && ax != f.Q && !contains(f.batch, ax);
      if (other || has_x == has_q) continue;
      auto& list = has_x ? out.rows : out.cols;
      if (!contains(list, a)) list.push_back(a);
    }
  return out;
}

/** Emits the loads of the row broadcasts (once per block). */
void load_rows(const BwdKernel& b, const Broadcasts& bc) {
  Code& k = b.k;
  for (const auto& a : bc.rows) {
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

/** Emits the loads of the column broadcasts (per chunk). */
void load_cols(const BwdKernel& b, const Broadcasts& bc) {
  Code& k = b.k;
  for (const auto& a : bc.cols) {
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

/** Tile statement `t`: its contraction on mma.sync (the resident rows as A by ldmatrix, the
 *  streamed chunk as B), then its element-wise map in place, elements past N_X or N_Q set to 0. */
void tile_statement(const BwdKernel& b, const BwdTile& t) {
  Code& k = b.k;
  const FlashBwdForm& f = b.f;
  const std::string name = "t_" + t.s->name;
  const std::string mf = "napkin::" + mma_function(b.mma);
  k.line("float " + name + "[MT][T_Q / 8][4] = {};  // registers: " + t.s->name + " (transposed)");
  if (t.node) {
    const std::string &R = t.resident, &C = t.streamed;
    k.line("// contract(" + R + ", " + C + "; " + t.c + ") on " + b.mma.ptx);
    k.line("#pragma unroll");
    k.open("for (int kk = 0; kk < W_" + R + " / 16; ++kk)");
    k.line("uint32_t ra[MT][4];");
    k.line("#pragma unroll");
    k.line("for (int mt = 0; mt < MT; ++mt) napkin::frag_a(ra[mt], smem + OFF_" + R + ", P_" + R + ", warp * (T_X / WARPS) + mt * 16, kk * 16, lane);");
    k.line("#pragma unroll");
    k.open("for (int nt = 0; nt < T_Q / 16; ++nt)");
    k.line("uint32_t cb[4];");
    k.line("napkin::frag_b(cb, s_" + C + ", P_" + C + ", nt * 16, kk * 16, lane);");
    k.line("#pragma unroll");
    k.line("for (int mt = 0; mt < MT; ++mt) " + mf + "(" + name + "[mt][2 * nt], ra[mt], cb), " + mf + "(" + name + "[mt][2 * nt + 1], ra[mt], cb + 2);");
    k.close();
    k.close();
  }
  const auto tiles = f.tile_names();
  const Broadcasts bc = broadcasts(b);
  NodeOverride over;
  over = [&](const Expr& e) -> std::optional<std::string> {
    if (&e == t.node) return name + "[mt][nt][e]";
    // exp as the forward's online softmax computes it (render_lemma.cpp): one ex2 of the scaled argument
    if (e.kind == Expr::Kind::apply && e.op == Op::exp) return "exp2f((" + b.c.value(*e.args[0], over) + ") * 1.4426950408889634f)";
    if (e.kind != Expr::Kind::ref) return std::nullopt;
    if (contains(tiles, e.name)) return "t_" + e.name + "[mt][nt][e]";
    if (contains(bc.rows, e.name)) return "row_" + e.name + "[mt][e / 2]";
    if (contains(bc.cols, e.name)) return "col_" + e.name + "[nt][e % 2]";
    return std::nullopt;
  };
  auto rounded = [&](std::string v) { return t.s->dtype ? "napkin::round_to<" + ctype(*t.s->dtype) + ">(" + v + ")" : v; };
  const std::string value = rounded(b.c.value(*t.s->expr, over));
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

/** Output `o` += tile^T-contraction: the tile's fragments repacked to 16 bits as A, the streamed
 *  operand's chunk as B (ldmatrix.trans: its rows are the contracted axis). */
void accumulate(const BwdKernel& b, const BwdOutput& o) {
  Code& k = b.k;
  const std::string mf = "napkin::" + mma_function(b.mma), t = "t_" + o.tile, acc = "acc_" + o.out->name, C = o.operand;
  k.line("// " + o.out->name + " += contract(" + o.tile + ", " + C + "; " + b.f.Q + "): the tile's accumulator layout is the A fragment layout");
  k.line("#pragma unroll");
  k.open("for (int kk = 0; kk < T_Q / 16; ++kk)");
  k.line("uint32_t pa[MT][4];");
  k.line("#pragma unroll");
  k.open("for (int mt = 0; mt < MT; ++mt)");
  k.line("pa[mt][0] = napkin::pack2<T>(" + t + "[mt][2 * kk][0], " + t + "[mt][2 * kk][1]);");
  k.line("pa[mt][1] = napkin::pack2<T>(" + t + "[mt][2 * kk][2], " + t + "[mt][2 * kk][3]);");
  k.line("pa[mt][2] = napkin::pack2<T>(" + t + "[mt][2 * kk + 1][0], " + t + "[mt][2 * kk + 1][1]);");
  k.line("pa[mt][3] = napkin::pack2<T>(" + t + "[mt][2 * kk + 1][2], " + t + "[mt][2 * kk + 1][3]);");
  k.close();
  k.line("#pragma unroll");
  k.open("for (int nt = 0; nt < W_" + C + " / 16; ++nt)");
  k.line("uint32_t cb[4];");
  k.line("napkin::frag_b_t(cb, s_" + C + ", P_" + C + ", nt * 16, kk * 16, lane);");
  k.line("#pragma unroll");
  k.line("for (int mt = 0; mt < MT; ++mt) " + mf + "(" + acc + "[mt][2 * nt], pa[mt], cb), " + mf + "(" + acc + "[mt][2 * nt + 1], pa[mt], cb + 2);");
  k.close();
  k.close();
}

/** A stored tile: staged (into SMEM, transposed where X is the array's innermost axis, then
 *  16-byte rows of that axis per thread) or, where it cannot be, element by element. */
void store_tile(const BwdKernel& b, const BwdTile& t) {
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
  k.line("T* " + st + " = smem + OFF_ST_" + name + ";");
  k.line("#pragma unroll");
  k.open("for (int mt = 0; mt < MT; ++mt)");
  k.line("#pragma unroll");
  k.open("for (int nt = 0; nt < T_Q / 8; ++nt)");
  k.line("#pragma unroll");
  k.line("for (int e = 0; e < 4; ++e) " + st + "[" + (t.x_inner ? col + " * " + P + " + " + row : row + " * " + P + " + " + col) + "] = napkin::from_f<T>(t_" + name +
         "[mt][nt][e]);");
  k.close();
  k.close();
  k.line("__syncthreads();");
  const std::string inner = t.x_inner ? "T_X" : "T_Q", outer = t.x_inner ? "T_Q" : "T_X";
  k.open("for (int v = threadIdx.x; v < " + outer + " * (" + inner + " / 8); v += THREADS)");
  k.line("const int r = v / (" + inner + " / 8), c8 = v % (" + inner + " / 8) * 8;");
  if (t.x_inner) {
    k.line("const int64_t i_" + Q + " = q0 + r, i_" + X + " = o_" + X + " + c8;");
    k.line("if (r >= n_q) continue;");
    k.line("const int valid = n_x - c8;");
  } else {
    k.line("const int64_t i_" + X + " = o_" + X + " + r, i_" + Q + " = q0 + c8;");
    k.line("if (r >= n_x) continue;");
    k.line("const int valid = n_q - c8;");
  }
  k.line("T* dst = a." + name + " + " + b.c.index(name) + ";");
  k.line("if (vec_" + name + " && valid >= 8) *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(" + st + " + r * " + P + " + c8);");
  k.line("else for (int j = 0; j < 8 && j < valid; ++j) dst[j] = " + st + "[r * " + P + " + c8 + j];");
  k.close();
}

/** The stream loop: per chunk, its stage (and the next one's loads), then each tile statement
 *  with its accumulated outputs and its store. */
void stream(const BwdKernel& b) {
  Code& k = b.k;
  const FlashBwdForm& f = b.f;
  for (const auto& t : f.tiles)
    if (t.staged)  // rows of the innermost axis are contiguous: 16-byte stores where the array and that axis's extent allow
      k.line("const bool vec_" + t.s->name + " = reinterpret_cast<uintptr_t>(a." + t.s->name + ") % 16 == 0 && N_" + t.s->axes.back() + " % 8 == 0;");
  const Broadcasts bc = broadcasts(b);
  load_rows(b, bc);
  zero_skipped(b);
  k.open("for (int64_t kc = kc_begin; kc < kc_end; ++kc)");
  k.line("napkin::cp_async_wait<0>();  // chunk kc (and, at kc = 0, the resident tiles) has landed");
  k.line("__syncthreads();             // ... for every thread; chunk kc - 1 and its staging are consumed");
  k.line("if (kc + 1 < kc_end) load_chunk(kc + 1);  // into the other buffer, during this chunk");
  k.line("napkin::cp_async_commit();");
  for (const auto& o : f.operands)
    if (o.streamed) k.line("const T* s_" + o.array + " = smem + OFF_" + o.array + " + (kc % 2) * T_Q * P_" + o.array + ";");
  k.line("const int64_t q0 = kc * T_Q;");
  k.line("const int n_q = static_cast<int>(min(int64_t{T_Q}, N_" + f.Q + " - q0));");
  k.line("const bool interior = n_x == T_X && n_q == T_Q;  // every index the maps read in range");
  load_cols(b, bc);
  for (const auto& t : f.tiles) {
    tile_statement(b, t);
    for (const auto& o : f.outputs)
      if (o.tile == t.s->name) accumulate(b, o);
    if (t.stored) store_tile(b, t);
  }
  k.close();
  k.line("napkin::cp_async_wait<0>();");
}

/** Each output from its accumulator through its element-wise map, rows past N_X skipped. */
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

}  // namespace

KernelEmit emit_flash_bwd(Context& c, const KernelChoice& kc) {
  const KernelSpec& spec = *kc.cost.spec;
  const FlashBwdForm& f = *spec.flash_bwd;
  const std::string ns = kernel_ns(kc.plan.name);
  Code k;
  const BwdKernel b{c, kc, f, *spec.mma_sync, k};
  head(b);
  staging(b);
  accumulators(b);
  stream(b);
  epilogue(b);
  --k.indent;
  k.line("}");
  KernelEmit r;
  r.strategy = "flash_bwd";
  for (const auto& o : f.outputs) r.stored.insert(o.out->name);
  for (const auto& t : f.tiles)
    if (t.stored) r.stored.insert(t.s->name);
  Code l;
  std::string check;
  for (const auto& o : f.operands) check += std::string(check.empty() ? "" : " || ") + "a.N_" + o.cols + " != " + n(o.width);
  l.line("if (" + check + ") return napkin_fail(\"" + ns + ": this kernel was emitted for other widths of its operands' innermost axes\");");
  std::string blocks = "((a.N_" + f.X + " + " + n(f.TX) + " - 1) / " + n(f.TX) + ")";
  for (const auto& a : f.batch) blocks += " * a.N_" + a;
  l.line("const int64_t blocks = " + blocks + ";");
  l.line("if (blocks == 0) return 0;");
  add_path_variants(r, k, l, spec, ns, "", [](const std::string&) { return KernelEmit{}; });
  k.close("  // namespace " + ns);
  r.device_code = k.text;
  r.launch_code = l.text;
  return r;
}

}  // namespace napkin::cuda
