// Ctrl-C (SIGINT) or `kill` (SIGTERM) during a long mamba-cli command (run, perplexity): the first
// signal only sets a flag that the command polls, so it can stop at a safe point and still print
// what it has (the text so far, the --json object, the statistics or the partial perplexity); then
// the command ends as the signal would have (exit status 130 or 143 in a shell). A second signal,
// of either kind, kills at once.
#pragma once

#include <signal.h>

namespace mamba::cli {

/// Installs the flag-setting SIGINT and SIGTERM handlers while alive (a signal ignored when
/// mamba-cli started, e.g. SIGINT under nohup or in a background job, stays ignored); restores the
/// previous actions. One at a time.
class Interrupt {
 public:
  Interrupt();
  ~Interrupt();
  Interrupt(const Interrupt&) = delete;
  Interrupt& operator=(const Interrupt&) = delete;

  /// Whether SIGINT or SIGTERM arrived since the first Interrupt was made (async-signal-safe flag;
  /// stays set).
  static bool interrupted();
  /// What arrived, for messages: "Ctrl-C" (SIGINT) or "SIGTERM"; empty when nothing did.
  static const char* reason();
  /// Ends the process by that signal with its default action, after flushing stdout (call once the
  /// output is complete, when interrupted()).
  [[noreturn]] static void end_as_interrupted();

 private:
  struct sigaction old_int_ {}, old_term_ {};
  bool int_installed_ = false, term_installed_ = false;
};

}  // namespace mamba::cli
