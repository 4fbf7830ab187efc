// Removing a half-written output directory when SIGINT / SIGTERM / SIGHUP / SIGQUIT ends
// mamba-cli (quantize).
#pragma once

#include <string>
#include <vector>

namespace mamba::cli {

/// While alive, SIGINT, SIGTERM, SIGHUP (terminal closed, SSH connection lost) and SIGQUIT
/// (Ctrl-\) first unlink `dir`/NAME for each of `files` and rmdir `dir`,
/// then die of the signal as before (default action re-raised: exit status 128 + signal). The
/// handler only calls async-signal-safe functions on paths prepared here in static buffers. A
/// signal whose disposition was SIG_IGN stays ignored. The destructor restores the previous
/// handlers. One instance at a time; paths longer than PATH_MAX are not cleaned up.
class SignalCleanup {
 public:
  SignalCleanup(const std::string& dir, const std::vector<std::string>& files);
  ~SignalCleanup();
  SignalCleanup(const SignalCleanup&) = delete;
  SignalCleanup& operator=(const SignalCleanup&) = delete;
};

}  // namespace mamba::cli
