// napkin render: the diagram as SVG (through libgvc) or as DOT.
#include <fmt/core.h>

#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "diagrams/render_svg.hpp"
#include "diagrams/to_dot.hpp"

namespace napkin::cli {

Runner setup_render(CLI::App& sub) {
  auto args = std::make_shared<DiagramArgs>();
  auto out = std::make_shared<std::string>();
  auto format = std::make_shared<std::string>("svg");
  args->add_to(sub);
  sub.add_option("-o,--output", *out, "Output file (default: standard output)");
  sub.add_option("--format", *format, "svg or dot")->check(CLI::IsMember({"svg", "dot"}));
  return [args, out, format] {
    auto l = load_checked(*args);
    if (!l) return 1;
    std::string dot = diagram_to_dot(*l->program, *l->diagram, l->sizes);
    write_output(*out, *format == "dot" ? dot : render_svg(dot));
    if (!out->empty() && *out != "-") fmt::print(stderr, "wrote {} ({})\n", *out, *format);
    return 0;
  };
}

}  // namespace napkin::cli
