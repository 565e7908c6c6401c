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
#include <map>
#include <string>
#include <vector>

#include "diagrams/program.hpp"
#include "diagrams/sizes.hpp"

namespace napkin {

/** Relabelling to draw on the diagram (plain data, so that this layer needs no schedule): which
 *  kernel computes each statement, the memory level of each array's occurrence in a kernel, the
 *  partition of each axis in a kernel ("g128", "s64"), and a caption per kernel (its moves and
 *  bytes per level). Kernels are drawn as regions; wires take their level's colour (paper §1.2:
 *  higher level black, lower level coloured). */
struct DotRelabelling {
  std::vector<std::string> kernels;                               ///< in execution order
  std::map<std::string, std::string> kernel_of;                   ///< statement -> kernel
  std::map<std::string, std::string> caption;                     ///< kernel -> caption lines
  std::map<std::string, std::map<std::string, MemLevel>> level;   ///< kernel -> array -> level
  std::map<std::string, std::map<std::string, std::string>> axis_note;  ///< kernel -> axis -> "g128"
};

/** DOT text for diagram `d` of `p`, with axis sizes `sizes` shown in the legend; with
 *  `relabelling`, the relabelled diagram. */
std::string diagram_to_dot(const Program& p, const Diagram& d, const SizeMap& sizes,
                           const DotRelabelling* relabelling = nullptr);

/** Escapes &, < and > for Graphviz HTML-like labels. */
std::string html_escape(const std::string& s);

}  // namespace napkin
