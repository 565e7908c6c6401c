/** \file fuzz_target.hpp
 *  A fixed diagram the fuzz targets drive (schedules, hardware descriptions): loaded, verified and
 *  sized once from its text. Shared by tests/fuzz/fuzz_schedule.cpp and fuzz_hardware.cpp.
 */
#pragma once
#include <memory>
#include <string>

#include "diagrams/program.hpp"
#include "diagrams/sizes.hpp"
#include "diagrams/verify.hpp"

namespace napkin::fuzz {

struct Target {
  std::unique_ptr<Program> program;
  const Diagram* diagram = nullptr;
  SizeMap sizes;
};

/** Loads `text` (a diagram known to be valid) as the last diagram of its program, with its sizes. */
inline Target make(const std::string& text) {
  DiagnosticEngine diags;
  Target t;
  t.program = load_program_text("t.napkin", text, diags);
  t.diagram = &t.program->select("");
  verify_program(*t.program, diags, t.diagram);
  t.sizes = *resolve_sizes(*t.diagram, {}, diags);
  return t;
}

}  // namespace napkin::fuzz
