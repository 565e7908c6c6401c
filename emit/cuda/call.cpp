// Strategy call (contract: strategies.hpp): a statement that calls another diagram. The callee,
// lifted over the call's woven axes (diagrams/lift.hpp) and derived as such (Derivation::callees),
// becomes a namespace `call_<statement>` nested in the caller's; its arrays are the caller's, whole:
// one run of its kernels covers every woven index (batch axes of their grids), no loop on the host.
// When the statement is more than the bare call (`Y = X2 + mlp(H2, ...)`), the call writes a buffer
// `<statement>__call` and a SIMT kernel computes the statement over it.
#include "emit/cuda/strategies.hpp"
#include "lower/call_arguments.hpp"
#include "emit/cuda/unit.hpp"

namespace napkin::cuda {

namespace {

/** A SIMT kernel writing the argument `arg` into its copy's buffer (lower/call_arguments.hpp): one
 *  thread per element of the copy's layout, rounded to `ctype`; its launch into `l`. */
void render_argument_copy(Context& c, const CallArgumentCopy& cp, const Expr& arg, const std::string& ctype, Code& k, Code& l) {
  const std::string ns = kernel_ns(cp.buffer);
  k.line("// " + cp.buffer + ": argument " + std::to_string(cp.index + 1) + " copied before the call (" + cp.reason + ")");
  k.open("namespace " + ns);
  k.line("constexpr int THREADS = 256;");
  render_elementwise_kernel(c, ns, "copy", cp.axes, "a." + cp.buffer + "[idx] = napkin::from_f<" + ctype + ">(" + c.value(arg) + ");", k, l);
  k.close("  // namespace " + ns);
}

}  // namespace

KernelEmit emit_call(Context& c, const Statement& s, const Derivation& sub, const Hardware& hw) {
  const Expr* call = nullptr;
  walk(*s.expr, [&](const Expr& e) {
    if (e.kind == Expr::Kind::apply && e.op == Op::call) call = &e;
  });
  NAPKIN_ASSERT(call) << "statement " << s.name << " has no call";
  NAPKIN_ASSERT(sub.lifted) << "the derivation of the call in " << s.name << " has no lifted callee";
  std::vector<AxisList> arg_axes;
  for (const auto& a : call->args) arg_axes.push_back(c.axes_of(*a));
  const CallShape shape = *c.typer().call_shape(*call, arg_axes);
  const Diagram& callee = sub.lifted->diagram;  // lifted over the woven axes: what `sub` derived
  const auto caller_axis = caller_axes(*sub.lifted, shape);
  const std::string ns = "call_" + s.name;
  auto callee_ctype = [&](const std::string& array) { return ctype(emit_dtype(callee, array, c.options())); };
  auto to_caller = [&](const AxisList& callee_axes) {
    AxisList r;
    for (const auto& f : callee_axes) r.push_back(caller_axis.at(f));
    return r;
  };

  KernelEmit r;
  r.strategy = "call";
  Unit u = emit_unit(c.program(), callee, sub, hw, c.options(), ns, /*top=*/false);
  r.hopper = u.hopper;
  Code k;
  k.line("// strategy call: " + s.name + " calls diagram " + shape.callee->name +
         (shape.woven.empty() ? std::string(" (nothing woven)")
                              : ", lifted over [" + join(shape.woven) + "] as " + callee.name + " (one run covers every woven index)") +
         "; its schedule:");
  for (const auto& line : u.schedule) k.line("//   " + line.substr(3));
  const std::size_t id = next_nested_id();  // the callee's unit is spliced in by the top unit
  k.text += nested_marker(id);
  r.nested = std::move(u.nested);
  r.nested.emplace_back(id, std::move(u.code));
  // Sizes: woven and bound axes take the caller's sizes; the others are products of those.
  k.line("/** Sizes (elements) of " + callee.name + "'s axes for the call in " + s.name + ". */");
  k.open("static " + ns + "::Args " + ns + "_sizes(const Args& a)");
  k.line(ns + "::Args c{};");
  for (const auto* ax : callee.axes()) {
    std::string v;
    if (caller_axis.count(ax->name)) {
      v = "a.N_" + caller_axis.at(ax->name);
    } else {
      v = "int64_t{1}";
      for (const auto& f : ax->size) v += " * " + (f.axis.empty() ? "int64_t{" + std::to_string(f.literal) + "}" : "c.N_" + f.axis);
    }
    k.line("c.N_" + ax->name + " = " + v + ";");
  }
  k.line("return c;");
  k.close();
  // Arrays: the caller's, whole (the lift gave each formal its argument's layout).
  k.line("/** " + callee.name + "'s arrays for the call in " + s.name + ": the caller's. */");
  k.open("static " + ns + "::Args " + ns + "_args(const Args& a)");
  k.line(ns + "::Args c = " + ns + "_sizes(a);");
  const auto formals = callee.inputs();
  const auto copies = call_argument_copies(c.diagram(), s, *call, arg_axes, *sub.lifted, shape, ModelOptions{});
  std::size_t next_copy = 0;
  for (std::size_t j = 0; j < formals.size(); ++j) {
    if (next_copy < copies.size() && copies[next_copy].index == j) {
      const CallArgumentCopy& cp = copies[next_copy++];
      k.line("c." + formals[j]->name + " = a." + cp.buffer + ";  // copied: " + cp.reason);
      r.buffers.push_back({cp.buffer, callee_ctype(formals[j]->name), host_bytes(callee_ctype(formals[j]->name), cp.axes),
                           "argument " + std::to_string(j + 1) + " of the call in " + s.name + " [" + join(cp.axes) + "]"});
      continue;
    }
    const Expr& arg = *call->args[j];
    NAPKIN_ASSERT(arg.kind == Expr::Kind::ref && c.axes(arg.name) == to_caller(formals[j]->axes) &&
                  c.ctype_of(arg.name) == callee_ctype(formals[j]->name))
        << "argument " << j + 1 << " of the call in " << s.name << " is read in place but is not laid out or typed as the callee's";
    k.line("c." + formals[j]->name + " = a." + arg.name + ";");
  }
  const std::string out_name = callee.outputs().front()->name;
  const AxisList result = to_caller(*callee.array_axes(out_name));  // the woven axes, then the bound output axes
  const bool direct = call == &*s.expr && s.axes == result && c.ctype_of(s.name) == callee_ctype(out_name);
  const std::string target = direct ? s.name : s.name + "__call";
  if (!direct) {
    r.buffers.push_back({target, callee_ctype(out_name), host_bytes(callee_ctype(out_name), result), "result of the call in " + s.name + " [" + join(result) + "]"});
  }
  k.line("c." + out_name + " = a." + target + ";");
  k.line(ns + "::bind_workspace(c, a." + s.name + "__ws);");
  k.line("return c;");
  k.close();
  r.buffers.push_back({s.name + "__ws", "char", ns + "::workspace_bytes(" + ns + "_sizes(a))", "workspace of " + callee.name + " called in " + s.name});
  r.stored.insert(s.name);

  Code l;
  for (const auto& cp : copies) render_argument_copy(c, cp, *call->args[cp.index], callee_ctype(formals[cp.index]->name), k, l);
  l.line("if (const int e = " + ns + "::run_all(" + ns + "_args(a), stream)) return e;");
  if (!direct) {
    // The rest of the statement, one thread per element, the call node read from its buffer.
    const Expr* node = call;
    KernelEmit rest = emit_simt(c, s.name, {s.name}, [&, node](const Expr& e) -> std::optional<std::string> {
      if (&e != node) return std::nullopt;
      return "napkin::to_f(a." + target + "[" + horner(result, [](const std::string& ax) { return "i_" + ax; }) + "])";
    });
    k.text += rest.device_code;
    l.text += rest.launch_code;
  }
  l.line("napkin_variant = \"call\";");
  r.device_code = std::move(k.text);
  r.launch_code = std::move(l.text);
  return r;
}

}  // namespace napkin::cuda
