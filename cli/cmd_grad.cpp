// napkin grad: the backward of a diagram as a diagram (reverse mode, diagrams/grad.hpp).
#include <fmt/core.h>

#include <iostream>

#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "derive/checkpoint.hpp"
#include "diagrams/grad.hpp"
#include "hardware/hardware.hpp"
#include "diagrams/printer.hpp"
#include "diagrams/verify.hpp"

namespace napkin::cli {

namespace {

/** Splits "Q,K,V" at commas; empty entries are an error naming `option`. */
std::vector<std::string> split_names(const std::string& list, const std::string& option) {
  std::vector<std::string> out;
  if (list.empty()) return out;
  std::size_t start = 0;
  for (;;) {
    std::size_t comma = list.find(',', start);
    std::string name = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (name.empty()) throw UserError(option + ": an empty name in '" + list + "' (write " + option + " Q,K,V)");
    out.push_back(name);
    if (comma == std::string::npos) return out;
    start = comma + 1;
  }
}

/** The text `text` of a generated file parses and verifies (every diagram of it): else a bug. */
void check_generated(const std::string& text) {
  DiagnosticEngine diags;
  auto p = load_program_text("<napkin grad output>", text, diags);
  if (!diags.has_errors()) verify_program(*p, diags);
  NAPKIN_ASSERT(!diags.has_errors()) << "napkin grad wrote a file that does not verify:\n" << diags.render() << text;
}

/** The recompute-or-save table on stderr. */
void print_plan(const CheckpointPlan& plan, const std::string& hw) {
  auto gb = [](double b) { return fmt::format("{:.3g} GB", b / 1e9); };
  auto us = [](double s) { return fmt::format("{:.1f} us", s * 1e6); };
  std::cerr << fmt::format("napkin grad: recompute or save on {} within {} (forward + backward, predicted):\n", hw, gb(plan.budget_bytes));
  std::cerr << fmt::format("  {:<24} {:>12} {:>16}  {}\n", "array", "bytes", "if saved", "choice");
  for (const auto& c : plan.candidates)
    std::cerr << fmt::format("  {:<24} {:>12} {:>16}  {}\n", c.array, gb(c.bytes), c.fits ? us(c.seconds) : "over budget",
                             c.chosen ? "save" : "recompute");
  std::cerr << fmt::format("  recompute everything: {}; chosen: {}, {} saved{}\n", us(plan.seconds_recompute), us(plan.seconds),
                           gb(plan.saved_bytes),
                           plan.refined ? fmt::format(" ({} change(s) kept by the local search after the greedy choice)", plan.refined) : "");
}

}  // namespace

Runner setup_grad(CLI::App& sub) {
  auto args = std::make_shared<DiagramArgs>();
  auto wrt = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  auto save = std::make_shared<std::string>();
  auto budget = std::make_shared<double>(-1);
  auto hw = std::make_shared<std::string>("h100");
  args->add_to(sub, /*with_sizes=*/true);
  sub.add_option("--save", *save, "Forward statements to save for the backward instead of recomputing them, comma-separated");
  sub.add_option("--memory-budget", *budget, "Choose what to save by the model's time within this many bytes (e.g. 8e9)")
      ->check(CLI::NonNegativeNumber)
      ->excludes("--save");
  sub.add_option("--hw", *hw, "Hardware that prices --memory-budget's choice (a100, h100, h200, b200, rtx4090, or a .toml file)")
      ->capture_default_str();
  sub.add_option("--wrt", *wrt, "Inputs to differentiate with respect to, comma-separated (default: every floating-point input)");
  sub.add_option("-o,--output", *out, "Write the file (forward with saved statistics, then backward) here instead of standard output");
  return [args, wrt, out, save, budget, hw] {
    auto l = load_checked(*args, /*verify=*/true, /*expand=*/false);
    if (!l) return 1;
    std::vector<std::string> saved = split_names(*save, "--save");
    if (*budget >= 0) {
      CheckpointPlan plan = plan_checkpointing(*l->program, *l->diagram, split_names(*wrt, "--wrt"), l->sizes, load_hardware(*hw), *budget);
      print_plan(plan, *hw);
      saved = plan.save;
    }
    GradResult g = differentiate(*l->program, *l->diagram, split_names(*wrt, "--wrt"), saved);
    std::string text = print_file(g.file);
    check_generated(text);
    write_output(*out, text);
    std::string stats;
    for (const auto& s : g.saved) stats += (stats.empty() ? "" : ", ") + s.name;
    std::string names;
    for (const auto& w : g.wrt) names += (names.empty() ? "" : ",") + w;
    for (const auto& s : g.stored) stats += (stats.empty() ? "" : ", ") + s;
    std::cerr << fmt::format("napkin grad: d/d{{{}}} of {}: {} saves {}; {} takes the cotangents {}\n", names, l->diagram->name,
                             g.file.diagrams[0].name, stats.empty() ? "nothing" : stats, g.file.diagrams[1].name,
                             [&] {
                               std::string c;
                               for (const auto& n : g.cotangents) c += (c.empty() ? "" : ", ") + n;
                               return c;
                             }());
    return 0;
  };
}

}  // namespace napkin::cli
