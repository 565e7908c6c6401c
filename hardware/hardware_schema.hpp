/** \file hardware_schema.hpp
 *  The schema of a hardware description (the .toml files of hardware/): one table that states, for every key a
 *  description may hold, its type (string, list of strings, integer, real, true/false), its range,
 *  whether it is required, its unit and where its value goes in a Hardware. It is the single source
 *  for the reader (hardware/hardware.cpp): a key that is not in it is an error ("did you mean"
 *  where one is close), an integer field takes only a TOML integer, every number must lie in its
 *  range (no NaN, no infinity), and every message names the field with its unit.
 *
 *  Layout: top-level keys; the tables [hbm], [l2], [smem], [registers], [limits], [compute],
 *  [features] with fixed keys; [tensor_core], whose keys are dtype names (diagrams/dtype.hpp) with
 *  a rate each; and the array of tables [[mma]], each entry with its own fixed keys.
 */
#pragma once
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hardware/hardware.hpp"

namespace napkin::hwschema {

/** The TOML type a key takes. `real` also accepts a TOML integer; `integer` accepts only one. */
enum class Type { string, string_list, integer, real, boolean, integer_triple };

/** A checked value handed to a field's setter (only the member of the field's type is set). */
struct Value {
  std::string_view key;  ///< the key as written (for [tensor_core]: the dtype name)
  std::string text;
  std::vector<std::string> list;
  double number = 0;     ///< integer and real fields (integers are exact up to 2^53)
  bool flag = false;
  long long triple[3] = {0, 0, 0};
};

/** One key of the schema. Numbers must lie in [lo, hi], or (lo, hi] when lo_open. */
template <class Target>
struct Field {
  std::string_view key;
  Type type;
  bool required;
  double lo, hi;
  bool lo_open;
  std::string_view unit;  ///< "bytes", "bytes/s", "FLOP/s", "ops/s", "s", "Hz", "count", "fraction of ..."; "" for strings
  void (*set)(Target&, const Value&);
};

/** A table of the description: "" for the top level, a [table], the dtype-keyed [tensor_core]
 *  (every key shares `fields[0]`), or the array of tables [[mma]] (fields of an MmaShape). */
struct Section {
  std::string_view name;
  enum class Kind { fixed, dtype_keyed, table_array } kind;
  bool required;
  std::span<const Field<Hardware>> fields;     ///< fixed and dtype_keyed
  std::span<const Field<MmaShape>> mma_fields; ///< table_array
};

/** Every section of a description, the top level first. */
std::span<const Section> sections();

/** "an integer from 1 to 4096", "a number in (0, 1]", "a string", ... for messages. */
template <class Target>
std::string expectation(const Field<Target>& f);

/** The candidate closest to `word` by edit distance when it is close enough to be a likely
 *  misspelling (at most 2 edits, or a third of the word's length for long words); "" otherwise. */
std::string closest(std::string_view word, const std::vector<std::string>& candidates);

}  // namespace napkin::hwschema
