/** \file program.hpp
 *  A loaded program: the main file, the files it imports (transitively), and the table of every
 *  diagram by name, which composition (calls) resolves against.
 *
 *  Errors: an unreadable main file raises UserError; an unreadable or cyclic import, imports nested
 *  more than kMaxImportDepth deep (limits.hpp), and two diagrams with the same name, are located
 *  diagnostics. Parse errors of every file are reported.
 */
#pragma once
#include <cstdint>
#include <map>
#include <set>
#include <string>

#include "diagrams/diagnostics.hpp"
#include "diagrams/files.hpp"
#include "diagrams/ir.hpp"
#include "diagrams/source.hpp"

namespace napkin {

struct LoadedFile {
  const SourceFile* source = nullptr;
  File file;
};

struct Program {
  SourceManager sources;
  std::vector<std::unique_ptr<LoadedFile>> files;  ///< files[0] is the main file
  std::map<std::string, const Diagram*> diagrams;  ///< every diagram of every loaded file
  std::set<std::string> broken;                    ///< "diagram.array" names dropped by the parser

  const File& main_file() const { return files.front()->file; }
  /** The diagram a command works on: `name` if given, else the last diagram of the main file.
   *  Raises UserError when there is none or the name is unknown. */
  const Diagram& select(const std::string& name) const;
};

/** Loads `path` ("-" reads standard input) and its imports. Always returns a Program; check
 *  diags.has_errors() before using it. `expand`: logsumexp and l2norm are expanded into core
 *  operations (diagrams/builtins.hpp); false keeps the text as written (`napkin print`). */
std::unique_ptr<Program> load_program(const std::string& path, DiagnosticEngine& diags, bool expand = true);
/** Loads a program from text held in memory (tests, fuzzing); imports are resolved against the
 *  current directory. `expand` as for load_program. */
std::unique_ptr<Program> load_program_text(const std::string& name, std::string text, DiagnosticEngine& diags,
                                           bool expand = true);

}  // namespace napkin
