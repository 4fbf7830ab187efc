#include "cli/signal_cleanup.h"

#include <climits>
#include <csignal>
#include <cstring>
#include <unistd.h>

namespace mamba::cli {
namespace {

constexpr int kMaxPaths = 32;
// Ctrl-C, kill, the terminal closing / SSH connection dropping, Ctrl-\.
constexpr int kSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};
constexpr int kNumSignals = sizeof(kSignals) / sizeof(kSignals[0]);

// Files first, the directory last. Written before the handlers are installed; g_count is the
// only thing the handler reads that changes while it may run.
char g_paths[kMaxPaths][PATH_MAX];
volatile std::sig_atomic_t g_count = 0;
struct sigaction g_old[kNumSignals];
bool g_installed[kNumSignals] = {};

extern "C" void on_signal(int sig) {
  const int n = g_count;
  for (int i = 0; i + 1 < n; ++i) ::unlink(g_paths[i]);
  if (n > 0) ::rmdir(g_paths[n - 1]);
  std::signal(sig, SIG_DFL);
  std::raise(sig);  // delivered when the handler returns: the process ends as it would have
}

bool copy_path(char* dst, const std::string& src) {
  if (src.size() >= PATH_MAX) return false;
  std::memcpy(dst, src.c_str(), src.size() + 1);
  return true;
}

}  // namespace

SignalCleanup::SignalCleanup(const std::string& dir, const std::vector<std::string>& files) {
  g_count = 0;
  int n = 0;
  bool ok = files.size() + 1 <= static_cast<std::size_t>(kMaxPaths);
  for (std::size_t i = 0; ok && i < files.size(); ++i) ok = copy_path(g_paths[n++], dir + "/" + files[i]);
  if (ok) ok = copy_path(g_paths[n++], dir);
  if (!ok) return;  // nothing to clean up on a signal; the normal error paths still remove it
  g_count = n;
  for (int s = 0; s < kNumSignals; ++s) {
    struct sigaction old {};
    if (sigaction(kSignals[s], nullptr, &old) != 0 || old.sa_handler == SIG_IGN) continue;
    struct sigaction sa {};
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    for (int other : kSignals) sigaddset(&sa.sa_mask, other);  // one cleanup at a time
    g_installed[s] = sigaction(kSignals[s], &sa, &g_old[s]) == 0;
  }
}

SignalCleanup::~SignalCleanup() {
  for (int s = 0; s < kNumSignals; ++s) {
    if (g_installed[s]) sigaction(kSignals[s], &g_old[s], nullptr);
    g_installed[s] = false;
  }
  g_count = 0;
}

}  // namespace mamba::cli
