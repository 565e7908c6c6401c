// Strategy flash_bwd (lower/flash_bwd_form.hpp): FlashAttention-2's backward loop, derived (Dao
// 2023, Algorithm 2). Contract: see strategies.hpp. One thread block per (tile of T_X rows of X,
// batch index); its WARPS warps own T_X / WARPS rows each. The resident operands' tiles (K, V)
// are staged once by cp.async; the streamed operands (Q, dO) arrive per chunk of T_Q into double
// buffers. Per chunk, in dataflow order, each tile statement is computed transposed (X rows, Q
// columns) in mma.sync accumulator fragments (S^T = K Q^T on m16n8k16, its element-wise map in
// place), each accumulated output takes its tile as the A operand straight from the registers
// (dV += P^T dO, the fragment repacked to 16 bits as in the forward's O += P V), and each stored
// tile is written transposed into an SMEM staging tile and copied out in 16-byte rows. The
// outputs' fp32 accumulators stay in registers across the stream and are stored once. The steps
// both paths share are in flash_bwd_parts.cpp; the sm_90a variant (wgmma on TMA, picked by the
// launcher at run time) in flash_bwd_wgmma.cpp.
#include "emit/cuda/flash_bwd_parts.hpp"
#include "emit/cuda/preamble.hpp"

namespace napkin::cuda {

namespace {

using bwd::BwdKernel;
using bwd::load_cols;
using bwd::load_rows;
using bwd::n;
using bwd::store_flags;
using bwd::store_tile;
using bwd::tile_map;
using bwd::zero_skipped;

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
  for (const auto& t : f.tiles) {
    if (t.staged) {
      const std::string rows = t.x_inner ? "T_Q" : "T_X", pitch = t.x_inner ? "T_X + 8" : "T_Q + 8";
      k.line("constexpr int OFF_ST_" + t.s->name + " = " + off + ", P_ST_" + t.s->name + " = " + pitch + ";  // staging [" + rows + "][" + pitch + "] of " +
             t.s->name);
      off = "OFF_ST_" + t.s->name + " + " + rows + " * P_ST_" + t.s->name;
    }
    if (t.atomic_staged) {
      k.line("constexpr int OFF_AT_" + t.s->name + " = " + off + ", P_AT_" + t.s->name + " = T_Q + 8;  // [T_X][T_Q + 8]: " + t.s->name +
             ", the A operand (transposed) of the outputs added up by atomic adds");
      off = "OFF_AT_" + t.s->name + " + T_X * P_AT_" + t.s->name;
    }
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

/** The operands' origins and row strides, the chunk loader (cp.async into double buffers) and
 *  the prologue (resident tiles and the first chunk in one cp.async group). */
void cp_async_staging(const BwdKernel& b) {
  Code& k = b.k;
  const FlashBwdForm& f = b.f;
  const std::string &X = f.X, &Q = f.Q;
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
  k.line("const int vec = " + vec + " && ((" + ptrs + ") % 16) == 0 ? 16 : 0;  // 16-byte cp.async, else element by element");
  k.line("// stream step it: its chunk of " + Q + " into buffer it % 2");
  k.open("auto load_chunk = [&](int64_t it)");
  bwd::step_indices(b, "it");
  k.line("const int rows = static_cast<int>(min(int64_t{T_Q}, N_" + Q + " - kc * T_Q));");
  for (const auto& o : f.operands)
    if (o.streamed) {
      std::string at = "kc * T_Q * rs_" + o.array;
      for (const auto& a : f.outer)
        if (contains(b.c.axes(o.array), a)) at += " + i_" + a + " * " + stride(b.c, o.array, a);
      k.line("napkin::load_tile<T_Q, W_" + o.array + ", P_" + o.array + ", THREADS>(smem + OFF_" + o.array + " + (it % 2) * T_Q * P_" + o.array + ", g_" +
             o.array + " + " + at + ", rs_" + o.array + ", rows, W_" + o.array + ", vec);");
    }
  k.close(";");
  k.line("// prologue: the resident tiles and the first chunk");
  for (const auto& o : f.operands)
    if (!o.streamed)
      k.line("napkin::load_tile<T_X, W_" + o.array + ", P_" + o.array + ", THREADS>(smem + OFF_" + o.array + ", g_" + o.array + ", rs_" + o.array +
             ", n_x, W_" + o.array + ", vec);");
  k.line("if (steps > 0) load_chunk(0);");
  k.line("napkin::cp_async_commit();");
}

/** Tile statement `t`: its contraction on mma.sync (the resident rows as A by ldmatrix, the
 *  streamed chunk as B), then its element-wise map in place (tile_map). */
void tile_statement(const BwdKernel& b, const BwdTile& t) {
  Code& k = b.k;
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
  tile_map(b, t);
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

/** Atomic output `o` (FlashBwdForm::atomics) of this chunk: its tile into the SMEM tile
 *  AT [T_X][T_Q + 8] as 16-bit pairs, a barrier, then items of 16 rows of Q x C columns of e
 *  (C = FlashBwdForm::atomic_cols) spread over the warps, each the contraction over the block's
 *  T_X rows of X on mma.sync (A: the tile transposed by ldmatrix.trans; B: the resident operand
 *  [T_X][e], ldmatrix.trans), its factor applied, added into global memory two columns at a time
 *  (napkin::red_add2). Rows of X past N_X hold zeros in the tile (tile_map) and in the resident
 *  operand (load_tile's zero fill); columns of Q past N_Q are not added. The next chunk's
 *  __syncthreads orders the reads of AT before it is written again. */
void atomic_adds(const BwdKernel& b, const BwdOutput& o) {
  Code& k = b.k;
  const FlashBwdForm& f = b.f;
  const std::string mf = "napkin::" + mma_function(b.mma), t = o.tile, at = "at_" + o.tile, P = "P_AT_" + o.tile, R = o.operand;
  const std::int64_t C = FlashBwdForm::atomic_cols(o.E);
  k.line("// " + o.out->name + " += contract(" + t + ", " + R + "; " + f.X + ") over this block's rows of " + f.X +
         ", added into global memory by atomic adds (lemma atomic-sum)");
  k.line("T* " + at + " = smem + OFF_AT_" + t + ";");
  k.line("#pragma unroll");
  k.open("for (int mt = 0; mt < MT; ++mt)");
  k.line("#pragma unroll");
  k.open("for (int nt = 0; nt < T_Q / 8; ++nt)");
  k.line("const int r = warp * (T_X / WARPS) + mt * 16 + lane / 4, cq = nt * 8 + (lane % 4) * 2;");
  k.line("*reinterpret_cast<uint32_t*>(" + at + " + r * " + P + " + cq) = napkin::pack2<T>(t_" + t + "[mt][nt][0], t_" + t + "[mt][nt][1]);");
  k.line("*reinterpret_cast<uint32_t*>(" + at + " + (r + 8) * " + P + " + cq) = napkin::pack2<T>(t_" + t + "[mt][nt][2], t_" + t + "[mt][nt][3]);");
  k.close();
  k.close();
  k.line("__syncthreads();  // the whole tile is staged");
  k.line("constexpr int C = " + n(C) + ", ITEMS = (T_Q / 16) * (" + n(o.E) + " / C);");
  k.open("for (int item = warp; item < ITEMS; item += WARPS)");
  k.line("const int m0 = item / (" + n(o.E) + " / C) * 16, n0 = item % (" + n(o.E) + " / C) * C;");
  k.line("float part[C / 8][4] = {};");
  k.line("#pragma unroll");
  k.open("for (int kk = 0; kk < T_X / 16; ++kk)");
  k.line("uint32_t fa[4];");
  k.line("napkin::frag_a_t(fa, " + at + ", " + P + ", m0, kk * 16, lane);");
  k.line("#pragma unroll");
  k.open("for (int nt = 0; nt < C / 16; ++nt)");
  k.line("uint32_t fb[4];");
  k.line("napkin::frag_b_t(fb, smem + OFF_" + R + ", P_" + R + ", n0 + nt * 16, kk * 16, lane);");
  k.line(mf + "(part[2 * nt], fa, fb), " + mf + "(part[2 * nt + 1], fa, fb + 2);");
  k.close();
  k.close();
  k.line("#pragma unroll");
  k.open("for (int j = 0; j < C / 8; ++j)");
  k.line("#pragma unroll");
  k.open("for (int h = 0; h < 2; ++h)");
  k.line("const int cq = m0 + lane / 4 + h * 8;");
  k.line("if (cq >= n_q) continue;");
  k.line("const int64_t i_" + f.Q + " = q0 + cq, i_" + o.e + " = n0 + j * 8 + (lane % 4) * 2;");
  auto value = [&](const std::string& e) {
    NodeOverride over = [&](const Expr& x) -> std::optional<std::string> {
      if (&x == o.node) return "part[j][2 * h + " + e + "]";
      return std::nullopt;
    };
    return b.c.value(*o.out->expr, over);
  };
  k.line("napkin::red_add2(a." + o.out->name + " + " + b.c.index(o.out->name) + ", " + value("0") + ", " + value("1") + ");");
  k.close();
  k.close();
  k.close();
}

/** The stream loop: per chunk, its stage (and the next one's loads), then each tile statement
 *  with its accumulated outputs, its store and the outputs it adds up by atomic adds. */
void stream(const BwdKernel& b) {
  Code& k = b.k;
  const FlashBwdForm& f = b.f;
  store_flags(b);
  load_rows(b);
  zero_skipped(b);
  k.open("for (int64_t it = 0; it < steps; ++it)");
  k.line("napkin::cp_async_wait<0>();  // step it's chunk (and, at it = 0, the resident tiles) has landed");
  k.line("__syncthreads();             // ... for every thread; step it - 1's chunk and its staging are consumed");
  k.line("if (it + 1 < steps) load_chunk(it + 1);  // into the other buffer, during this step");
  k.line("napkin::cp_async_commit();");
  bwd::step_indices(b, "it");
  for (const auto& o : f.operands)
    if (o.streamed) k.line("const T* s_" + o.array + " = smem + OFF_" + o.array + " + (it % 2) * T_Q * P_" + o.array + ";");
  bwd::chunk_bounds(b);
  load_cols(b);
  for (const auto& t : f.tiles) {
    tile_statement(b, t);
    for (const auto& o : f.outputs)
      if (o.tile == t.s->name) accumulate(b, o);
    if (t.stored) store_tile(b, t, {"warp * 32 + lane", "THREADS", "0", "T_X", "__syncthreads();", false});  // the next chunk begins with __syncthreads
    for (const auto& o : f.atomics)
      if (o.tile == t.s->name) atomic_adds(b, o);
  }
  k.close();
  k.line("napkin::cp_async_wait<0>();");
}

}  // namespace

KernelEmit emit_flash_bwd(Context& c, const KernelChoice& kc) {
  const KernelSpec& spec = *kc.cost.spec;
  const FlashBwdForm& f = *spec.flash_bwd;
  const std::string ns = kernel_ns(kc.plan.name);
  Code k;
  const BwdKernel b{c, kc, f, *spec.mma_sync, k};
  head(b);
  bwd::grid_and_chunks(b);
  cp_async_staging(b);
  bwd::accumulators(b);
  stream(b);
  bwd::epilogue(b);
  --k.indent;
  k.line("}");
  KernelEmit r;
  r.strategy = "flash_bwd";
  for (const auto& o : f.outputs) r.stored.insert(o.out->name);
  for (const auto& o : f.atomics) r.stored.insert(o.out->name);
  for (const auto& t : f.tiles)
    if (t.stored) r.stored.insert(t.s->name);
  Code l;
  std::string check;
  for (const auto& o : f.operands) check += std::string(check.empty() ? "" : " || ") + "a.N_" + o.cols + " != " + n(o.width);
  l.line("if (" + check + ") return napkin_fail(\"" + ns + ": this kernel was emitted for other widths of its operands' innermost axes\");");
  for (const auto& o : f.atomics)  // each block adds its partial sums into it (lemma atomic-sum)
    l.line("NAPKIN_CUDA(cudaMemsetAsync(a." + o.out->name + ", 0, " + host_bytes("float", c.axes(o.out->name)) + ", stream));");
  std::string blocks = "((a.N_" + f.X + " + " + n(f.TX) + " - 1) / " + n(f.TX) + ")";
  for (const auto& a : f.batch) blocks += " * a.N_" + a;
  l.line("const int64_t blocks = " + blocks + ";");
  l.line("if (blocks == 0) return 0;");
  add_path_variants(r, k, l, spec, ns, "", [&](const std::string& fallback) { return bwd::flash_bwd_wgmma_variant(c, kc, fallback); });
  k.close("  // namespace " + ns);
  r.device_code = k.text;
  r.launch_code = l.text;
  return r;
}

}  // namespace napkin::cuda
