// napkin check: parse and verify; a summary of the selected diagram on success.
#include <fmt/core.h>

#include "cli/commands.hpp"
#include "cli/common.hpp"

namespace napkin::cli {

Runner setup_check(CLI::App& sub) {
  auto args = std::make_shared<DiagramArgs>();
  auto werror = std::make_shared<bool>(false);
  args->add_to(sub);
  sub.add_flag("--werror", *werror, "Treat warnings as errors");
  return [args, werror] {
    auto l = load_checked(*args);
    if (!l) return 1;
    const Diagram& d = *l->diagram;
    std::size_t n = 0;
    for (const auto& f : l->program->files) n += f->file.diagrams.size();
    auto count = [](std::size_t k, const char* what) { return fmt::format("{} {}{}", k, what, k == 1 ? "" : "s"); };
    fmt::print("{}: ok: diagram '{}': {}, {}, {}, {} ({} in {})\n", args->file == "-" ? "<stdin>" : args->file, d.name,
               (d.axes().size() == 1 ? std::string("1 axis") : fmt::format("{} axes", d.axes().size())), count(d.inputs().size(), "input"),
               count(d.statements().size(), "statement"), count(d.outputs().size(), "output"),
               count(n, "diagram"), count(l->program->files.size(), "file"));
    return *werror && l->warnings > 0 ? 1 : 0;
  };
}

}  // namespace napkin::cli
