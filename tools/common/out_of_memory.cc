#include "common/out_of_memory.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>

namespace mamba::tools {

namespace {

void write_stderr(const char* s) { (void)!::write(STDERR_FILENO, s, std::strlen(s)); }

// set_out_of_memory_context's text: written by the main thread, read by the handler once `set`
// says it is complete.
char g_context[512];
std::atomic<bool> g_context_set{false};

[[noreturn]] void on_terminate() {
  if (std::exception_ptr ep = std::current_exception()) {
    try {
      std::rethrow_exception(ep);
    } catch (const std::bad_alloc&) {
      std::fflush(stdout);  // what was written so far (e.g. generated text) is kept
      write_stderr("error: out of memory");
      if (g_context_set.load(std::memory_order_acquire)) {
        write_stderr(" while ");
        write_stderr(g_context);
      }
      write_stderr("\n");
      std::_Exit(2);
    } catch (const std::exception& e) {
      write_stderr("internal error: uncaught exception: ");
      write_stderr(e.what());
      write_stderr("\n");
    } catch (...) {
      write_stderr("internal error: uncaught exception\n");
    }
  }
  std::abort();
}

}  // namespace

void exit_cleanly_when_out_of_memory() { std::set_terminate(on_terminate); }

void set_out_of_memory_context(const char* what) {
  g_context_set.store(false, std::memory_order_release);
  if (what == nullptr || *what == '\0') return;
  std::strncpy(g_context, what, sizeof g_context - 1);
  g_context[sizeof g_context - 1] = '\0';
  g_context_set.store(true, std::memory_order_release);
}

Result<Tokenizer> load_tokenizer(const std::string& path) {
  return with_out_of_memory_context("loading the tokenizer " + path, [&] { return Tokenizer::from_file(path); });
}

}  // namespace mamba::tools
