// Lexer and parser: tokens, trivia, labels, precedence, recovery, limits.
#include <catch2/catch.hpp>

#include "diagrams/lexer.hpp"
#include "diagrams/parser.hpp"
#include "diagrams/printer.hpp"

using namespace napkin;

namespace {
ParseResult parse(const std::string& text, DiagnosticEngine& diags) {
  static SourceManager sm;  // keeps the files alive for the diagnostics' locations
  return parse_file(*sm.add("test.napkin", text), diags);
}
}  // namespace

TEST_CASE("lexer gives kinds, spellings and 1-based locations", "[lexer]") {
  SourceManager sm;
  DiagnosticEngine diags;
  auto toks = lex(*sm.add("t", "axis q = 1e-5 # c\n  S[b]@smem"), diags);
  REQUIRE_FALSE(diags.has_errors());
  REQUIRE(toks.size() == 14);  // ... smem, then the newline closing the last line, then eof
  CHECK(toks[0].kind == Tok::ident);
  CHECK(toks[3].kind == Tok::real);
  CHECK(toks[3].text == "1e-5");
  CHECK(toks[3].real_value == Approx(1e-5));
  CHECK(toks[4].kind == Tok::comment);
  CHECK(toks[4].text == " c");
  CHECK(toks[6].loc.line == 2);
  CHECK(toks[6].loc.col == 3);
  CHECK(toks[11].text == "smem");
  CHECK(toks[12].kind == Tok::newline);
  CHECK(toks[13].kind == Tok::eof);
}

TEST_CASE("newlines inside brackets continue only on indented lines", "[lexer]") {
  SourceManager sm;
  DiagnosticEngine diags;
  auto cont = lex(*sm.add("t", "f(a,\n  b)\n"), diags);
  CHECK(std::count_if(cont.begin(), cont.end(), [](const Token& t) { return t.kind == Tok::newline; }) == 1);
  auto broken = lex(*sm.add("t", "f(a,\nb)\n"), diags);
  CHECK(std::count_if(broken.begin(), broken.end(), [](const Token& t) { return t.kind == Tok::newline; }) == 2);
}

TEST_CASE("parser builds the attention diagram with labels and trivia", "[parser]") {
  DiagnosticEngine diags;
  auto r = parse(
      "# head\n"
      "diagram attention\n"
      "axis q = 8192 group 128  # queries\n"
      "axis x = 8192 stream 64\n"
      "axis d = 128\n"
      "in  Q[q,d] : bf16 @hbm\n"
      "in  K[x,d] : bf16\n"
      "S[q,x] : fp32 @reg = contract(Q@smem, K@smem; d) * rsqrt(d)\n"
      "out S : bf16\n",
      diags);
  REQUIRE_FALSE(diags.has_errors());
  REQUIRE(r.file.diagrams.size() == 1);
  const Diagram& d = r.file.diagrams[0];
  CHECK(d.trivia.leading.size() == 1);
  CHECK(*d.trivia.leading[0] == " head");
  const AxisDecl* q = d.find_axis("q");
  REQUIRE(q);
  CHECK(q->group == 128);
  CHECK_FALSE(q->stream);
  CHECK(q->trivia.trailing == "queries");
  CHECK(d.find_axis("x")->stream == 64);
  CHECK(d.find_input("Q")->level == MemLevel::hbm);
  const Statement* s = d.find_statement("S");
  REQUIRE(s);
  CHECK(s->dtype == DType::fp32);
  CHECK(s->level == MemLevel::reg);
  REQUIRE(s->expr->op == Op::mul);
  const Expr& c = *s->expr->args[0];
  CHECK(c.op == Op::contract);
  CHECK(c.axes == std::vector<std::string>{"d"});
  CHECK(c.args[0]->level == MemLevel::smem);
}

TEST_CASE("operator precedence and associativity survive printing", "[parser][printer]") {
  DiagnosticEngine diags;
  auto r = parse("diagram t\nY[] = a - (b - c) * -d / (e + f) + g\n", diags);
  REQUIRE_FALSE(diags.has_errors());
  const Expr& e = *r.file.diagrams[0].statements()[0]->expr;
  CHECK(e.op == Op::add);
  CHECK(print_expr(e) == "a - (b - c) * -d / (e + f) + g");
}

TEST_CASE("max of two operands is element-wise and max over axes a reduction: the new built-ins round-trip", "[parser][printer]") {
  DiagnosticEngine diags;
  const std::string lines[] = {
      "max(A, B)", "max(A; v)", "min(A, 0.5)", "pow(abs(A), -0.5)", "mask(S, causal(q, x; window=64))",
      "mask(S, band(q, x; lo=-3, hi=5))", "S - slope * (pos(q) - pos(x))", "logsumexp(L; v) - gather(L, T; v)",
      "sum(pick(L, T; v); v)",
  };
  const Op ops[] = {Op::maximum, Op::max, Op::minimum, Op::pow, Op::mask, Op::mask, Op::sub, Op::sub, Op::sum};
  for (std::size_t i = 0; i < std::size(lines); ++i) {
    auto r = parse("diagram t\nY[] = " + lines[i] + "\n", diags);
    REQUIRE_FALSE(diags.has_errors());
    const Expr& e = *r.file.diagrams[0].statements()[0]->expr;
    CHECK(e.op == ops[i]);
    CHECK(print_expr(e) == lines[i]);
    auto again = parse("diagram t\nY[] = " + print_expr(e) + "\n", diags);
    CHECK(again.file == r.file);
  }
}

TEST_CASE("one syntax error per bad line, and parsing resumes", "[parser][errors]") {
  DiagnosticEngine diags;
  auto r = parse("diagram t\naxis a 4\naxis b = 4\nin X[a] : nope\nY[b] = exp(\nout Y : fp32\n", diags);
  CHECK(diags.error_count() == 3);
  REQUIRE(r.file.diagrams.size() == 1);
  CHECK(r.file.diagrams[0].find_axis("b"));
  CHECK(r.file.diagrams[0].outputs().size() == 1);
  CHECK(r.broken.count("t.Y") == 1);
}

TEST_CASE("deep nesting and long chains are refused, not crashed on", "[parser][limits]") {
  DiagnosticEngine d1, d2;
  parse("diagram t\nY[] = " + std::string(10000, '(') + "a" + std::string(10000, ')') + "\n", d1);
  CHECK(d1.has_errors());
  std::string chain = "a";
  for (int i = 0; i < 10000; ++i) chain += " + a";
  parse("diagram t\nY[] = " + chain + "\n", d2);
  CHECK(d2.has_errors());
}

TEST_CASE("diagnostics render file:line:col, the line and a caret", "[diagnostics]") {
  SourceManager sm;
  const SourceFile* f = sm.add("m.napkin", "diagram t\naxis q = \tz9\n");
  DiagnosticEngine diags;
  diags.error(SourceLoc{f, 2, 11}, "bad");
  CHECK(diags.render() == "m.napkin:2:11: error: bad\naxis q = \tz9\n         \t^\n");
}

TEST_CASE("the error cap stops a flood", "[diagnostics]") {
  DiagnosticEngine diags(5);
  for (int i = 0; i < 100; ++i) diags.error({}, "e");
  CHECK(diags.error_count() == 100);
  CHECK(diags.diagnostics().size() == 6);  // five errors and the note that says it stopped
  CHECK(diags.saturated());
}
