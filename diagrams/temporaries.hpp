/** \file temporaries.hpp
 *  The registry of live temporaries: files and folders that napkin has created while writing its
 *  outputs and that must not survive the process if it is interrupted. On SIGINT, SIGTERM, SIGHUP
 *  or SIGPIPE a handler removes every registered file (unlink), then every registered folder that is
 *  empty by then (rmdir), and re-raises the signal with its default action, so the exit status
 *  still says which signal ended the process.
 *
 *  Contract: registration happens in ordinary code (it may allocate); the handler only reads
 *  atomics and calls unlink, rmdir, sigaction and raise, all async-signal-safe. A signal whose
 *  disposition was SIG_IGN when the first temporary was registered stays ignored.
 */
#pragma once
#include <signal.h>

#include <cstddef>
#include <string>

namespace napkin {

/** One registered path. Registers on construction and unregisters on destruction (or release()),
 *  never removing the path itself: the owner removes or renames it. Not copyable or movable: the
 *  handler reads the path's characters where they are. */
class LiveTemporary {
 public:
  enum class Kind { file, folder };
  LiveTemporary(std::string path, Kind kind);
  ~LiveTemporary();
  LiveTemporary(const LiveTemporary&) = delete;
  LiveTemporary& operator=(const LiveTemporary&) = delete;

  const std::string& path() const { return path_; }
  /** Unregisters now (the path was renamed into place or removed). Idempotent. */
  void release();

 private:
  std::string path_;
  struct TemporarySlot* slot_ = nullptr;  ///< where the handler sees path_; null once released
};

/** Number of paths registered now (tests). */
std::size_t live_temporaries();

/** Blocks the signals the handler cleans up after, for the lifetime of the object, so that a
 *  group of renames completes or does not start. Restores the previous mask on destruction. */
class SignalsBlocked {
 public:
  SignalsBlocked();
  ~SignalsBlocked();
  SignalsBlocked(const SignalsBlocked&) = delete;
  SignalsBlocked& operator=(const SignalsBlocked&) = delete;

 private:
  sigset_t saved_;
};

}  // namespace napkin
