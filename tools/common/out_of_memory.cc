#include "common/out_of_memory.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>

namespace mamba::tools {

namespace {

void write_stderr(const char* s) { (void)!::write(STDERR_FILENO, s, std::strlen(s)); }

[[noreturn]] void on_terminate() {
  if (std::exception_ptr ep = std::current_exception()) {
    try {
      std::rethrow_exception(ep);
    } catch (const std::bad_alloc&) {
      std::fflush(stdout);  // what was written so far (e.g. generated text) is kept
      write_stderr("error: out of memory\n");
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

}  // namespace mamba::tools
