// Strategy simt: one kernel per statement, one thread per output element, or per run of V = 8
// along the innermost axis where its extent is a multiple of 8 (grid-stride loop over the
// statement's elements in layout order); reductions and normalisers
// inside the expression become loops. Contract: see strategies.hpp. Used in reference mode (fp32,
// the GPU reference of `napkin bench`) and for kernels no tensor-core strategy covers.
#include "emit/cuda/strategies.hpp"

namespace napkin::cuda {

namespace {
/** Elements one SIMT thread takes along the innermost axis where its extent is a multiple: the
 *  64-bit index divisions once per run (GQA backward's dS: 1187 us per element, 660.6 us per run
 *  of 8 on an H200, session 18). */
constexpr int kSimtRun = 8;
}  // namespace

void render_elementwise_kernel(Context& c, const std::string& ns, const std::string& fn, const AxisList& axes,
                               const std::string& store, Code& k, Code& l) {
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
    k.line("#pragma unroll");
    k.open("for (int j = 0; j < V; ++j)");
    k.line("const int64_t i_" + inner + " = i0_" + inner + " + j, idx = run * V + j;");
    k.line("(void)i_" + inner + ";");
    k.line(store);
    k.close();
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
    render_elementwise_kernel(c, ns, s, st.axes, "a." + s + "[idx] = napkin::from_f<" + c.ctype_of(s) + ">(" + c.value(*st.expr, over) + ");", k, l);
    r.stored.insert(s);
  }
  k.close("  // namespace " + ns);
  r.device_code = k.text;
  r.launch_code = l.text;
  return r;
}

}  // namespace napkin::cuda
