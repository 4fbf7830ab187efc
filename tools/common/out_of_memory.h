// Running out of memory in mamba-cli and mamba-server ends the program with an error line and status
// 2, as every other error, not with "terminate called after throwing ... std::bad_alloc" and an abort.
#pragma once

namespace mamba::tools {

/// Installs the std::terminate handler: when the exception that ended the program is a
/// std::bad_alloc (one thrown where it could not become an error — e.g. from the JSON library's
/// destructor freeing a half-parsed document, which allocates — so it reached std::terminate),
/// prints "error: out of memory" to stderr and exits with status 2; otherwise prints the
/// exception's what() when there is one and aborts as the default handler does. Call once, first
/// thing in main(). The handler allocates nothing.
void exit_cleanly_when_out_of_memory();

}  // namespace mamba::tools
