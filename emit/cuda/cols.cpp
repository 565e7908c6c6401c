// Strategy cols: one reduction down the columns, Y = red(arg; a) or an element-wise map of one
// (lower/cols_form.hpp): a sum, max or mean over an axis that is not innermost (or over several,
// walked as one flattened row index decomposed per row), every array read
// along it keeping Y's innermost axis innermost (a norm's weight gradient, dW[m] = sum(dY * X *
// rstd; t)). Contract: see strategies.hpp. A block takes COL_LANES x VEC consecutive columns (Y's
// elements, flattened), VEC per lane, so a warp's loads of a row are coalesced; its ROW_LANES
// threads per column group split the rows, each with U rows' loads in flight; the partials meet in
// SMEM, halving in a tree every thread adds to (a fixed order: deterministic), and the block's
// first row of threads stores.
// On the vector path (VEC > 1, the innermost extent a multiple of VEC and the arrays' pointers
// aligned: checked at run time) a lane loads its VEC columns of a row in one 8- or 16-byte
// access per array; otherwise it walks its columns one at a time.
#include "emit/cuda/render.hpp"

namespace napkin::cuda {

namespace {

/** One columns kernel being rendered. */
struct ColsKernel {
  Context& c;
  const ColsForm& f;
  const Statement& st;
  const Expr& red;  ///< the reduction (the whole expression unless f.post)
  std::string total, init;
  std::string rows_n;  ///< the rows: N_a, or the product of the reduced axes' sizes
  Code& k;

  /** The row indices of flat row `row` (a variable): i_a = row for one reduced axis, else row
   *  decomposed over the reduced axes. */
  void row_indices(const std::string& row) const {
    // [[maybe_unused]]: a loop over the vector path's registers may read no array by these indices
    if (f.axes.size() == 1) {
      k.line("[[maybe_unused]] const int64_t i_" + f.axes[0] + " = " + row + ";");
      return;
    }
    k.line("int64_t rest_" + row + " = " + row + " < " + rows_n + " ? " + row + " : 0;");
    decompose(k, "rest_" + row, f.axes, /*maybe_unused=*/true);
  }

  bool is_max() const { return red.op == Op::max; }
  std::string fold(const std::string& acc, const std::string& v) const { return is_max() ? acc + " = fmaxf(" + acc + ", " + v + ");" : acc + " += " + v + ";"; }
};

/** The unsigned type of `bytes` (4, 8 or 16) loaded in one access. */
std::string access_type(int bytes) { return bytes == 16 ? "uint4" : bytes == 8 ? "uint2" : "uint32_t"; }

/** Bytes of `vec` elements of `array` as stored. */
int vec_bytes(const ColsKernel& ck, const std::string& array) { return ck.f.vec * dtype_bits(ck.c.dtype(array)) / 8; }

/** The vector path: the lane's VEC columns (the i_ indices of its first, decomposed once at the
 *  kernel's top) walked together, one access per array per row, U rows of loads in flight. */
void vector_walk(ColsKernel& ck) {
  Code& k = ck.k;
  const ColsForm& f = ck.f;
  const std::string& inner = f.cols.back();
  k.open("for (int64_t r0 = rl; r0 < " + ck.rows_n + "; r0 += int64_t{ROW_LANES} * U)");
  for (const auto& arr : f.arrays) k.line(access_type(vec_bytes(ck, arr)) + " " + arr + "_reg[U] = {};  // registers: VEC elements of " + arr + " per row");
  k.line("#pragma unroll");
  k.open("for (int u = 0; u < U; ++u)");
  k.line("const int64_t row = r0 + int64_t{u} * ROW_LANES;");
  k.line("if (row >= " + ck.rows_n + ") break;");
  ck.row_indices("row");
  for (const auto& arr : f.arrays)
    k.line(arr + "_reg[u] = *reinterpret_cast<const " + access_type(vec_bytes(ck, arr)) + "*>(a." + arr + " + " + ck.c.index(arr) + ");");
  k.close();
  const NodeOverride over = [&](const Expr& n) -> std::optional<std::string> {
    if (n.kind == Expr::Kind::ref && std::find(f.arrays.begin(), f.arrays.end(), n.name) != f.arrays.end())
      return "napkin::to_f(reinterpret_cast<const " + ck.c.ctype_of(n.name) + "*>(&" + n.name + "_reg[u])[j])";
    return std::nullopt;
  };
  k.line("#pragma unroll");
  k.open("for (int u = 0; u < U; ++u)");
  k.line("const int64_t row = r0 + int64_t{u} * ROW_LANES;");
  k.line("if (row >= " + ck.rows_n + ") break;");
  ck.row_indices("row");
  k.line("#pragma unroll");
  k.open("for (int j = 0; j < VEC; ++j)");
  k.line("[[maybe_unused]] const int64_t i_" + inner + " = first_" + inner + " + j;");
  k.line(ck.fold("acc[j]", ck.c.value(*ck.red.args[0], over)));
  k.close();
  k.close();
  k.close();
}

/** The scalar path: each of the lane's VEC columns in turn, U rows' loads in flight. */
void scalar_walk(ColsKernel& ck) {
  Code& k = ck.k;
  k.open("for (int j = 0; j < VEC; ++j)");
  k.line("int64_t rest = col0 + j < " + ck.total + " ? col0 + j : 0;  // a column past the last walks column 0 and stores nothing");
  decompose(k, "rest", ck.f.cols);
  k.open("for (int64_t r0 = rl; r0 < " + ck.rows_n + "; r0 += int64_t{ROW_LANES} * U)");
  k.line("float v[U];");
  k.line("// all U rows inside: no condition between the loads, so all of them are in flight at once");
  k.open("if (r0 + int64_t{U - 1} * ROW_LANES < " + ck.rows_n + ")");
  k.line("#pragma unroll");
  k.open("for (int u = 0; u < U; ++u)");
  k.line("const int64_t row = r0 + int64_t{u} * ROW_LANES;");
  ck.row_indices("row");
  k.line("v[u] = " + ck.c.value(*ck.red.args[0]) + ";");
  k.close();
  k.close(" else {");
  ++k.indent;
  k.line("#pragma unroll");
  k.open("for (int u = 0; u < U; ++u)");
  k.line("const int64_t row = r0 + int64_t{u} * ROW_LANES;");
  ck.row_indices("row");
  k.line("v[u] = row < " + ck.rows_n + " ? " + ck.c.value(*ck.red.args[0]) + " : " + ck.init + ";");
  k.close();
  --k.indent;
  k.line("}");
  k.line("#pragma unroll");
  k.line("for (int u = 0; u < U; ++u) " + ck.fold("acc[j]", "v[u]"));
  k.close();
  k.close();
}

/** The partials' meeting: where several threads share a column (ROW_LANES > 1) their partials
 *  meet in SMEM and halve in a tree, every thread adding, a fixed order (deterministic) and
 *  ceil(log2 ROW_LANES) barriers; then the first row of threads stores its VEC columns, from the
 *  first column's indices where they lie in one row of the innermost axis (N_inner % VEC == 0:
 *  always where VEC is 1), else each column decomposed. */
void merge_and_store(ColsKernel& ck) {
  Code& k = ck.k;
  const std::string& inner = ck.f.cols.back();
  const bool shared = ck.f.row_lanes() > 1;
  if (shared) {
    k.line("for (int j = 0; j < VEC; ++j) part[rl][cl * VEC + j] = acc[j];");
    k.line("__syncthreads();");
    k.line("// a tree: the partials' rows still to add (live) halved each step, the upper half onto the lower");
    k.open("for (int live = ROW_LANES; live > 1;)");
    k.line("const int half = (live + 1) / 2;");
    k.line("for (int e = threadIdx.x; e < (live - half) * COL_LANES * VEC; e += THREADS) " +
           ck.fold("part[e / (COL_LANES * VEC)][e % (COL_LANES * VEC)]", "part[half + e / (COL_LANES * VEC)][e % (COL_LANES * VEC)]"));
    k.line("live = half;");
    k.line("__syncthreads();");
    k.close();
    k.line("if (rl != 0) return;");
  }
  k.line("if (col0 >= " + ck.total + ") return;");
  std::string value = ck.red.op == Op::mean ? "(sum / static_cast<float>(" + ck.rows_n + "))" : "sum";
  if (ck.f.post)
    value = ck.c.value(*ck.st.expr, [&](const Expr& n) -> std::optional<std::string> {
      if (&n == &ck.red) return value;
      return std::nullopt;
    });
  auto store = [&] {
    k.line("if (col0 + j >= " + ck.total + ") break;");
    k.line("const float sum = " + std::string(shared ? "part[0][cl * VEC + j]" : "acc[j]") + ";");
    k.line("a." + ck.st.name + "[" + ck.c.index(ck.st.name) + "] = napkin::from_f<" + ck.c.ctype_of(ck.st.name) + ">(" + value + ");");
  };
  if (ck.f.vec > 1) k.open("if (one_row)");
  k.open("for (int j = 0; j < VEC; ++j)");
  k.line("[[maybe_unused]] const int64_t i_" + inner + " = first_" + inner + " + j;");
  store();
  k.close();
  if (ck.f.vec == 1) return;
  k.close(" else {");
  ++k.indent;
  k.open("for (int j = 0; j < VEC; ++j)");
  k.line("int64_t rest = col0 + j;");
  decompose(k, "rest", ck.f.cols, /*maybe_unused=*/true);
  store();
  k.close();
  --k.indent;
  k.line("}");
}

}  // namespace

KernelEmit emit_cols(Context& c, const KernelChoice& kc) {
  const Diagram& d = c.diagram();
  const KernelSpec& spec = *kc.cost.spec;
  NAPKIN_ASSERT(spec.cols.has_value()) << "cols kernel " << kc.plan.name << " has no columns form";
  const ColsForm& f = *spec.cols;
  const Statement& st = *d.find_statement(f.statement);
  const Expr& red = *rows_core(d, st);
  const std::string ns = kernel_ns(kc.plan.name), ax = join(f.axes);
  Code k;
  std::string total = "int64_t{1}";
  for (const auto& a : f.cols) total += " * N_" + a;
  std::string rows_n = f.axes.size() == 1 ? "N_" + f.axes[0] : "int64_t{1}";
  if (f.axes.size() > 1)
    for (const auto& a : f.axes) rows_n += " * N_" + a;
  ColsKernel ck{c, f, st, red, "(" + total + ")", red.op == Op::max ? "-INFINITY" : "0.0f", f.axes.size() == 1 ? rows_n : "(" + rows_n + ")", k};
  k.line(describe_plan(kc.plan));
  k.line("// strategy cols: " + std::string(op_name(red.op)) + " over " + ax + " down the columns (" + join(f.cols) + "); " + std::to_string(f.col_lanes) +
         " lanes of " + std::to_string(f.vec) + " columns per block, " + std::to_string(f.row_lanes()) + " threads per column splitting " + ax +
         ", partials added in SMEM in a fixed order");
  k.open("namespace " + ns);
  k.line("constexpr int WARPS = " + std::to_string(f.warps) + ", THREADS = WARPS * 32, COL_LANES = " + std::to_string(f.col_lanes) + ", VEC = " +
         std::to_string(f.vec) + ", ROW_LANES = THREADS / COL_LANES, U = " + std::to_string(f.unroll) + ";");
  open_bounded_kernel(k, c, f.registers, f.blocks_per_sm, "lower/cols_form.hpp");
  if (f.row_lanes() > 1) k.line("__shared__ float part[ROW_LANES][COL_LANES * VEC];  // SMEM: each thread's partials");
  k.line("const int cl = threadIdx.x % COL_LANES, rl = threadIdx.x / COL_LANES;");
  k.line("const int64_t col0 = (int64_t{blockIdx.x} * COL_LANES + cl) * VEC;  // the lane's first column");
  k.line("float acc[VEC];");
  k.line("for (int j = 0; j < VEC; ++j) acc[j] = " + ck.init + ";");
  // The lane's first column decomposed once, for the vector walk and the stores.
  const std::string& inner = f.cols.back();
  k.line("int64_t first = col0 < " + ck.total + " ? col0 : 0;  // a lane past the columns takes column 0 and stores nothing");
  decompose(k, "first", f.cols, /*maybe_unused=*/true);
  k.line("const int64_t first_" + inner + " = i_" + inner + ";");
  if (f.vec > 1) k.line("const bool one_row = N_" + inner + " % VEC == 0;  // the lane's VEC columns in one row of " + inner);
  // Reference mode (the GPU's fp32 check, not priced) stores every array in fp32: the scalar path only.
  if (f.vec > 1 && !c.options().reference) {
    std::string cond = "one_row && col0 < " + ck.total;
    for (const auto& arr : f.arrays) cond += " && reinterpret_cast<uintptr_t>(a." + arr + ") % " + std::to_string(vec_bytes(ck, arr)) + " == 0";
    k.open("if (" + cond + ")");
    vector_walk(ck);
    k.close(" else {");
    ++k.indent;
    scalar_walk(ck);
    --k.indent;
    k.line("}");
  } else {
    scalar_walk(ck);
  }
  merge_and_store(ck);
  --k.indent;
  k.line("}");
  k.close("  // namespace " + ns);
  KernelEmit r;
  r.strategy = "cols";
  r.stored.insert(st.name);
  r.device_code = k.text;
  Code l;
  rows_launch(l, f.cols, f.cols_per_block(), ns);  // one block per COL_LANES x VEC columns
  r.launch_code = l.text;
  return r;
}

}  // namespace napkin::cuda
