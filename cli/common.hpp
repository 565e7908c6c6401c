/** \file common.hpp
 *  What the subcommands share: loading and verifying a diagram file with `--set` overrides,
 *  reporting diagnostics, and writing outputs (through diagrams/files.hpp's OutputSet).
 */
#pragma once
#include <CLI/CLI.hpp>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "diagrams/program.hpp"
#include "derive/search.hpp"
#include "diagrams/sizes.hpp"

namespace napkin::cli {

/** Options every diagram-reading subcommand takes. */
struct DiagramArgs {
  std::string file;
  std::string diagram;            ///< --diagram NAME; default: the last diagram of the file
  std::vector<std::string> sets;  ///< --set name=value
  void add_to(CLI::App& sub, bool with_sizes = true);
};

/** A loaded, verified program with the selected diagram and its resolved sizes. */
struct Loaded {
  std::unique_ptr<Program> program;
  const Diagram* diagram = nullptr;
  SizeMap sizes;
  int warnings = 0;
};

/** Loads and verifies; prints diagnostics (errors and warnings) to stderr. Returns nullopt when
 *  any error was reported (the caller exits with status 1). `verify` false: parse only. */
std::optional<Loaded> load_checked(const DiagramArgs& args, bool verify = true);
/** As above, with the built-ins logsumexp, l2norm and gather kept as written when `expand` is false
 *  (diagrams/builtins.hpp; `napkin grad` differentiates them by their own rules). */
std::optional<Loaded> load_checked(const DiagramArgs& args, bool verify, bool expand);

/** Validates a `--seed` value: digits only, so that -1 is refused instead of wrapping to 2^64 - 1. */
CLI::Validator seed_value();

/** Parses `--set` values ("q=64") into a SizeMap; raises UserError on a malformed one. */
SizeMap parse_sets(const std::vector<std::string>& sets);

/** Reads, parses and checks the schedule file `path` for the loaded diagram on `hw`; prints its
 *  diagnostics; nullopt when it has errors. A schedule naming statements the diagram lacks but
 *  napkin derive's rewrite of it on `hw` has (derive-bind-reduction's statistics, pairwise
 *  contractions, relayout copies: the schedules derive prints for such diagrams) is checked
 *  against that rewrite and carries it (SearchResult::rewritten). */
std::optional<SearchResult> load_schedule(const std::string& path, const Loaded& l, const Hardware& hw,
                                          const ModelOptions& opt = {});

/** Writes `text` to `path` by the rules of diagrams/files.hpp (atomically for regular files,
 *  through links, in place for pipes and devices), or to stdout when path is empty or "-". */
void write_output(const std::string& path, const std::string& text);

}  // namespace napkin::cli
