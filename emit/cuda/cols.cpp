// Strategy cols: one reduction down the columns, Y = red(arg; a) or an element-wise map of one
// (lower/cols_form.hpp): a sum, max or mean over an axis that is not innermost, every array read
// along it keeping Y's innermost axis innermost (a norm's weight gradient, dW[m] = sum(dY * X *
// rstd; t)). Contract: see strategies.hpp. A block takes COL_LANES consecutive columns (Y's
// elements, flattened), one lane each, so a warp's loads of a row are coalesced; its ROW_LANES
// threads per column split the rows, each with U rows' loads in flight; the partials meet in SMEM
// and the block's first row of threads adds them in a fixed order (deterministic) and stores.
#include "emit/cuda/render.hpp"

namespace napkin::cuda {

KernelEmit emit_cols(Context& c, const KernelChoice& kc) {
  const Diagram& d = c.diagram();
  const KernelSpec& spec = *kc.cost.spec;
  NAPKIN_ASSERT(spec.cols.has_value()) << "cols kernel " << kc.plan.name << " has no columns form";
  const ColsForm& f = *spec.cols;
  const Statement& st = *d.find_statement(f.statement);
  const Expr& red = *rows_core(d, st);  // the reduction (the whole expression unless f.post)
  const bool is_max = red.op == Op::max;
  const std::string ns = kernel_ns(kc.plan.name), ax = f.axis;
  Code k;
  k.line(describe_plan(kc.plan));
  k.line("// strategy cols: " + std::string(op_name(red.op)) + " over " + ax + " down the columns (" + join(f.cols) + "); " + std::to_string(f.col_lanes) +
         " columns per block, " + std::to_string(f.row_lanes()) + " threads per column splitting " + ax + ", partials added in SMEM in a fixed order");
  k.open("namespace " + ns);
  k.line("constexpr int WARPS = " + std::to_string(f.warps) + ", THREADS = WARPS * 32, COL_LANES = " + std::to_string(f.col_lanes) +
         ", ROW_LANES = THREADS / COL_LANES, U = " + std::to_string(f.unroll) + ";");
  k.line("// at most " + std::to_string(f.registers) + " registers per thread: " + std::to_string(f.blocks_per_sm) +
         " blocks per SM resident, as the model prices it (lower/cols_form.hpp)");
  k.line("");
  k.line("__global__ void __launch_bounds__(THREADS, " + std::to_string(f.blocks_per_sm) + ") kernel(const Args a) {");
  ++k.indent;
  c.declare_sizes(k);
  k.line("__shared__ float part[ROW_LANES][COL_LANES];  // SMEM: each thread's partial");
  k.line("const int cl = threadIdx.x % COL_LANES, rl = threadIdx.x / COL_LANES;");
  std::string total = "int64_t{1}";
  for (const auto& a : f.cols) total += " * N_" + a;
  k.line("const int64_t col = int64_t{blockIdx.x} * COL_LANES + cl;");
  k.line("const bool live = col < " + total + ";");
  k.line("int64_t rest = live ? col : 0;  // a lane past the columns walks column 0 and stores nothing");
  decompose(k, "rest", f.cols);
  const std::string init = is_max ? "-INFINITY" : "0.0f";
  auto fold = [&](const std::string& acc, const std::string& v) { return is_max ? acc + " = fmaxf(" + acc + ", " + v + ");" : acc + " += " + v + ";"; };
  k.line("float acc = " + init + ";");
  k.open("for (int64_t r0 = rl; r0 < N_" + ax + "; r0 += int64_t{ROW_LANES} * U)");
  k.line("float v[U];");
  k.line("// all U rows inside: no condition between the loads, so all of them are in flight at once");
  k.open("if (r0 + int64_t{U - 1} * ROW_LANES < N_" + ax + ")");
  k.line("#pragma unroll");
  k.open("for (int u = 0; u < U; ++u)");
  k.line("const int64_t i_" + ax + " = r0 + int64_t{u} * ROW_LANES;");
  k.line("v[u] = " + c.value(*red.args[0]) + ";");
  k.close();
  k.close(" else {");
  ++k.indent;
  k.line("#pragma unroll");
  k.open("for (int u = 0; u < U; ++u)");
  k.line("const int64_t i_" + ax + " = r0 + int64_t{u} * ROW_LANES;");
  k.line("v[u] = i_" + ax + " < N_" + ax + " ? " + c.value(*red.args[0]) + " : " + init + ";");
  k.close();
  --k.indent;
  k.line("}");
  k.line("#pragma unroll");
  k.line("for (int u = 0; u < U; ++u) " + fold("acc", "v[u]"));
  k.close();
  k.line("part[rl][cl] = acc;");
  k.line("__syncthreads();");
  k.line("if (rl != 0 || !live) return;");
  k.line("for (int r = 1; r < ROW_LANES; ++r) " + fold("acc", "part[r][cl]"));
  std::string value = red.op == Op::mean ? "(acc / static_cast<float>(N_" + ax + "))" : "acc";
  if (f.post)
    value = c.value(*st.expr, [&](const Expr& n) -> std::optional<std::string> {
      if (&n == &red) return value;
      return std::nullopt;
    });
  k.line("a." + st.name + "[" + c.index(st.name) + "] = napkin::from_f<" + c.ctype_of(st.name) + ">(" + value + ");");
  --k.indent;
  k.line("}");
  k.close("  // namespace " + ns);
  KernelEmit r;
  r.strategy = "cols";
  r.stored.insert(st.name);
  r.device_code = k.text;
  Code l;
  rows_launch(l, f.cols, f.col_lanes, ns);  // one block per COL_LANES columns
  r.launch_code = l.text;
  return r;
}

}  // namespace napkin::cuda
