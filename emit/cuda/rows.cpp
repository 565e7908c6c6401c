// Strategy rows: one statement `Y = norm(args; a)` (softmax, layernorm, rmsnorm) or `Y = red(arg;
// a)` (sum, max, mean: one walk, no map) whose arguments are element-wise, `a` whole in the block or streamed (`stream a by s twice`: statistics, then
// the map). Contract: see strategies.hpp. Rows (every other axis) are grouped ROWS per block;
// a team of TEAM_WARPS warps (WARPS / ROWS, at least 1), or of TEAM_LANES lanes where a row needs
// fewer than a warp's accesses, walks each row with coalesced accesses,
// keeping per-thread statistics (online max and sum for softmax; count, sum and sum of squares
// for the norms, shifted by the row's first element for layernorm) that warp shuffles (and SMEM across warps) combine; a second walk writes the output.
// Where the normalised axis is innermost and contiguous (16-bit arrays, N % 8 == 0, 16-byte
// aligned pointers: checked at run time), each thread moves 8 elements per coalesced 16-byte
// access and has U = 4 of them in flight, so the HBM latency is covered by few warps.
#include <set>

#include "emit/cuda/render.hpp"

namespace napkin::cuda {

namespace {

/** One rows kernel being rendered: its statement, the normalised axis, the arrays read (and the
 *  output written) 8 elements at a time on the vector path, and the device code. */
struct RowsKernel {
  Context& c;
  const Statement& st;
  const Expr& e;
  std::string ax;
  std::set<std::string> vec_arrays;
  bool vec_out = false, has_vec = false;
  Code& k;
};

/** The vector path's arrays as lowering found them (lower/rows_form.hpp: 16-bit arrays read by the
 *  normaliser's arguments with `ax` innermost, and the output where its innermost axis is `ax`);
 *  emits `vec`, the run-time condition of the 16-byte path (N % 8 == 0, pointers 16-byte
 *  aligned), where there are any. */
void vector_path(RowsKernel& r, const RowsForm& form) {
  // Reference mode (the GPU's fp32 check, not priced) stores every array in fp32: no 16-byte path.
  if (r.c.options().reference) return;
  const RowsWalk& widest = form.reduction ? form.statistics : form.map;  // the map's arrays include the statistics'
  r.vec_arrays.insert(widest.vector_arrays.begin(), widest.vector_arrays.end());
  r.vec_out = form.vector_output;
  r.has_vec = !r.vec_arrays.empty() || r.vec_out;
  if (!r.has_vec) return;
  std::string cond = "N_" + r.ax + " % 8 == 0";
  for (const auto& arr : r.vec_arrays) cond += " && reinterpret_cast<uintptr_t>(a." + arr + ") % 16 == 0";
  if (r.vec_out) cond += " && reinterpret_cast<uintptr_t>(a." + r.st.name + ") % 16 == 0";
  r.k.line("const bool vec = " + cond + ";  // the 16-byte path");
}

/** One walk of the team over the row: `body(over)` emits the work at element i_<ax> (its loads
 *  rendered through `over`); with `store` (the output value, an expression over what body
 *  defined), the walk stores it. On the vector path each thread takes 8 elements per 16-byte
 *  access, U accesses in flight; else one element per step. */
void walk_row(RowsKernel& r, const std::vector<const Expr*>& roots, const std::function<void(const NodeOverride&)>& body, const std::string& store) {
  Code& k = r.k;
  const std::string& ax = r.ax;
  const std::string& out = r.st.name;
  std::set<std::string> used;  // the vector arrays this walk reads
  for (const auto* root : roots)
    walk(*root, [&](const Expr& n) {
      if (n.kind == Expr::Kind::ref && r.vec_arrays.count(n.name)) used.insert(n.name);
    });
  auto scalar = [&] {
    k.open("for (int64_t i_" + ax + " = t; i_" + ax + " < N_" + ax + "; i_" + ax + " += TEAM)");
    body({});
    if (!store.empty()) k.line("a." + out + "[" + r.c.index(out) + "] = napkin::from_f<" + r.c.ctype_of(out) + ">(" + store + ");");
    k.close();
  };
  if (!r.has_vec) return scalar();
  const NodeOverride over_vec = [&](const Expr& n) -> std::optional<std::string> {
    if (n.kind == Expr::Kind::ref && r.vec_arrays.count(n.name))
      return "napkin::to_f(reinterpret_cast<const " + r.c.ctype_of(n.name) + "*>(&" + n.name + "_reg[u])[j])";
    return std::nullopt;
  };
  k.open("if (vec)");
  k.open("for (int64_t b0 = int64_t{t} * 8; b0 < N_" + ax + "; b0 += int64_t{TEAM} * 8 * U)");
  for (const auto& arr : used) k.line("uint4 " + arr + "_reg[U] = {};  // registers: U 16-byte vectors of " + arr);
  k.line("#pragma unroll");
  k.open("for (int u = 0; u < U; ++u)");
  k.line("const int64_t i_" + ax + " = b0 + int64_t{u} * TEAM * 8;");
  k.line("if (i_" + ax + " >= N_" + ax + ") break;");
  for (const auto& arr : used) k.line(arr + "_reg[u] = *reinterpret_cast<const uint4*>(a." + arr + " + " + r.c.index(arr) + ");");
  k.close();
  k.line("#pragma unroll");
  k.open("for (int u = 0; u < U; ++u)");
  k.line("if (b0 + int64_t{u} * TEAM * 8 >= N_" + ax + ") break;");
  if (!store.empty()) k.line("float " + out + "_reg[8];");
  k.line("#pragma unroll");
  k.open("for (int j = 0; j < 8; ++j)");
  k.line("const int64_t i_" + ax + " = b0 + int64_t{u} * TEAM * 8 + j;");
  k.line("(void)i_" + ax + ";");
  body(over_vec);
  if (!store.empty()) {
    if (r.vec_out) k.line(out + "_reg[j] = " + store + ";");
    else k.line("a." + out + "[" + r.c.index(out) + "] = napkin::from_f<" + r.c.ctype_of(out) + ">(" + store + ");");
  }
  k.close();
  if (!store.empty() && r.vec_out) {
    const std::string T = r.c.ctype_of(out);
    k.line("const int64_t i_" + ax + " = b0 + int64_t{u} * TEAM * 8;");
    k.line("*reinterpret_cast<uint4*>(a." + out + " + " + r.c.index(out) + ") = make_uint4(napkin::pack2<" + T + ">(" + out + "_reg[0], " + out + "_reg[1]), napkin::pack2<" + T + ">(" + out + "_reg[2], " + out + "_reg[3]), napkin::pack2<" + T + ">(" + out +
           "_reg[4], " + out + "_reg[5]), napkin::pack2<" + T + ">(" + out + "_reg[6], " + out + "_reg[7]));");
  }
  k.close();
  k.close();
  k.close(" else {");
  ++k.indent;
  scalar();
  k.close();
}

/** The body of a row: the lemma's statistics over a first walk, merged and finalised, then a
 *  second walk applying the map and storing the output (rows past the last are dropped only
 *  after the merge, which every thread of the team joins). */
void row_body(RowsKernel& r) {
  const RowsLemma lemma(r.c, r.e);
  const Expr& v = *r.e.args[0];
  lemma.init(r.k);
  walk_row(r, {&v}, [&](const NodeOverride& over) {
    r.k.line("const float v = " + r.c.value(v, over) + ";");
    lemma.update(r.k);
  }, "");
  lemma.merge(r.k);
  if (lemma.reduction()) {
    // the stored value: the reduction's, or the statement's element-wise map of it (lower/rows_form.hpp `post`)
    const std::string value = &r.e == &*r.st.expr ? lemma.map() : r.c.value(*r.st.expr, [&](const Expr& n) -> std::optional<std::string> {
      if (&n == &r.e) return "(" + lemma.map() + ")";
      return std::nullopt;
    });
    r.k.line("if (live && t == 0) a." + r.st.name + "[" + r.c.index(r.st.name) + "] = napkin::from_f<" + r.c.ctype_of(r.st.name) + ">(" + value + ");");
    return;
  }
  lemma.finalise(r.k);
  r.k.line("if (!live) continue;");
  std::vector<const Expr*> roots;
  for (const auto& arg : r.e.args) roots.push_back(&*arg);
  walk_row(r, roots, [&](const NodeOverride& over) {
    r.k.line("const float v = " + r.c.value(v, over) + ";");
    if (r.e.args.size() > 1) r.k.line("const float w = " + r.c.value(*r.e.args[1], over) + ";");
    if (r.e.args.size() > 2) r.k.line("const float bias = " + r.c.value(*r.e.args[2], over) + ";");
  }, lemma.map());
}

}  // namespace

KernelEmit emit_rows(Context& c, const KernelChoice& kc) {
  const Diagram& d = c.diagram();
  const KernelSpec& spec = *kc.cost.spec;
  NAPKIN_ASSERT(spec.rows.has_value()) << "rows kernel " << kc.plan.name << " has no rows form";
  const RowsForm& form = *spec.rows;  // lowering's launch shape (lower/rows_form.hpp): rows per block, teams, unroll, occupancy
  const Statement& st = *d.find_statement(form.statement);
  const Expr& e = *rows_core(d, st);  // the normaliser or reduction, the statement's whole expression unless `form.post`
  const std::string& ax = form.axis;
  const AxisList& rows = form.rows;
  const std::int64_t R = form.rows_per_block;
  const int warps = form.warps;
  const int team = form.team_warps;
  const std::string ns = kernel_ns(kc.plan.name);
  Code k;
  k.line(describe_plan(kc.plan));
  const std::string per_row = form.team_lanes < 32 ? std::to_string(form.team_lanes) + " lanes" : std::to_string(team) + " warp(s)";
  k.line("// strategy rows: " + std::string(op_name(e.op)) + " along " + ax + "; " + std::to_string(R) + " rows per block, " + per_row + " per row; " +
         (form.reduction ? std::string("one pass, the team's first lane stores the value") + (form.post ? " through the statement's element-wise map" : "")
                         : std::string("pass 1 statistics, pass 2 the map (the second read of the row is served by L1/L2)")));
  k.open("namespace " + ns);
  k.line("constexpr int WARPS = " + std::to_string(warps) + ", THREADS = WARPS * 32, ROWS = " + std::to_string(R) + ", TEAM_WARPS = " + std::to_string(team) +
         ", TEAM_LANES = " + std::to_string(form.team_lanes) + ", TEAM = TEAM_WARPS * TEAM_LANES;");
  k.line("constexpr int TEAMS_PER_WARP = 32 / TEAM_LANES, TEAMS = WARPS / TEAM_WARPS * TEAMS_PER_WARP;  // teams of a block, rows walked at once");
  k.line("[[maybe_unused]] constexpr int U = " + std::to_string(form.unroll) + ";  // 16-byte accesses in flight per lane (the vector path)");
  k.line("// at most " + std::to_string(form.registers) + " registers per thread: " + std::to_string(form.blocks_per_sm) +
         " blocks per SM resident, as the model prices it (lower/rows_form.hpp)");
  k.line("");
  k.line("__global__ void __launch_bounds__(THREADS, " + std::to_string(form.blocks_per_sm) + ") kernel(const Args a) {");
  ++k.indent;
  c.declare_sizes(k);
  k.line("__shared__ float stats_smem[WARPS][3];  // SMEM: each warp's statistics, merged across a team");
  k.line("const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, t = (warp % TEAM_WARPS) * 32 + lane % TEAM_LANES;");
  std::string total = "int64_t{1}";
  for (const auto& r : rows) total += " * N_" + r;
  k.line("const int64_t total_rows = " + total + ";");
  k.line("// every lane of a warp runs the same iterations (the shuffles name the whole warp); a team past the rows walks row 0 and stores nothing");
  k.open("for (int rr0 = warp / TEAM_WARPS * TEAMS_PER_WARP; rr0 < ROWS; rr0 += TEAMS)");
  k.line("const int rr = rr0 + lane / TEAM_LANES;");
  k.line("int64_t row = int64_t{blockIdx.x} * ROWS + rr;");
  k.line("const bool live = rr < ROWS && row < total_rows;");
  k.line("if (TEAM_WARPS == 1 && !__any_sync(0xffffffffu, live)) break;");
  k.line("if (!live) row = 0;");
  decompose(k, "row", rows);
  RowsKernel rk{c, st, e, ax, {}, false, false, k};
  vector_path(rk, form);
  row_body(rk);
  k.close();
  --k.indent;
  k.line("}");
  k.close("  // namespace " + ns);
  KernelEmit r;
  r.strategy = "rows";
  r.stored.insert(st.name);
  r.device_code = k.text;
  Code l;
  rows_launch(l, rows, R, ns);
  r.launch_code = l.text;
  return r;
}

}  // namespace napkin::cuda
