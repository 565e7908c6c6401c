// Properties over bundled and random diagrams: print/parse round trip, canonical fixpoint,
// verification of generated diagrams, evaluation without error.
#include <catch2/catch.hpp>

#include "diagrams/eval.hpp"
#include "diagrams/parser.hpp"
#include "diagrams/printer.hpp"
#include "diagrams/verify.hpp"
#include "tests/support/random_diagram.hpp"
#include "tests/support/run.hpp"

using namespace napkin;
using namespace napkin::test;

namespace {
File parse_ok(SourceManager& sm, const std::string& text) {
  DiagnosticEngine diags;
  File f = parse_file(*sm.add("rt.napkin", text), diags).file;
  INFO(text << diags.render());
  REQUIRE_FALSE(diags.has_errors());
  return f;
}
}  // namespace

TEST_CASE("bundled diagrams are canonical: print(parse(t)) == t byte for byte", "[roundtrip]") {
  for (const auto& path : library_files()) {
    INFO(path);
    SourceManager sm;
    std::string text = slurp(path);
    File f = parse_ok(sm, text);
    CHECK(print_file(f) == text);
    CHECK(parse_ok(sm, print_file(f)) == f);
  }
}

TEST_CASE("random diagrams: parse(print(d)) == d and printing is a fixpoint", "[roundtrip]") {
  for (std::uint64_t seed = 0; seed < 500; ++seed) {
    std::string text = random_diagram(seed);
    INFO("seed " << seed << "\n" << text);
    SourceManager sm;
    File f = parse_ok(sm, text);
    std::string once = print_file(f);
    File g = parse_ok(sm, once);
    CHECK(g == f);
    CHECK(print_file(g) == once);
  }
}

TEST_CASE("random diagrams verify and evaluate", "[roundtrip][eval]") {
  for (std::uint64_t seed = 0; seed < 300; ++seed) {
    std::string text = random_diagram(seed);
    INFO("seed " << seed << "\n" << text);
    DiagnosticEngine diags;
    auto p = load_program_text("r.napkin", text, diags);
    const Diagram& d = p->select("");
    verify_program(*p, diags, &d);
    INFO(diags.render());
    REQUIRE_FALSE(diags.has_errors());
    auto sizes = *resolve_sizes(d, {}, diags);
    std::map<std::string, Tensor> in;
    for (const auto* i : d.inputs()) in[i->name] = random_input(*i, sizes, seed);
    auto out = evaluate(*p, d, sizes, in);
    CHECK(out.size() == d.outputs().size());
  }
}

TEST_CASE("structural equality sees every field", "[roundtrip]") {
  SourceManager sm;
  File a = parse_ok(sm, "diagram t\naxis a = 4\nin X[a] : fp32\nY[a] = exp(X)\nout Y : fp32\n");
  for (const char* changed : {"diagram t\naxis a = 5\nin X[a] : fp32\nY[a] = exp(X)\nout Y : fp32\n",
                              "diagram t\naxis a = 4 group 2\nin X[a] : fp32\nY[a] = exp(X)\nout Y : fp32\n",
                              "diagram t\naxis a = 4\nin X[a] : bf16\nY[a] = exp(X)\nout Y : fp32\n",
                              "diagram t\naxis a = 4\nin X[a] : fp32\nY[a] = exp(X@smem)\nout Y : fp32\n",
                              "diagram t\naxis a = 4\nin X[a] : fp32\nY[a] = log(X)\nout Y : fp32\n",
                              "diagram t\naxis a = 4  # c\nin X[a] : fp32\nY[a] = exp(X)\nout Y : fp32\n"}) {
    INFO(changed);
    CHECK_FALSE(parse_ok(sm, changed) == a);
  }
}
