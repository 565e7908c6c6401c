// One diagram's namespace of emitted CUDA (contract: unit.hpp). Each schedule kernel goes to the
// first strategy that covers it (strategies.hpp): call, gemm, flash, rows, then simt.
#include "emit/cuda/unit.hpp"

#include <algorithm>
#include <atomic>
#include <iterator>
#include <unordered_map>
#include <set>

#include "emit/cuda/strategies.hpp"

namespace napkin::cuda {

namespace {

const char* kHostSupport = R"(static const char* napkin_error = "";
static const char* napkin_variant = "";  // the variant the last launch ran (strategy, or mma.sync / wgmma)
static int napkin_fail(const char* message) {
  napkin_error = message;
  return 1;
}
#define NAPKIN_CUDA(call)                                  \
  do {                                                     \
    const cudaError_t napkin_e = (call);                   \
    if (napkin_e != cudaSuccess) return napkin_fail(cudaGetErrorString(napkin_e)); \
  } while (0)
)";

/** The axes that a pick (an expanded gather) of `d`'s statements selects along. */
std::set<std::string> pick_axes(const Diagram& d) {
  std::set<std::string> out;
  for (const auto* s : d.statements())
    walk(*s->expr, [&](const Expr& n) {
      if (n.kind == Expr::Kind::apply && n.op == Op::pick) out.insert(n.axes.begin(), n.axes.end());
    });
  return out;
}

const Derivation& callee_derivation(const Derivation& dv, const std::string& stmt) {
  for (const auto& [s, sub] : dv.callees)
    if (s == stmt) return *sub;
  throw InternalError("emit --target cuda: no derivation for the call in '" + stmt + "'");
}

/** `text` with every nested_marker(id) replaced by nested[id], itself expanded: each byte is
 *  copied once (an explicit stack, as deep as the calls). */
std::string splice_nested(const std::string& text, const std::vector<std::pair<std::size_t, std::string>>& units) {
  std::size_t total = text.size();
  std::unordered_map<std::size_t, const std::string*> nested;
  for (const auto& [id, t] : units) total += t.size(), nested.emplace(id, &t);
  std::string out;
  out.reserve(total);
  std::vector<std::pair<const std::string*, std::size_t>> stack{{&text, 0}};
  while (!stack.empty()) {
    const std::string& s = *stack.back().first;
    std::size_t pos = stack.back().second, mark = s.find('\x01', pos);
    if (mark == std::string::npos) {
      out.append(s, pos, std::string::npos);
      stack.pop_back();
      continue;
    }
    out.append(s, pos, mark - pos);
    std::size_t end = s.find('\x02', mark);
    NAPKIN_ASSERT(end != std::string::npos) << "unterminated nested unit marker";
    std::size_t id = std::stoul(s.substr(mark + 1, end - mark - 1));
    stack.back().second = end + 1;
    stack.push_back({nested.at(id), 0});
  }
  return out;
}

KernelEmit emit_kernel(Context& c, const KernelChoice& kc, const Hardware& hw) {
  const auto& opt = c.options();
  for (const auto& w : c.weave())
    if (w.has_call && std::find(kc.cost.statements.begin(), kc.cost.statements.end(), w.statement->name) != kc.cost.statements.end())
      return emit_call(c, *w.statement, callee_derivation(c.derivation(), w.statement->name), hw);
  const KernelSpec& spec = *kc.cost.spec;  // lowering's decision (lower/lower.hpp); reference mode renders every kernel but rows as SIMT in fp32
  if (!opt.reference && spec.strategy == Strategy::gemm) return emit_gemm(c, kc);
  if (!opt.reference && spec.strategy == Strategy::flash) return emit_flash(c, kc);
  if (!opt.reference && spec.strategy == Strategy::flash_bwd) return emit_flash_bwd(c, kc);
  if (spec.strategy == Strategy::rows) return emit_rows(c, kc);
  if (!opt.reference && spec.strategy == Strategy::cols) return emit_cols(c, kc);
  if (!opt.reference && spec.strategy == Strategy::transpose) return emit_transpose(c, kc);  // the reference: the SIMT copy  // the reference checks it with an independent SIMT loop
  std::vector<std::string> order;
  for (const auto* s : c.diagram().statements())
    if (std::find(kc.cost.statements.begin(), kc.cost.statements.end(), s->name) != kc.cost.statements.end()) order.push_back(s->name);
  KernelEmit k = emit_simt(c, kc.plan.name, order);
  k.device_code = describe_plan(kc.plan) + "\n" + (opt.reference ? "" : "// no tensor-core strategy: " + spec.declined + "\n") + k.device_code;
  return k;
}

/** The Args field of output `name`: the name itself, or `napkin_copy_of_<name>` for an output
 *  that is an input (Args holds the input under its name; run_all copies it into this one). */
std::string output_field(const Diagram& d, const std::string& name) { return d.find_input(name) ? "napkin_copy_of_" + name : name; }

}  // namespace

std::string nested_marker(std::size_t id) { return "\x01" + std::to_string(id) + "\x02"; }

std::size_t next_nested_id() {
  static std::atomic<std::size_t> next{0};
  return next++;
}

Unit emit_unit(const Program& p, const Diagram& d, const Derivation& dv, const Hardware& hw, const EmitOptions& opt,
               const std::string& ns, bool top) {
  Context c(p, d, dv, opt);
  Unit u;
  std::vector<KernelEmit> kernels;
  for (const auto& kc : dv.chosen.kernels) {
    kernels.push_back(emit_kernel(c, kc, hw));
    auto& nested = kernels.back().nested;  // moved in O(1) when it is the only one (a chain of calls)
    if (u.nested.size() < nested.size()) u.nested.swap(nested);
    std::move(nested.begin(), nested.end(), std::back_inserter(u.nested));
    nested.clear();
    u.hopper |= kernels.back().hopper;
    u.kernel_names.push_back(kc.plan.name);
    u.strategies.push_back(kernels.back().strategy);
    u.schedule.push_back(describe_plan(kc.plan));
  }
  // Arrays in global memory: inputs, outputs, intermediates some kernel stores, extra buffers.
  std::set<std::string> outs;
  for (const auto* o : d.outputs()) outs.insert(o->name);
  std::vector<WorkspaceBuffer> workspace;
  for (const auto* s : d.statements()) {
    bool stored = false;
    for (const auto& k : kernels) stored |= k.stored.count(s->name) > 0;
    if (!stored || outs.count(s->name)) continue;
    workspace.push_back({s->name, c.ctype_of(s->name), host_bytes(c.ctype_of(s->name), c.axes(s->name)), "intermediate in HBM [" + join(c.axes(s->name)) + "]"});
  }
  for (const auto& k : kernels) workspace.insert(workspace.end(), k.buffers.begin(), k.buffers.end());

  Code out;
  out.open("namespace " + ns);
  if (top) out.text += kHostSupport;
  out.line("");
  out.line("/** Device pointers of every array kept in global memory, and the sizes of every axis (elements). */");
  out.open("struct Args");
  for (const auto* in : d.inputs()) out.line("const " + c.ctype_of(in->name) + "* " + in->name + ";  // input [" + join(in->axes) + "]");
  for (const auto* o : d.outputs()) out.line(c.ctype_of(o->name) + "* " + output_field(d, o->name) + ";  // output [" + join(c.axes(o->name)) + "]" +
                                             (d.find_input(o->name) ? ", a copy of the input" : ""));
  for (const auto& w : workspace) out.line(w.type + "* " + w.name + ";  // " + w.comment);
  for (const auto* a : d.axes()) out.line("int64_t N_" + a->name + ";");
  out.close(";");
  out.line("");
  for (const auto& k : kernels) {
    out.text += k.device_code;
    out.text += "\n";
  }

  out.line("/** Bytes of HBM workspace the intermediates need (each 256-byte aligned). */");
  out.open("static size_t workspace_bytes(const Args& a)");
  out.line("size_t at = 0;");
  out.line("(void)a;");
  for (const auto& w : workspace) out.line("at += (" + w.bytes + " + 255) / 256 * 256;");
  out.line("return at;");
  out.close();
  out.line("/** Points the intermediates of `a` into `workspace` (workspace_bytes(a) bytes; null: left null). */");
  out.open("static void bind_workspace(Args& a, void* workspace)");
  out.line("if (!workspace) return;");
  if (!workspace.empty()) out.line("size_t at = 0;");
  for (const auto& w : workspace) {
    out.line("a." + w.name + " = reinterpret_cast<" + w.type + "*>(static_cast<char*>(workspace) + at);");
    out.line("at += (" + w.bytes + " + 255) / 256 * 256;");
  }
  out.close();
  if (top) {
    out.line("/** Fills Args from the C entry points' arrays; intermediates are carved from `workspace`. */");
    out.open("static Args make_args(const void* const* in, void* const* out, const int64_t* sizes, void* workspace)");
    out.line("Args a{};");
    int i = 0;
    for (const auto* ax : d.axes()) out.line("a.N_" + ax->name + " = sizes[" + std::to_string(i++) + "];");
    i = 0;
    for (const auto* in : d.inputs()) out.line("if (in) a." + in->name + " = static_cast<const " + c.ctype_of(in->name) + "*>(in[" + std::to_string(i++) + "]);");
    i = 0;
    for (const auto* o : d.outputs())
      out.line("if (out) a." + output_field(d, o->name) + " = static_cast<" + c.ctype_of(o->name) + "*>(out[" + std::to_string(i++) + "]);");
    out.line("bind_workspace(a, workspace);");
    out.line("return a;");
    out.close();
  }
  out.line("/** Launches schedule kernel `k` on `stream` (0, or the first launch error). */");
  out.open("static int run_kernel(int k, const Args& a, cudaStream_t stream)");
  out.line("(void)stream;");
  out.open("switch (k)");
  for (std::size_t k = 0; k < kernels.size(); ++k) {
    out.line("// " + dv.chosen.kernels[k].plan.name + " (" + kernels[k].strategy + ")");
    out.open("case " + std::to_string(k) + ":");
    out.line("napkin_variant = \"" + kernels[k].strategy + "\";");
    std::size_t pos = 0;
    const std::string& lc = kernels[k].launch_code;
    while (pos < lc.size()) {
      std::size_t nl = lc.find('\n', pos);
      out.line(lc.substr(pos, nl - pos));
      pos = nl + 1;
    }
    out.line("NAPKIN_CUDA(cudaGetLastError());");
    out.line("return 0;");
    out.close();
  }
  out.line("default: return napkin_fail(\"no such kernel\");");
  out.close();
  out.close();
  out.line("/** Launches every schedule kernel in order. */");
  out.open("static int run_all(const Args& a, cudaStream_t stream)");
  for (const auto& v : pick_axes(d))  // Context::value compares a pick's target and index in fp32
    out.line("if (a.N_" + v + " > (int64_t{1} << 24)) return napkin_fail(\"" + ns + ": a gather along " + v +
             " compares indices in fp32, exact up to 2^24 entries\");");
  for (const auto* o : d.outputs())  // an input that is also an output: copied (it has the input's storage dtype, lower/options.hpp)
    if (d.find_input(o->name))
      out.line("if (a." + output_field(d, o->name) + " != a." + o->name + ") NAPKIN_CUDA(cudaMemcpyAsync(a." + output_field(d, o->name) + ", a." + o->name +
               ", " + host_bytes(c.ctype_of(o->name), c.axes(o->name)) + ", cudaMemcpyDeviceToDevice, stream));");
  out.line("for (int k = 0; k < " + std::to_string(kernels.size()) + "; ++k)");
  out.line("  if (const int e = run_kernel(k, a, stream)) return e;");
  out.line("return 0;");
  out.close();
  out.close("  // namespace " + ns);
  if (top) {
    u.code = splice_nested(out.text, u.nested);
    u.nested.clear();
  } else {
    u.code = std::move(out.text);
  }
  return u;
}

}  // namespace napkin::cuda
