#include "cli/common.hpp"

#include <CLI/CLI.hpp>
#include <charconv>
#include <iostream>

#include "cli/commands.hpp"
#include "derive/derivation.hpp"
#include "diagrams/npy.hpp"
#include "diagrams/verify.hpp"

namespace napkin::cli {

const std::vector<Command>& commands() {
  static const std::vector<Command> table{
      {"check", "Parse and verify a diagram file; report every problem with its location", setup_check},
      {"print", "Print a diagram file in canonical form", setup_print},
      {"eval", "Evaluate a diagram in fp64 on the CPU and write inputs and outputs as .npy", setup_eval},
      {"render", "Render a diagram as SVG (or DOT) through Graphviz", setup_render},
      {"derive", "Derive the best schedule by relabelling, with its cost per kernel and level", setup_derive},
      {"emit", "Emit the derived schedule as pseudocode, a CPU loop nest or CUDA, or the diagram as a PyTorch module", setup_emit},
      {"compare", "Compare the best schedules across hardware and dtypes (table, CSV, SVG chart)", setup_compare},
      {"grad", "Write the backward of a diagram as a diagram: cotangents in, gradients out (reverse mode)", setup_grad},
      {"budget", "The training budget of a model made of the diagram's block: parameters, FLOPs, time, memory per GPU, MFU", setup_budget},
      {"bench", "Build, check and time the derived kernels on this GPU against the unfused schedule and cuBLAS", setup_bench},
      {"calibrate", "Measure the model's ceilings on a GPU and write a hardware description", setup_calibrate},
      {"passes", "List the relabelling passes and the lemma library", setup_passes},
  };
  return table;
}

void DiagramArgs::add_to(CLI::App& sub, bool with_sizes) {
  sub.add_option("file", file, "Diagram file (.napkin), or - for standard input")->required();
  sub.add_option("--diagram", diagram, "Diagram to use (default: the last one in the file)");
  if (with_sizes) sub.add_option("--set", sets, "Override an axis size, NAME=SIZE (repeatable)");
}

CLI::Validator seed_value() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        bool digits = !s.empty() && s.find_first_not_of("0123456789") == std::string::npos;
        return digits ? "" : "a seed is a whole number from 0 to 2^64 - 1, got '" + s + "'";
      },
      "SEED");
}

SizeMap parse_sets(const std::vector<std::string>& sets) {
  SizeMap out;
  for (const auto& s : sets) {
    auto eq = s.find('=');
    std::int64_t v = 0;
    std::string name = s.substr(0, eq);
    bool ok = eq != std::string::npos && eq > 0;
    if (ok) {
      const char* b = s.data() + eq + 1;
      const char* e = s.data() + s.size();
      auto [p, ec] = std::from_chars(b, e, v);
      ok = ec == std::errc() && p == e && b != e;
    }
    if (!ok) throw UserError("--set expects NAME=SIZE with a positive integer size, got '" + s + "'");
    out[name] = v;
  }
  return out;
}

std::optional<Loaded> load_checked(const DiagramArgs& args, bool verify) {
  return load_checked(args, verify, /*expand=*/verify);  // print shows the file as written
}

std::optional<Loaded> load_checked(const DiagramArgs& args, bool verify, bool expand) {
  DiagnosticEngine diags;
  Loaded l;
  l.program = load_program(args.file, diags, expand);
  SizeMap overrides = parse_sets(args.sets);
  bool has_diagram = !l.program->main_file().diagrams.empty() || !args.diagram.empty();
  if (verify && has_diagram) {
    // Verify even after parse errors: the parser dropped only the bad items and recorded their
    // names, so the remaining problems of the file are reported in the same run.
    l.diagram = &l.program->select(args.diagram);
    verify_program(*l.program, diags, l.diagram, overrides);
    if (!diags.has_errors()) {
      auto sizes = resolve_sizes(*l.diagram, overrides, diags);
      if (sizes) l.sizes = *sizes;
    }
  }
  diags.sort_by_location();
  std::cerr << diags.render();
  for (const auto& d : diags.diagnostics()) l.warnings += d.severity == Severity::warning;
  if (diags.has_errors()) {
    std::cerr << diags.error_count() << " error" << (diags.error_count() == 1 ? "" : "s") << " in "
              << (args.file == "-" ? "<stdin>" : args.file) << "\n";
    return std::nullopt;
  }
  return l;
}

namespace {

/** Whether every statement `s` fuses is one of `d`'s. */
bool names_statements_of(const Schedule& s, const Diagram& d) {
  for (const auto& k : s.kernels)
    for (const auto& name : k.fused())
      if (!d.find_statement(name)) return false;
  return true;
}

}  // namespace

std::optional<SearchResult> load_schedule(const std::string& path, const Loaded& l, const Hardware& hw,
                                          const ModelOptions& opt) {
  DiagnosticEngine diags;
  SourceManager sm;
  auto s = parse_schedule(*sm.add(path, read_file(path)), diags);
  // A schedule napkin derive printed for a diagram it rewrote before its search (statistics bound
  // to statements of their own, pairwise contractions, relayout copies) names the rewrite's
  // statements: it is checked against that rewrite, derived here on the same hardware.
  std::shared_ptr<const Diagram> rewritten;
  if (s && !names_statements_of(*s, *l.diagram)) try {
      Derivation dv = derive(*l.program, *l.diagram, l.sizes, hw, opt);
      if (dv.rewritten && names_statements_of(*s, *dv.rewritten)) rewritten = dv.rewritten;
    } catch (const UserError&) {
      // no derivation to take a rewrite from: the check below names the missing statements
    }
  std::optional<CheckedSchedule> checked;
  if (s) checked = check_schedule(*l.program, rewritten ? *rewritten : *l.diagram, *s, l.sizes, hw, opt, diags);
  std::cerr << diags.render();
  if (!checked) return std::nullopt;
  SearchResult r = result_of(*s, *checked);
  r.rewritten = std::move(rewritten);
  return r;
}

void write_output(const std::string& path, const std::string& text) {
  if (path.empty() || path == "-") {
    std::cout << text;
    return;
  }
  write_file_atomic(path, text);
}

}  // namespace napkin::cli
