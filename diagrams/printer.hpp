/** \file printer.hpp
 *  IR -> canonical diagram text. Round-trips with the parser: parse(print(f)) == f for every File,
 *  and print(parse(t)) == t for every canonical text t (tests/property/roundtrip_test.cpp).
 *
 *  Canonical form: one item per line; `in  ` padded to the width of `out `; axes written
 *  `[b,h,q,d]`; binary operators with one space on each side and only the parentheses precedence
 *  needs; numbers as spelled in the source; trailing comments of consecutive lines aligned two
 *  columns after the longest line of the run; one blank line before each diagram after the first
 *  item; no trailing blank lines.
 */
#pragma once
#include <string>

#include "diagrams/ir.hpp"

namespace napkin {

/** The canonical text of a whole file. */
std::string print_file(const File& f);
/** The canonical text of one expression, as it appears on the right of '='. */
std::string print_expr(const Expr& e);
/** `[b,h,q,d]` */
std::string print_axes(const std::vector<std::string>& axes);

}  // namespace napkin
