/** \file parser.hpp
 *  Tokens -> File (one .napkin file, without resolving its imports).
 *
 *  Contract: never throws on user input. Each syntax error is reported at its token and the parser
 *  resumes at the next line, so that several errors in one file are all reported. An item with a
 *  syntax error is left out of the File; the names of statements whose right-hand side failed are
 *  returned in `broken` (axes, inputs, statements and outputs alike) so that the verifier does not
 *  report their uses as undefined. At most one syntax error is reported per line.
 *  The grammar is in docs/diagram-language.md.
 */
#pragma once
#include <set>
#include <string>

#include "diagrams/diagnostics.hpp"
#include "diagrams/ir.hpp"

namespace napkin {

struct ParseResult {
  File file;
  std::set<std::string> broken;  ///< "diagram.name" of items dropped after a syntax error
};

/** Parses `src`. Nesting of parentheses and unary minus is limited to 256 levels (an error past
 *  that), so that no input can exhaust the stack. */
ParseResult parse_file(const SourceFile& src, DiagnosticEngine& diags);

}  // namespace napkin
