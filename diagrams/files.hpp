/** \file files.hpp
 *  Every file napkin reads and writes goes through here: bounded reads (diagrams, imports,
 *  schedules, hardware descriptions, .npy inputs, measurements, standard input) and output sets
 *  that are complete or absent.
 *
 *  Writing, the rules: a regular file or an absent path is written to a temporary beside it and
 *  renamed over it; a symbolic link is followed to its target, which is written the same way (the
 *  link stays); napkin's own standard output or error (/dev/stdout, /dev/fd/1, or a path to the
 *  file they are redirected to) is written through that descriptor; any other existing non-regular
 *  file (a FIFO, /dev/null, a terminal) is written in place. Temporaries are registered as live
 *  (diagrams/temporaries.hpp), so SIGINT, SIGTERM, SIGHUP or SIGPIPE removes them.
 */
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "diagrams/temporaries.hpp"

namespace napkin {

/** Largest file read (64 MiB), for every file and for standard input. */
inline constexpr std::uintmax_t kMaxFileBytes = std::uintmax_t{64} << 20;

/** Reads a whole file ("-": standard input) of at most kMaxFileBytes. Any readable file that is
 *  not a folder is accepted (pipes, process substitution); reading stops one byte past the limit.
 *  Raises UserError naming the file and the reason: unreadable, a folder, larger than 64 MiB. */
std::string read_file(const std::string& path);

/** A group of output files written together: after commit() every file holds its new bytes; if
 *  the set is destroyed before commit() (an error, an exception) or the process is interrupted,
 *  none was replaced and no temporary remains. The renames of commit() run with the cleanup
 *  signals blocked, so an interrupt cannot split them. */
class OutputSet {
 public:
  /** `folder`, when not empty, is created with its missing parents; the folders created are
   *  removed again if the set is abandoned. Raises UserError when a part exists and is no folder,
   *  or cannot be created. */
  explicit OutputSet(const std::string& folder = "");
  ~OutputSet();
  OutputSet(const OutputSet&) = delete;
  OutputSet& operator=(const OutputSet&) = delete;

  /** Stages `bytes` for `path`: written to its temporary now (regular and absent targets), or
   *  kept for commit() (streams and devices). Raises UserError (target is a folder, cannot be
   *  written, disk full), after which the set can still be abandoned cleanly. */
  void add(const std::string& path, std::string_view bytes);
  /** Writes the kept bytes to their streams, then renames every temporary over its target.
   *  Raises UserError naming the file that failed; targets that did not exist before are then
   *  removed again. Call once. */
  void commit();

 private:
  struct Staged {
    std::string shown;   ///< the path as the user wrote it, for messages
    std::string target;  ///< after following symbolic links
    std::unique_ptr<LiveTemporary> temp;
    bool existed = false;
  };
  struct InPlace {
    std::string shown;
    int fd_of_own = -1;  ///< 1 or 2: write through napkin's stdout or stderr; -1: open `shown`
    std::string bytes;
  };
  void abandon();

  std::vector<std::unique_ptr<LiveTemporary>> created_folders_;  ///< outermost first
  std::vector<Staged> staged_;
  std::vector<InPlace> in_place_;
  bool done_ = false;
};

/** Writes one file by the rules above: OutputSet of one. Raises UserError on failure. */
void write_file_atomic(const std::string& path, std::string_view bytes);

/** A folder for a command's working files (bench's sources, binary and logs): created if absent.
 *  When this object created it and is destroyed by an exception unwinding past it, the folder is
 *  removed with everything in it; on a normal exit (including a failed check reported as a
 *  result) it is kept. An interrupt removes it only if empty (the handler cannot list folders). */
class WorkFolder {
 public:
  explicit WorkFolder(const std::string& path);
  ~WorkFolder();
  WorkFolder(const WorkFolder&) = delete;
  WorkFolder& operator=(const WorkFolder&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::vector<std::unique_ptr<LiveTemporary>> created_;  ///< outermost first; empty: it existed
  int exceptions_at_start_ = 0;
};

}  // namespace napkin
