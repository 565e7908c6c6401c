// napkin grad: the backward of a diagram as a diagram (reverse mode, diagrams/grad.hpp).
#include <fmt/core.h>

#include <iostream>

#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "diagrams/grad.hpp"
#include "diagrams/printer.hpp"
#include "diagrams/verify.hpp"

namespace napkin::cli {

namespace {

/** Splits "Q,K,V" at commas; empty entries are an error. */
std::vector<std::string> split_names(const std::string& list) {
  std::vector<std::string> out;
  if (list.empty()) return out;
  std::size_t start = 0;
  for (;;) {
    std::size_t comma = list.find(',', start);
    std::string name = list.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    if (name.empty()) throw UserError("--wrt: an empty name in '" + list + "' (write --wrt Q,K,V)");
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

}  // namespace

Runner setup_grad(CLI::App& sub) {
  auto args = std::make_shared<DiagramArgs>();
  auto wrt = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  args->add_to(sub, /*with_sizes=*/false);
  sub.add_option("--wrt", *wrt, "Inputs to differentiate with respect to, comma-separated (default: every floating-point input)");
  sub.add_option("-o,--output", *out, "Write the file (forward with saved statistics, then backward) here instead of standard output");
  return [args, wrt, out] {
    auto l = load_checked(*args, /*verify=*/true, /*expand=*/false);
    if (!l) return 1;
    GradResult g = differentiate(*l->program, *l->diagram, split_names(*wrt));
    std::string text = print_file(g.file);
    check_generated(text);
    write_output(*out, text);
    std::string saved;
    for (const auto& s : g.saved) saved += (saved.empty() ? "" : ", ") + s.name;
    std::string names;
    for (const auto& w : g.wrt) names += (names.empty() ? "" : ",") + w;
    std::cerr << fmt::format("napkin grad: d/d{{{}}} of {}: {} saves {}; {} takes the cotangents {}\n", names, l->diagram->name,
                             g.file.diagrams[0].name, saved.empty() ? "nothing" : saved, g.file.diagrams[1].name,
                             [&] {
                               std::string c;
                               for (const auto& n : g.cotangents) c += (c.empty() ? "" : ", ") + n;
                               return c;
                             }());
    return 0;
  };
}

}  // namespace napkin::cli
