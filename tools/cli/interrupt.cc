#include "cli/interrupt.h"

#include <csignal>
#include <cstdio>
#include <cstdlib>

namespace mamba::cli {
namespace {
volatile std::sig_atomic_t g_interrupted = 0;
extern "C" void on_sigint(int) { g_interrupted = 1; }
}  // namespace

CtrlC::CtrlC() {
  struct sigaction sa {};
  sa.sa_handler = on_sigint;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESETHAND;
  if (::sigaction(SIGINT, nullptr, &old_) == 0 && old_.sa_handler != SIG_IGN) installed_ = ::sigaction(SIGINT, &sa, nullptr) == 0;
}

CtrlC::~CtrlC() {
  if (installed_) ::sigaction(SIGINT, &old_, nullptr);
}

bool CtrlC::interrupted() { return g_interrupted != 0; }

void CtrlC::end_as_interrupted() {
  std::fflush(stdout);
  std::signal(SIGINT, SIG_DFL);
  std::raise(SIGINT);
  std::_Exit(130);  // not reached unless SIGINT is blocked
}

}  // namespace mamba::cli
