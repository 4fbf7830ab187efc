// Why a listen address cannot be bound: cpp-httplib's bind_to_port only answers false, so after a
// failed bind the address is resolved and bound again here to name the cause.
#pragma once

#include <string>

namespace mamba::server {

/// Socket options of the listening socket: SO_REUSEADDR (restart while old connections linger in
/// TIME_WAIT), not cpp-httplib's default SO_REUSEPORT, which lets a second server bind the same
/// port and silently share its connections.
void listen_socket_options(int sock);

/// The reason `host`:`port` (0 = any port) cannot be bound and listened on, e.g. "cannot resolve
/// the address: Name or service not known" or "Address already in use"; "reason unknown" when a
/// fresh attempt succeeds.
std::string bind_failure_reason(const std::string& host, int port);

}  // namespace mamba::server
