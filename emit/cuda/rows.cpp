// Strategy rows: one statement `Y = norm(args; a)` (softmax, layernorm, rmsnorm) whose arguments
// are element-wise, `a` whole in the block or streamed (`stream a by s twice`: statistics, then
// the map). Contract: see strategies.hpp. Rows (every other axis) are grouped ROWS per block;
// a team of TEAM_WARPS warps (WARPS / ROWS, at least 1) walks each row with coalesced accesses,
// keeping per-thread statistics (online max and sum for softmax; count, sum and sum of squares
// for the norms, shifted by the row's first element for layernorm) that warp shuffles (and SMEM across warps) combine; a second walk writes the output.
// Where the normalised axis is innermost and contiguous (16-bit arrays, N % 8 == 0, 16-byte
// aligned pointers: checked at run time), each thread moves 8 elements per coalesced 16-byte
// access and has U = 4 of them in flight, so the HBM latency is covered by few warps.
#include <set>

#include "emit/cuda/strategies.hpp"

namespace napkin::cuda {

KernelEmit emit_rows(Context& c, const KernelChoice& kc) {
  const Diagram& d = c.diagram();
  const KernelCost& cost = kc.cost;
  const Statement& st = *d.find_statement(cost.statements[0]);  // lowering's rows form: one normaliser of element-wise arguments
  const Expr& e = *st.expr;
  const std::string ax = e.axes[0];
  AxisList rows;
  std::int64_t R = 1;
  for (const auto& a : st.axes)
    if (a != ax) rows.push_back(a), R *= kc.plan.group(a).value_or(1);
  const int warps = kc.plan.warps();
  const int team = R >= warps ? 1 : (warps % R == 0 ? warps / static_cast<int>(R) : 1);
  const std::string ns = kernel_ns(kc.plan.name);
  Code k;
  k.line(describe_plan(kc.plan));
  k.line("// strategy rows: " + std::string(op_name(e.op)) + " along " + ax + "; " + std::to_string(R) + " rows per block, " + std::to_string(team) +
         " warp(s) per row; pass 1 statistics, pass 2 the map (the second read of the row is served by L1/L2)");
  k.open("namespace " + ns);
  k.line("constexpr int WARPS = " + std::to_string(warps) + ", THREADS = WARPS * 32, ROWS = " + std::to_string(R) + ", TEAM_WARPS = " + std::to_string(team) +
         ", TEAM = TEAM_WARPS * 32, U = 4;");
  k.line("");
  k.line("__global__ void __launch_bounds__(THREADS) kernel(const Args a) {");
  ++k.indent;
  c.declare_sizes(k);
  k.line("__shared__ float red[WARPS][3];");
  k.line("const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, t = (warp % TEAM_WARPS) * 32 + lane;");
  std::string total = "int64_t{1}";
  for (const auto& r : rows) total += " * N_" + r;
  k.line("const int64_t total_rows = " + total + ";");
  k.open("for (int rr = warp / TEAM_WARPS; rr < ROWS; rr += WARPS / TEAM_WARPS)");
  k.line("int64_t row = int64_t{blockIdx.x} * ROWS + rr;");
  k.line("const bool live = row < total_rows;");
  k.line("if (TEAM_WARPS == 1 && !live) break;");
  k.line("if (!live) row = 0;");
  decompose(k, "row", rows);
  // Arrays read (and the output written) 8 elements at a time on the vector path.
  std::set<std::string> vec_arrays;
  auto is16 = [&](const std::string& arr) { return c.ctype_of(arr) != "float"; };
  for (const auto& arg : e.args)
    walk(*arg, [&](const Expr& n) {
      if (n.kind == Expr::Kind::ref && d.array_axes(n.name) && !c.axes(n.name).empty() && c.axes(n.name).back() == ax && is16(n.name))
        vec_arrays.insert(n.name);
    });
  const bool vec_out = st.axes.back() == ax && is16(st.name);
  const bool has_vec = !vec_arrays.empty() || vec_out;
  if (has_vec) {
    std::string cond = "N_" + ax + " % 8 == 0";
    for (const auto& arr : vec_arrays) cond += " && reinterpret_cast<uintptr_t>(a." + arr + ") % 16 == 0";
    if (vec_out) cond += " && reinterpret_cast<uintptr_t>(a." + st.name + ") % 16 == 0";
    k.line("const bool vec = " + cond + ";  // the 16-byte path");
  }
  const NodeOverride over_vec = [&](const Expr& n) -> std::optional<std::string> {
    if (n.kind == Expr::Kind::ref && vec_arrays.count(n.name))
      return "napkin::to_f(reinterpret_cast<const " + c.ctype_of(n.name) + "*>(&r_" + n.name + "[u])[j])";
    return std::nullopt;
  };
  // One walk over the row: `body(over, y)` emits the work at element i_<ax> (its loads rendered
  // through `over`); with `store`, body leaves the output value in `y` and the walk stores it.
  auto walk_row = [&](const std::vector<const Expr*>& roots, const std::function<void(const NodeOverride&)>& body, const std::string& store) {
    std::set<std::string> used;  // the vector arrays this walk reads
    for (const auto* r : roots)
      walk(*r, [&](const Expr& n) {
        if (n.kind == Expr::Kind::ref && vec_arrays.count(n.name)) used.insert(n.name);
      });
    auto scalar = [&] {
      k.open("for (int64_t i_" + ax + " = t; i_" + ax + " < N_" + ax + "; i_" + ax + " += TEAM)");
      body({});
      if (!store.empty()) k.line("a." + st.name + "[" + c.index(st.name) + "] = napkin::from_f<" + c.ctype_of(st.name) + ">(" + store + ");");
      k.close();
    };
    if (!has_vec) return scalar();
    k.open("if (vec)");
    k.open("for (int64_t b0 = int64_t{t} * 8; b0 < N_" + ax + "; b0 += int64_t{TEAM} * 8 * U)");
    for (const auto& arr : used) k.line("uint4 r_" + arr + "[U] = {};");
    k.line("#pragma unroll");
    k.open("for (int u = 0; u < U; ++u)");
    k.line("const int64_t i_" + ax + " = b0 + int64_t{u} * TEAM * 8;");
    k.line("if (i_" + ax + " >= N_" + ax + ") break;");
    for (const auto& arr : used) k.line("r_" + arr + "[u] = *reinterpret_cast<const uint4*>(a." + arr + " + " + c.index(arr) + ");");
    k.close();
    k.line("#pragma unroll");
    k.open("for (int u = 0; u < U; ++u)");
    k.line("if (b0 + int64_t{u} * TEAM * 8 >= N_" + ax + ") break;");
    if (!store.empty()) k.line("float ys[8];");
    k.line("#pragma unroll");
    k.open("for (int j = 0; j < 8; ++j)");
    k.line("const int64_t i_" + ax + " = b0 + int64_t{u} * TEAM * 8 + j;");
    k.line("(void)i_" + ax + ";");
    body(over_vec);
    if (!store.empty()) {
      if (vec_out) k.line("ys[j] = " + store + ";");
      else k.line("a." + st.name + "[" + c.index(st.name) + "] = napkin::from_f<" + c.ctype_of(st.name) + ">(" + store + ");");
    }
    k.close();
    if (!store.empty() && vec_out) {
      const std::string T = c.ctype_of(st.name);
      k.line("const int64_t i_" + ax + " = b0 + int64_t{u} * TEAM * 8;");
      k.line("*reinterpret_cast<uint4*>(a." + st.name + " + " + c.index(st.name) + ") = make_uint4(napkin::pack2<" + T + ">(ys[0], ys[1]), napkin::pack2<" + T +
             ">(ys[2], ys[3]), napkin::pack2<" + T + ">(ys[4], ys[5]), napkin::pack2<" + T + ">(ys[6], ys[7]));");
    }
    k.close();
    k.close();
    k.close(" else {");
    ++k.indent;
    scalar();
    k.close();
  };
  if (e.op == Op::softmax) {
    k.line("float m = -INFINITY, l = 0.0f;  // online max and sum (paper §4, one pass)");
    walk_row({&*e.args[0]}, [&](const NodeOverride& over) {
      k.line("const float v = " + c.value(*e.args[0], over) + ";");
      k.line("if (v > m) { l = l * (m == -INFINITY ? 0.0f : __expf(m - v)); m = v; }");
      k.line("l += v == -INFINITY ? 0.0f : __expf(v - m);");
    }, "");
    k.open("for (int o = 16; o > 0; o /= 2)");
    k.line("const float m2 = __shfl_xor_sync(0xffffffffu, m, o), l2 = __shfl_xor_sync(0xffffffffu, l, o);");
    k.line("const float mm = fmaxf(m, m2);");
    k.line("l = (m == -INFINITY ? 0.0f : l * __expf(m - mm)) + (m2 == -INFINITY ? 0.0f : l2 * __expf(m2 - mm));");
    k.line("m = mm;");
    k.close();
    k.open("if (TEAM_WARPS > 1)");
    k.line("if (lane == 0) red[warp][0] = m, red[warp][1] = l;");
    k.line("__syncthreads();");
    k.line("const int first = warp / TEAM_WARPS * TEAM_WARPS;");
    k.line("m = -INFINITY;");
    k.line("for (int w = 0; w < TEAM_WARPS; ++w) m = fmaxf(m, red[first + w][0]);");
    k.line("l = 0.0f;");
    k.line("for (int w = 0; w < TEAM_WARPS; ++w) l += red[first + w][0] == -INFINITY ? 0.0f : red[first + w][1] * __expf(red[first + w][0] - m);");
    k.line("__syncthreads();");
    k.close();
    k.line("const float inv_l = l > 0.0f ? 1.0f / l : 0.0f;");
    k.line("if (!live) continue;");
    walk_row({&*e.args[0]}, [&](const NodeOverride& over) { k.line("const float v = " + c.value(*e.args[0], over) + ";"); },
             "(m == -INFINITY ? 0.0f : __expf(v - m) * inv_l)");
  } else {
    bool layer = e.op == Op::layernorm;
    // Sums, merged by plain addition: count n, s1 and s2 = the sums of (v - shift) and its square.
    // layernorm shifts by the row's first element (shifted-data variance, no division per element
    // and no cancellation when the mean is large); rmsnorm needs the sum of squares alone.
    k.line("float n = 0.0f, s1 = 0.0f, s2 = 0.0f;  // count, sum and sum of squares of v - shift");
    if (layer) {
      k.open("const float shift = [&]");
      k.line("const int64_t i_" + ax + " = 0;");
      k.line("return " + c.value(*e.args[0]) + ";");
      k.close("();");
    }
    walk_row({&*e.args[0]}, [&](const NodeOverride& over) {
      k.line("const float v = " + c.value(*e.args[0], over) + ";");
      k.line(layer ? "const float dv = v - shift;" : "const float dv = v;");
      k.line("n += 1.0f; s1 += dv; s2 += dv * dv;");
    }, "");
    k.open("for (int o = 16; o > 0; o /= 2)");
    k.line("n += __shfl_xor_sync(0xffffffffu, n, o), s1 += __shfl_xor_sync(0xffffffffu, s1, o), s2 += __shfl_xor_sync(0xffffffffu, s2, o);");
    k.close();
    k.open("if (TEAM_WARPS > 1)");
    k.line("if (lane == 0) red[warp][0] = n, red[warp][1] = s1, red[warp][2] = s2;");
    k.line("__syncthreads();");
    k.line("const int first = warp / TEAM_WARPS * TEAM_WARPS;");
    k.line("n = 0.0f, s1 = 0.0f, s2 = 0.0f;");
    k.line("for (int w = 0; w < TEAM_WARPS; ++w) n += red[first + w][0], s1 += red[first + w][1], s2 += red[first + w][2];");
    k.line("__syncthreads();");
    k.close();
    if (layer) {
      k.line("const float mean = shift + s1 / n;");
      k.line("const float m2 = fmaxf(s2 - s1 * s1 / n, 0.0f);  // sum of squared deviations from the mean");
    } else {
      k.line("const float m2 = s2;  // rmsnorm: the sum of squares");
    }
    k.line("const float inv = rsqrtf(m2 / n + " + flit(eps_of(e)) + ");");
    k.line("if (!live) continue;");
    std::string y = layer ? "(v - mean) * inv" : "v * inv";
    if (e.args.size() > 1) y += " * w";
    if (e.args.size() > 2) y += " + bias";
    std::vector<const Expr*> roots;
    for (const auto& arg : e.args) roots.push_back(&*arg);
    walk_row(roots, [&](const NodeOverride& over) {
      k.line("const float v = " + c.value(*e.args[0], over) + ";");
      if (e.args.size() > 1) k.line("const float w = " + c.value(*e.args[1], over) + ";");
      if (e.args.size() > 2) k.line("const float bias = " + c.value(*e.args[2], over) + ";");
    }, y);
  }
  k.close();
  --k.indent;
  k.line("}");
  k.close("  // namespace " + ns);
  KernelEmit r;
  r.strategy = "rows";
  r.stored.insert(st.name);
  r.device_code = k.text;
  Code l;
  std::string rows_total = "int64_t{1}";
  for (const auto& rw : rows) rows_total += " * a.N_" + rw;
  l.line("const int64_t blocks = (" + rows_total + " + " + std::to_string(R) + " - 1) / " + std::to_string(R) + ";");
  l.line("if (blocks == 0) return 0;");
  l.line(ns + "::kernel<<<static_cast<unsigned>(blocks), " + ns + "::THREADS, 0, stream>>>(a);");
  r.launch_code = l.text;
  return r;
}

}  // namespace napkin::cuda
