// Strategy simt: one kernel per statement, one thread per output element (grid-stride loop over
// the statement's elements in layout order, so stores are coalesced); reductions and normalisers
// inside the expression become loops. Contract: see strategies.hpp. Used in reference mode (fp32,
// the GPU reference of `napkin bench`) and for kernels no tensor-core strategy covers.
#include "emit/cuda/strategies.hpp"

namespace napkin::cuda {

void render_elementwise_kernel(Context& c, const std::string& ns, const std::string& fn, const AxisList& axes,
                               const std::string& store, Code& k, Code& l) {
  k.line("__global__ void __launch_bounds__(THREADS) " + fn + "(const Args a) {");
  ++k.indent;
  c.declare_sizes(k);
  std::string total = "int64_t{1}", host_total = "int64_t{1}";
  for (const auto& ax : axes) total += " * N_" + ax, host_total += " * a.N_" + ax;
  k.open("for (int64_t idx = int64_t{blockIdx.x} * THREADS + threadIdx.x; idx < " + total + "; idx += int64_t{gridDim.x} * THREADS)");
  k.line("int64_t rest = idx;");
  decompose(k, "rest", axes);
  k.line(store);
  k.close();
  --k.indent;
  k.line("}");
  l.open("");
  l.line("const int64_t n = " + host_total + ";");
  l.line("const int64_t blocks = std::min<int64_t>((n + 255) / 256, int64_t{1} << 20);");
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
