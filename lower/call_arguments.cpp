// The arguments a call copies before its callee reads them (contract: call_arguments.hpp).
#include "lower/call_arguments.hpp"

#include "diagrams/printer.hpp"

namespace napkin {

std::vector<CallArgumentCopy> call_argument_copies(const Diagram& caller, const Statement& s, const Expr& call,
                                                   const std::vector<AxisList>& arg_axes, const LiftedCallee& lifted,
                                                   const CallShape& shape, const ModelOptions& opt) {
  const auto to_caller = caller_axes(lifted, shape);
  const auto formals = lifted.diagram.inputs();
  std::vector<CallArgumentCopy> out;
  for (std::size_t j = 0; j < formals.size() && j < call.args.size(); ++j) {
    const Expr& arg = *call.args[j];
    CallArgumentCopy c;
    c.index = j;
    c.buffer = s.name + "__arg" + std::to_string(j + 1);
    for (const auto& a : formals[j]->axes) c.axes.push_back(to_caller.at(a));
    c.dtype = storage_dtype(lifted.diagram, formals[j]->name, opt);
    if (arg.kind != Expr::Kind::ref || !caller.array_axes(arg.name)) {
      c.reason = "an expression";
    } else if (arg_axes[j] != c.axes) {
      c.reason = arg.name + print_axes(arg_axes[j]) + " laid out as " + print_axes(c.axes);
    } else if (DType have = storage_dtype(caller, arg.name, opt); have != c.dtype) {
      c.reason = arg.name + " stored as " + std::string(dtype_name(have)) + ", the callee reads " + std::string(dtype_name(c.dtype));
    } else {
      continue;
    }
    out.push_back(std::move(c));
  }
  return out;
}

Diagram with_argument_copies(const Diagram& caller, const Statement& s, const Expr& call, const std::vector<CallArgumentCopy>& copies) {
  Diagram out = caller;
  out.items.clear();
  for (const auto& item : caller.items) {
    if (const auto* st = std::get_if<Statement>(&item); st && st->name == s.name)
      for (const auto& c : copies) {
        Statement copy;
        copy.name = c.buffer;
        copy.axes = c.axes;
        copy.axis_locs.assign(c.axes.size(), call.loc);
        copy.dtype = c.dtype;
        copy.expr = call.args[c.index];
        copy.loc = call.loc;
        out.items.emplace_back(std::move(copy));
      }
    out.items.push_back(item);
  }
  return out;
}

}  // namespace napkin
