#include "cli/interrupt.h"

#include <csignal>
#include <cstdio>
#include <cstdlib>

namespace mamba::cli {
namespace {
volatile std::sig_atomic_t g_signal = 0;  ///< the first SIGINT / SIGTERM, 0 before one

extern "C" void on_stop_signal(int sig) {
  if (g_signal != 0) {  // the second one: die of it now (delivered when the handler returns)
    std::signal(sig, SIG_DFL);
    std::raise(sig);
    return;
  }
  g_signal = sig;
}

bool install(int sig, struct sigaction& old) {
  struct sigaction sa {};
  sa.sa_handler = on_stop_signal;
  sigemptyset(&sa.sa_mask);
  sigaddset(&sa.sa_mask, SIGINT);  // one handler at a time
  sigaddset(&sa.sa_mask, SIGTERM);
  sa.sa_flags = SA_RESETHAND;
  return ::sigaction(sig, nullptr, &old) == 0 && old.sa_handler != SIG_IGN && ::sigaction(sig, &sa, nullptr) == 0;
}
}  // namespace

Interrupt::Interrupt() {
  int_installed_ = install(SIGINT, old_int_);
  term_installed_ = install(SIGTERM, old_term_);
}

Interrupt::~Interrupt() {
  if (int_installed_) ::sigaction(SIGINT, &old_int_, nullptr);
  if (term_installed_) ::sigaction(SIGTERM, &old_term_, nullptr);
}

bool Interrupt::interrupted() { return g_signal != 0; }

const char* Interrupt::reason() {
  if (g_signal == SIGINT) return "Ctrl-C";
  if (g_signal == SIGTERM) return "SIGTERM";
  return "";
}

void Interrupt::end_as_interrupted() {
  const int sig = g_signal != 0 ? g_signal : SIGINT;
  std::fflush(stdout);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
  std::_Exit(128 + sig);  // not reached unless the signal is blocked
}

}  // namespace mamba::cli
