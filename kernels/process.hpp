/** \file process.hpp
 *  Child processes without a shell: `napkin bench` and `napkin calibrate` start nvcc and the
 *  programs it builds through these, so a path with spaces or shell characters (`a b;touch x`)
 *  reaches the child as one argument and is never interpreted. POSIX posix_spawnp(3).
 */
#pragma once
#include <string>
#include <vector>

namespace napkin {

/** How a child process ended. */
struct ChildStatus {
  bool started = false;  ///< false: the program could not be started (not found, not executable)
  int exit_code = -1;    ///< the exit status when it exited normally, else -1
  int signal = 0;        ///< the signal that ended it, else 0
  std::string error;     ///< why it could not be started (strerror), when !started
  /** True when the child started and exited with status 0. */
  bool ok() const { return started && exit_code == 0; }
  /** "exit status 3", "killed by signal 9" or "could not start: ..." for messages. */
  std::string describe() const;
};

/** Runs `argv` (argv[0] is looked up on PATH when it has no '/') and waits for it. Its stdout
 *  goes to the file `out_path` and its stderr to `err_path` (created or truncated, mode 0644);
 *  when both paths are equal the two streams share one file, in order. stdin is /dev/null.
 *  Raises UserError when an output file cannot be opened. argv must not be empty. */
ChildStatus run_child(const std::vector<std::string>& argv, const std::string& out_path, const std::string& err_path);

/** `argv` as one line a POSIX shell would split back into the same words (single quotes where a
 *  word needs them), for messages that show the user the command to re-run. */
std::string shell_quoted(const std::vector<std::string>& argv);

}  // namespace napkin
