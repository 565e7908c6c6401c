/** \file to_dot.hpp
 *  Diagram -> Graphviz DOT text, in the spirit of neural circuit diagrams (Abbott, TMLR 2024),
 *  drawn left to right: inputs at the left edge, outputs at the right, one box per statement
 *  (a double box for a call of another diagram), and one wire bundle per array use, drawn as
 *  parallel strands, one strand per axis in that axis's colour. On each wire, the axes the
 *  consuming operation is woven over are overlined (q̄) and the axes it reduces are red and end at
 *  the box (marked ⊣ at the head). A legend gives every axis's colour and size.
 *  Output is deterministic: it depends only on the diagram and the sizes.
 */
#pragma once
#include <string>

#include "diagrams/program.hpp"
#include "diagrams/sizes.hpp"

namespace napkin {

/** DOT text for diagram `d` of `p`, with axis sizes `sizes` shown in the legend. */
std::string diagram_to_dot(const Program& p, const Diagram& d, const SizeMap& sizes);

/** Escapes &, < and > for Graphviz HTML-like labels. */
std::string html_escape(const std::string& s);

}  // namespace napkin
