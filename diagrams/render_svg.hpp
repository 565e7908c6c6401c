/** \file render_svg.hpp
 *  DOT text -> SVG through Graphviz's libgvc and libcgraph, in-process (no `dot` subprocess).
 *  The only file that includes Graphviz headers.
 */
#pragma once
#include <string>

namespace napkin {

/** Lays out `dot` with the `dot` engine and renders it as SVG. The comment holding Graphviz's
 *  version is removed so the output does not change with the library's patch level.
 *  Raises InternalError if Graphviz rejects the text (napkin writes the DOT, so that is a bug). */
std::string render_svg(const std::string& dot);

}  // namespace napkin
