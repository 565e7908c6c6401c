// Lifting a callee over a call's woven axes (diagrams/lift.hpp): the woven axes reach the inputs
// whose arguments have them and every array computed from those, the lifted diagram verifies,
// prints as text that parses back to it, and the lifts that cannot be well formed are user errors.
#include <catch2/catch.hpp>

#include "diagrams/call_statements.hpp"
#include "diagrams/eval.hpp"
#include "diagrams/graph_view.hpp"
#include "diagrams/lift.hpp"
#include "diagrams/parser.hpp"
#include "diagrams/printer.hpp"
#include "diagrams/verify.hpp"
#include "tests/support/run.hpp"

using namespace napkin;
using namespace napkin::test;

namespace {

/** The lift of the call in statement `stmt` of `l`'s diagram. */
LiftedCallee lift_in(const LoadedDiagram& l, const std::string& stmt) {
  const Statement* s = l.diagram->find_statement(stmt);
  REQUIRE(s);
  const Expr* call = nullptr;
  walk(*s->expr, [&](const Expr& n) {
    if (!call && n.kind == Expr::Kind::apply && n.op == Op::call) call = &n;
  });
  REQUIRE(call);
  Typer typer(*l.diagram, l.program->diagrams, nullptr);
  std::vector<AxisList> args;
  for (const auto& a : call->args) args.push_back(*typer.axes_of(*a));
  CallShape shape = *typer.call_shape(*call, args);
  return lift_call(*l.program, *call, shape, args, l.sizes, stmt);
}

AxisList axes_of(const Diagram& d, const std::string& array) { return *d.array_axes(array); }

/** The checks a parsed diagram passes (verify.hpp), errors rendered when they fail. */
bool verifies(const LoadedDiagram& l, const Diagram& d) {
  DiagnosticEngine diags;
  const bool ok = verify_diagram(*l.program, d, diags);
  INFO(diags.render());
  CHECK(ok);
  return ok;
}

/** parse(print(d)): the lifted diagram as `napkin print` writes it, read back. */
Diagram reparsed(const Diagram& d) {
  File f;
  f.diagrams.push_back(d);
  SourceManager sm;
  DiagnosticEngine diags;
  ParseResult r = parse_file(*sm.add("lifted.napkin", print_file(f)), diags);
  INFO(print_file(f) << diags.render());
  REQUIRE_FALSE(diags.has_errors());
  REQUIRE(r.file.diagrams.size() == 1);
  return r.file.diagrams.front();
}

/** `text` loaded without verification (the verifier reports the lift errors tested here itself:
 *  tests/errors/call_lift_*.napkin); sizes as declared. */
LoadedDiagram load_unverified(const std::string& text) {
  LoadedDiagram l;
  DiagnosticEngine diags;
  l.program = load_program_text("test.napkin", text, diags);
  REQUIRE_FALSE(diags.has_errors());
  l.diagram = &l.program->select("");
  l.sizes = *resolve_sizes(*l.diagram, {}, diags);
  return l;
}

}  // namespace

TEST_CASE("lifting the transformer block's calls over b: weights stay broadcast, computed arrays take b", "[lift]") {
  const LoadedDiagram l = load_library("transformer_block.napkin");
  const LiftedCallee norm = lift_in(l, "H1");
  CHECK(norm.diagram.name == "rmsnorm_layer_over_b");
  CHECK(norm.woven == AxisList{"b"});
  CHECK(axes_of(norm.diagram, "X") == AxisList{"b", "t", "m"});
  CHECK(axes_of(norm.diagram, "W") == AxisList{"m"});  // norm1 lacks b
  CHECK(axes_of(norm.diagram, "Y") == AxisList{"b", "t", "m"});
  CHECK(norm.caller_axis == std::map<std::string, std::string>{{"b", "b"}, {"t", "s"}, {"m", "m"}});
  CHECK(reparsed(norm.diagram) == norm.diagram);
  CHECK(verifies(l, norm.diagram));

  const LiftedCallee mlp = lift_in(l, "Y");
  for (const char* w : {"W1", "W3", "W2"}) CHECK(axes_of(mlp.diagram, w) == *l.program->diagrams.at("mlp_swiglu")->array_axes(w));
  for (const char* a : {"G", "U", "H"}) CHECK(axes_of(mlp.diagram, a) == AxisList{"b", "t", "f"});
  CHECK(axes_of(mlp.diagram, "Y") == AxisList{"b", "t", "m"});
  CHECK(reparsed(mlp.diagram) == mlp.diagram);
  CHECK(verifies(l, mlp.diagram));
  REQUIRE(mlp.diagram.find_axis("b"));
  CHECK(mlp.diagram.find_axis("b")->size.front().literal == l.sizes.at("b"));

  // gqa_attention binds b itself: nothing is woven, the lift is the callee.
  const LiftedCallee att = lift_in(l, "A");
  CHECK(att.woven.empty());
  CHECK(att.diagram == *l.program->diagrams.at("gqa_attention"));
}

TEST_CASE("a woven axis named like a callee axis or array is renamed, and several woven axes keep the call order", "[lift]") {
  const LoadedDiagram l = load_text(
      "diagram f\naxis b = 3\naxis t = 5\nin X[b,t] : fp32\nin W[t] : fp32\nY[b,t] = X * W\nout Y : fp32\n\n"
      "diagram g\naxis n = 2\naxis b = 4\naxis u = 3\naxis v = 5\naxis W = 6\n"
      "in A[b,W,u,v] : fp32\nin B[W,v] : fp32\nC[b,W,u,v] = f(A, B; b=u, t=v)\nout C : fp32\n");
  const LiftedCallee lf = lift_in(l, "C");
  CHECK(lf.woven == AxisList{"b_1", "W_1"});
  CHECK(lf.diagram.name == "f_over_b_1_W_1");
  CHECK(axes_of(lf.diagram, "X") == AxisList{"b_1", "W_1", "b", "t"});
  CHECK(axes_of(lf.diagram, "W") == AxisList{"W_1", "t"});
  CHECK(axes_of(lf.diagram, "Y") == AxisList{"b_1", "W_1", "b", "t"});
  CHECK(lf.caller_axis.at("b_1") == "b");
  CHECK(lf.caller_axis.at("W_1") == "W");
  CHECK(lf.caller_axis.at("b") == "u");
  CHECK(reparsed(lf.diagram) == lf.diagram);
  CHECK(verifies(l, lf.diagram));
}

TEST_CASE("lifts that cannot be well formed are user errors naming the call", "[lift]") {
  // The output does not depend on the argument that carries the woven axis.
  const LoadedDiagram unused = load_unverified(
      "diagram f\naxis t = 5\nin X[t] : fp32\nin W[t] : fp32\nY[t] = W * 2\nout Y : fp32\n\n"
      "diagram g\naxis b = 2\naxis t = 5\nin A[b,t] : fp32\nin B[t] : fp32\nC[b,t] = f(A, B)\nout C : fp32\n");
  CHECK_THROWS_WITH(lift_in(unused, "C"), Catch::Contains("the call of f in 'C' is woven over [b]") && Catch::Contains("does not depend"));
  // A mask that takes b applied to an array that does not: ill-typed once lifted.
  const LoadedDiagram mask = load_unverified(
      "diagram f\naxis t = 5\nin M[t] : fp32\nin W[t] : fp32\nY[t] = mask(W, M) + M\nout Y : fp32\n\n"
      "diagram g\naxis b = 2\naxis t = 5\nin A[b,t] : fp32\nin B[t] : fp32\nC[b,t] = f(A, B)\nout C : fp32\n");
  CHECK_THROWS_WITH(lift_in(mask, "C"), Catch::Contains("cannot be woven over [b]"));
}

TEST_CASE("one call per statement: calls beside and inside others become statements, the values unchanged", "[lift][calls]") {
  const std::string text = R"(diagram f
axis t = 3
axis m = 4
in  X[t,m] : fp32
Y[t,m] = exp(X) * 2
out Y : fp32

diagram g
axis t = 3
axis m = 4
in  X[t,m] : fp32
Y[t,m] = X - sum(X; m)
out Y : fp32

diagram caller
axis t = 3
axis m = 4
in  A[t,m] : fp32
in  B[t,m] : fp32
Z[t,m] = f(A) + g(f(B) * 3)
W[t,m] = g(A)
out Z : fp32
out W : fp32
)";
  LoadedDiagram l = load_text(text);
  bool changed = false;
  Diagram split = one_call_per_statement(*l.program, *l.diagram, changed);
  CHECK(changed);
  INFO(print_file(File{{}, {split}, {}}));
  REQUIRE(split.find_statement("Z_call1"));
  REQUIRE(split.find_statement("Z_call2"));
  CHECK(print_expr(*split.find_statement("Z_call1")->expr) == "f(A)");
  CHECK(print_expr(*split.find_statement("Z_call2")->expr) == "f(B)");
  CHECK(print_expr(*split.find_statement("Z")->expr) == "Z_call1 + g(Z_call2 * 3)");
  CHECK(print_expr(*split.find_statement("W")->expr) == "g(A)");
  DiagnosticEngine diags;
  CHECK(verify_diagram(*l.program, split, diags));
  std::map<std::string, Tensor> in;
  for (const auto* i : l.diagram->inputs()) in[i->name] = random_input(*i, l.sizes, 3);
  auto a = evaluate(*l.program, *l.diagram, l.sizes, in), b = evaluate(*l.program, split, l.sizes, in);
  for (const char* o : {"Z", "W"}) CHECK(a.at(o).data == b.at(o).data);
  bool again = true;
  one_call_per_statement(*l.program, split, again);
  CHECK_FALSE(again);
}
