/** \file pseudo_emitter.hpp
 *  `napkin emit --target pseudo`: looped pseudocode of a derived schedule in the manner of the
 *  paper's pseudocode diagrams (§5.1): per kernel, the parallel loops of its grid, every buffer
 *  with its level, shape and size in bytes, each load and save, and for a streamed axis the head
 *  (accumulator initialisation), body (per chunk) and finalisation of each lemma. Deterministic
 *  (golden-tested).
 */
#pragma once
#include <string>

#include "derive/derivation.hpp"

namespace napkin {

std::string emit_pseudo(const Program& p, const Diagram& d, const Derivation& dv, const Hardware& hw);

}  // namespace napkin
