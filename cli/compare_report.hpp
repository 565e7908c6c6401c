/** \file compare_report.hpp
 *  `napkin compare`'s rows and their three renderings (the table on stdout, the CSV file, the SVG
 *  bar chart), apart from the derivation and the measurement that fill the rows, so that tests can
 *  render rows of their own numbers. Times in seconds, bytes in bytes, FLOPs as counted by the model.
 */
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace napkin::cli {

/** What `--measure` did with a row. */
enum class Measured {
  off,           ///< no --measure: the row is predicted only and the output has no measured columns
  measured,      ///< built, checked within the tolerance and timed
  wrong,         ///< built and run, but the element-wise check failed: WRONG, exit code 1
  not_measured,  ///< not run, for the reason in `measure_note` (another GPU, a dtype nothing here runs)
  failed,        ///< a step that should work failed (nvcc, the harness): reason in `measure_note`, exit code 1
};

/** One (hardware, dtype) pair of napkin compare. */
struct CompareRow {
  std::string hw, dtype;
  bool ok = false;        ///< predicted: derive succeeded (else `note` says why)
  std::string bound;      ///< what bounds the slowest kernel (predicted)
  std::string note;       ///< why there is no prediction
  std::size_t kernels = 0;
  double seconds = 0;     ///< predicted time of the derived schedule
  double flops = 0, hbm = 0, l2 = 0;  ///< FLOPs, HBM bytes, L2 -> SMEM bytes of the derived schedule
  Measured measure = Measured::off;
  std::string measure_note;  ///< not_measured / failed: the reason; wrong: the check's figures
  double measured_s = 0;     ///< measured / wrong: the derived schedule's measured time
  double max_rel_err = 0;    ///< measured / wrong: max|err| / max|ref| of the element-wise checks
  double tolerance = 0;      ///< measured / wrong: the tolerance the check applied
};

/** measured_s > 0 rows: the model's error, predicted / measured - 1 (+0.10: predicted 10% slower). */
double model_error(const CompareRow& r);

/** The table printed on stdout (header line included); with measured columns when any row has measure != off. */
std::string compare_table(const std::vector<CompareRow>& rows, const std::string& diagram);

/** The CSV file; columns hardware .. note, then, when any row has measure != off, measured_us,
 *  measured_tflops, model_error, check (ok, WRONG, not measured, failed), max_err_over_max_ref and
 *  tolerance; the note is then the measurement's ("not measured: <reason>", "WRONG: ...",
 *  "failed: ..."; empty when measured). A row with no prediction (ok false) must be not_measured. */
std::string compare_csv(const std::vector<CompareRow>& rows);

/** The SVG chart: a bar per row whose length is proportional to the predicted time; when rows were
 *  measured, a second, darker bar below it for the measured time (red when WRONG) and a legend. */
std::string compare_chart(const std::vector<CompareRow>& rows, const std::string& title);

}  // namespace napkin::cli
