// napkin print: the canonical text of a file (parse errors are reported; semantics are not checked).
#include "cli/commands.hpp"
#include "cli/common.hpp"
#include "diagrams/printer.hpp"

namespace napkin::cli {

Runner setup_print(CLI::App& sub) {
  auto args = std::make_shared<DiagramArgs>();
  auto out = std::make_shared<std::string>();
  sub.add_option("file", args->file, "Diagram file (.napkin), or - for standard input")->required();
  sub.add_option("-o,--output", *out, "Write to this file instead of standard output");
  return [args, out] {
    auto l = load_checked(*args, /*verify=*/false);
    if (!l) return 1;
    write_output(*out, print_file(l->program->main_file()));
    return 0;
  };
}

}  // namespace napkin::cli
