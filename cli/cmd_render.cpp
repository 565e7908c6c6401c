// napkin render: the diagram as SVG (through libgvc) or as DOT.
#include <fmt/core.h>

#include <iostream>

#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "derive/derivation.hpp"
#include "diagrams/render_svg.hpp"
#include "diagrams/to_dot.hpp"
#include "emit/relabelled_dot.hpp"

namespace napkin::cli {

Runner setup_render(CLI::App& sub) {
  auto args = std::make_shared<DiagramArgs>();
  auto out = std::make_shared<std::string>();
  auto format = std::make_shared<std::string>("svg");
  auto schedule = std::make_shared<std::string>();
  auto derived = std::make_shared<bool>(false);
  auto hw = std::make_shared<std::string>("h100");
  args->add_to(sub);
  sub.add_option("--schedule", *schedule, "Draw the diagram relabelled by this schedule file");
  sub.add_flag("--derive", *derived, "Draw the diagram relabelled by the schedule derive finds");
  sub.add_option("--hw", *hw, "Hardware for --derive and --schedule")->capture_default_str();
  sub.add_option("-o,--output", *out, "Output file (default: standard output)");
  sub.add_option("--format", *format, "svg or dot")->check(CLI::IsMember({"svg", "dot"}));
  return [=] {
    auto l = load_checked(*args);
    if (!l) return 1;
    std::optional<DotRelabelling> labels;
    std::shared_ptr<const Diagram> drawn;
    if (*derived || !schedule->empty()) {
      Hardware h = load_hardware(*hw);
      SearchResult r;
      if (*derived) {
        Derivation dv = derive(*l->program, *l->diagram, l->sizes, h);
        if (dv.rewritten) drawn = dv.rewritten;  // the diagram the schedule is of (contraction order)
        r = dv.chosen;
      } else {
        auto checked = load_schedule(*schedule, *l, h);
        if (!checked) return 1;
        r = *checked;
        if (r.rewritten) drawn = r.rewritten;  // a schedule of derive's rewrite (load_schedule) labels that diagram
      }
      labels = relabelling_of(r);
    }
    std::string dot = diagram_to_dot(*l->program, drawn ? *drawn : *l->diagram, l->sizes, labels ? &*labels : nullptr);
    write_output(*out, *format == "dot" ? dot : render_svg(dot));
    if (!out->empty() && *out != "-") fmt::print(stderr, "wrote {} ({})\n", *out, *format);
    return 0;
  };
}

}  // namespace napkin::cli
