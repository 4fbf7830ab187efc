// Ctrl-C during a long mamba-cli command (run, perplexity): the first SIGINT only sets a flag that
// the command polls, so it can stop at a safe point and still print what it has (the text so far,
// the --json object, the statistics or the partial perplexity); then the command ends as the signal
// would have (exit status 130 in a shell). A second Ctrl-C kills at once (SA_RESETHAND restores the
// default action).
#pragma once

#include <signal.h>

namespace mamba::cli {

/// Installs the flag-setting SIGINT handler while alive (unless SIGINT was ignored when mamba-cli
/// started, e.g. under nohup or in a background job); restores the previous action. One at a time.
class CtrlC {
 public:
  CtrlC();
  ~CtrlC();
  CtrlC(const CtrlC&) = delete;
  CtrlC& operator=(const CtrlC&) = delete;

  /// Whether a SIGINT arrived since the first CtrlC was made (async-signal-safe flag; stays set).
  static bool interrupted();
  /// Ends the process by SIGINT with its default action, after flushing stdout (call once the
  /// output is complete, when interrupted()).
  [[noreturn]] static void end_as_interrupted();

 private:
  struct sigaction old_ {};
  bool installed_ = false;
};

}  // namespace mamba::cli
