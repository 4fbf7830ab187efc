// Running out of memory in mamba-cli and mamba-server ends the program with an error line and status
// 2, as every other error, not with "terminate called after throwing ... std::bad_alloc" and an abort.
#pragma once

#include <string>

#include "mamba/status.h"
#include "mamba/tokenizer.h"

namespace mamba::tools {

/// Installs the std::terminate handler: when the exception that ended the program is a
/// std::bad_alloc (one thrown where it could not become an error — e.g. from the JSON library's
/// destructor freeing a half-parsed document, which allocates — so it reached std::terminate),
/// prints "error: out of memory" (with " while <what>" inside an OutOfMemoryContext) to stderr
/// and exits with status 2; otherwise prints the
/// exception's what() when there is one and aborts as the default handler does. Call once, first
/// thing in main(). The handler allocates nothing.
void exit_cleanly_when_out_of_memory();

/// Names what the program is doing for that handler, which then prints "error: out of memory while
/// <what>" (the bad_alloc that reaches it carries no such thing: it left a destructor, not a
/// loader's error path). For the load steps: the model, the tokenizer. At most 511 bytes of `what`
/// are kept (copied into a static buffer: nothing allocated); nullptr or "" clears it. Call from the
/// main thread; the handler reads it from whichever thread terminates.
void set_out_of_memory_context(const char* what);

/// f() with set_out_of_memory_context(what) for its duration (cleared after, also when it throws);
/// returns what f returns.
template <class F>
auto with_out_of_memory_context(const std::string& what, F&& f) {
  struct Clear {
    ~Clear() { set_out_of_memory_context(nullptr); }
  } clear;
  set_out_of_memory_context(what.c_str());
  return f();
}

/// Tokenizer::from_file(path) as the tools load it: an out-of-memory that reaches the terminate
/// handler names the file ("error: out of memory while loading the tokenizer PATH").
Result<Tokenizer> load_tokenizer(const std::string& path);

}  // namespace mamba::tools
