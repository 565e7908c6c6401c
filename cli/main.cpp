// napkin: string diagrams -> IO-aware GPU kernels. main only dispatches to the subcommands.
#include <exception>
#include <iostream>
#include <new>
#include <string>

#include "cli/commands.hpp"
#include "derive/user_labels.hpp"
#include "diagrams/diagnostics.hpp"

namespace {
/** The message for a first argument that names no subcommand ("napkin frobnicate"), or empty. */
std::string unknown_command(const std::string& word) {
  std::string names;
  for (const auto& c : napkin::cli::commands()) {
    if (word == c.name) return {};
    names += std::string(names.empty() ? "" : ", ") + c.name;
  }
  return "napkin: error: unknown command '" + word + "'; the commands are " + names + " (napkin --help)\n";
}
}  // namespace

int main(int argc, char** argv) {
  using namespace napkin;
  CLI::App app{"napkin: derive IO-aware GPU kernels from string diagrams of deep-learning computations"};
  app.set_version_flag("--version", std::string("napkin ") + NAPKIN_VERSION);
  app.require_subcommand(1);
  cli::Runner run;
  for (const auto& c : cli::commands()) {
    CLI::App* sub = app.add_subcommand(c.name, c.summary);
    auto runner = c.setup(*sub);
    sub->callback([&run, runner] { run = runner; });
  }
  if (argc > 1 && argv[1][0] != '-' && !unknown_command(argv[1]).empty()) {
    std::cerr << unknown_command(argv[1]);
    return 1;
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);
    return code == 0 ? 0 : 1;
  }
  try {
    return run();
  } catch (const LocatedUserError& e) {
    std::cerr << e.what();
    return 1;
  } catch (const UserError& e) {
    std::cerr << "napkin: error: " << e.what() << "\n";
    return 1;
  } catch (const std::bad_alloc&) {
    std::cerr << "napkin: error: out of memory: an allocation failed (this machine's memory or a ulimit); "
                 "shrink the problem, e.g. axes with --set\n";
    return 1;
  } catch (const InternalError& e) {
    std::cerr << "napkin: internal error (a bug in napkin; please report it with the input): " << e.what() << "\n";
    return 2;
  } catch (const std::exception& e) {
    std::cerr << "napkin: internal error (a bug in napkin; please report it with the input): " << e.what() << "\n";
    return 2;
  }
}
