/** \file commands.hpp
 *  The subcommands of `napkin`. Each registers its options on a CLI11 subcommand and returns the
 *  function that runs it; that function returns the exit status (0 ok, 1 user error) and may raise
 *  UserError (status 1) or InternalError (status 2), which main turns into messages.
 */
#pragma once
#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <vector>

namespace napkin::cli {

using Runner = std::function<int()>;

struct Command {
  const char* name;
  const char* summary;
  Runner (*setup)(CLI::App& sub);
};

Runner setup_check(CLI::App& sub);
Runner setup_print(CLI::App& sub);
Runner setup_eval(CLI::App& sub);
Runner setup_render(CLI::App& sub);
Runner setup_derive(CLI::App& sub);
Runner setup_passes(CLI::App& sub);
Runner setup_emit(CLI::App& sub);
Runner setup_compare(CLI::App& sub);
Runner setup_budget(CLI::App& sub);
Runner setup_grad(CLI::App& sub);
Runner setup_calibrate(CLI::App& sub);
Runner setup_bench(CLI::App& sub);

/** Every subcommand, in the order `napkin --help` lists them. */
const std::vector<Command>& commands();

}  // namespace napkin::cli
