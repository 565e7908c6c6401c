// Strategy simt: one kernel per statement, one thread per output element, or per run of V = 8
// along the innermost axis where its extent is a multiple of 8 (grid-stride loop over the
// statement's elements in layout order), an element-wise statement's run loading and storing its
// arrays as vectors of 8 (16 bytes of a 16-bit type; ElementwiseRun); reductions and normalisers
// inside the expression become loops. Contract: see strategies.hpp. Used in reference mode (fp32,
// the GPU reference of `napkin bench`) and for kernels no tensor-core strategy covers.
#include "emit/cuda/strategies.hpp"

#include <algorithm>
#include <set>


namespace napkin::cuda {

namespace {
/** Elements one SIMT thread takes along the innermost axis where its extent is a multiple: the
 *  64-bit index divisions once per run (GQA backward's dS: 1187 us per element, 660.6 us per run
 *  of 8 on an H200, session 18). */
constexpr int kSimtRun = 8;
}  // namespace

void render_elementwise_kernel(Context& c, const std::string& ns, const std::string& fn, const AxisList& axes,
                               const std::string& store, Code& k, Code& l, const ElementwiseRun& vec) {
  k.line("__global__ void __launch_bounds__(THREADS) " + fn + "(const Args a) {");
  ++k.indent;
  c.declare_sizes(k);
  std::string total = "int64_t{1}", host_total = "int64_t{1}";
  for (const auto& ax : axes) total += " * N_" + ax, host_total += " * a.N_" + ax;
  if (!axes.empty()) {
    // Runs of V elements along the innermost axis (its extent a multiple of V): the 64-bit index
    // divisions once per run, not per element (they cost more than the element's loads).
    const std::string& inner = axes.back();
    const AxisList outer(axes.begin(), axes.end() - 1);
    // V inside the kernel: a statement of the diagram may be named V (the kernels' own names share the namespace)
    k.line("constexpr int V = " + std::to_string(kSimtRun) + ";  // elements per thread along " + inner + " where its extent is a multiple");
    k.open("if (N_" + inner + " % V == 0)");
    k.open("for (int64_t run = int64_t{blockIdx.x} * THREADS + threadIdx.x; run < " + total + " / V; run += int64_t{gridDim.x} * THREADS)");
    k.line("int64_t rest = run;");
    k.line("const int64_t i0_" + inner + " = rest % (N_" + inner + " / V) * V;");
    k.line("rest /= N_" + inner + " / V;");
    decompose(k, "rest", outer);
    if (!vec.out.empty()) {  // the run's arrays as vectors of 8 (16-byte loads and stores where aligned)
      for (const auto& a : vec.loads) k.line("alignas(16) " + c.ctype_of(a) + " run_" + a + "[V];");
      k.line("alignas(16) " + c.ctype_of(vec.out) + " run_" + vec.out + "[V];");
      k.open("");
      k.line("const int64_t i_" + inner + " = i0_" + inner + ";  // the run's first element");
      for (const auto& a : vec.loads) k.line("napkin::copy_run8(run_" + a + ", a." + a + " + " + c.index(a) + ");");
      k.close();
    }
    k.line("#pragma unroll");
    k.open("for (int j = 0; j < V; ++j)");
    k.line("const int64_t i_" + inner + " = i0_" + inner + " + j, idx = run * V + j;");
    k.line("(void)i_" + inner + ", (void)idx;");
    k.line(vec.out.empty() ? store : "run_" + vec.out + "[j] = napkin::from_f<" + c.ctype_of(vec.out) + ">(" + vec.value + ");");
    k.close();
    if (!vec.out.empty()) k.line("napkin::copy_run8(a." + vec.out + " + run * V, run_" + vec.out + ");");
    k.close();
    k.line("return;");
    k.close();
  }
  k.open("for (int64_t idx = int64_t{blockIdx.x} * THREADS + threadIdx.x; idx < " + total + "; idx += int64_t{gridDim.x} * THREADS)");
  k.line("int64_t rest = idx;");
  decompose(k, "rest", axes);
  k.line(store);
  k.close();
  --k.indent;
  k.line("}");
  l.open("");
  l.line("const int64_t n = " + host_total + ";");
  const std::string run = std::to_string(kSimtRun);
  const std::string per_thread = axes.empty() ? "1" : "(a.N_" + axes.back() + " % " + run + " == 0 ? " + run + " : 1)";  // the kernel's runs
  l.line("const int64_t blocks = std::min<int64_t>((n / " + per_thread + " + 255) / 256, int64_t{1} << 20);");
  l.line("if (blocks > 0) " + ns + "::" + fn + "<<<static_cast<unsigned>(blocks), " + ns + "::THREADS, 0, stream>>>(a);");
  l.close();
}

namespace {

/** The run path of statement `st` as vectors (ElementwiseRun), where its expression is element-wise
 *  (no reduction, normaliser, gather or call: loops over other indices inside the run) and it has
 *  axes: the arrays it reads with its innermost axis innermost and no axis it lacks load as
 *  vectors; the others (broadcast along it, or laid out otherwise) are read element by element. */
ElementwiseRun vector_run(Context& c, const Statement& st, const NodeOverride& over) {
  ElementwiseRun r;
  if (st.axes.empty()) return r;
  bool loops = false;
  std::set<std::string> arrays;
  walk(*st.expr, [&](const Expr& e) {
    if (e.kind == Expr::Kind::apply && !is_elementwise(e.op) && !is_positional(e.op)) loops = true;
    if (e.kind == Expr::Kind::apply && (e.op == Op::pick || e.op == Op::call)) loops = true;
    if (e.kind == Expr::Kind::ref && c.diagram().array_axes(e.name)) arrays.insert(e.name);
  });
  if (loops) return r;
  for (const auto& a : arrays) {
    const AxisList& ax = *c.diagram().array_axes(a);
    if (!ax.empty() && ax.back() == st.axes.back() && std::all_of(ax.begin(), ax.end(), [&](const std::string& x) { return contains(st.axes, x); })) r.loads.push_back(a);
  }
  const std::vector<std::string> loads = r.loads;
  r.out = st.name;
  r.value = c.value(*st.expr, [&, loads](const Expr& e) -> std::optional<std::string> {
    if (e.kind == Expr::Kind::ref && contains(loads, e.name)) return "napkin::to_f(run_" + e.name + "[j])";
    return over ? over(e) : std::nullopt;
  });
  return r;
}

}  // namespace

KernelEmit emit_simt(Context& c, const std::string& name, const std::vector<std::string>& statements, const NodeOverride& over) {
  KernelEmit r;
  r.strategy = "simt";
  Code k, l;
  const std::string ns = kernel_ns(name);
  k.line("// strategy simt: one thread per element of each statement (" + join(statements) + "), intermediates in global memory");
  k.open("namespace " + ns);
  k.line("constexpr int THREADS = 256;");
  for (const auto& s : statements) {
    const Statement& st = *c.diagram().find_statement(s);
    k.line("");
    render_elementwise_kernel(c, ns, s, st.axes, "a." + s + "[idx] = napkin::from_f<" + c.ctype_of(s) + ">(" + c.value(*st.expr, over) + ");", k, l,
                              vector_run(c, st, over));
    r.stored.insert(s);
  }
  k.close("  // namespace " + ns);
  r.device_code = k.text;
  r.launch_code = l.text;
  return r;
}

}  // namespace napkin::cuda
