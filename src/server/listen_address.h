// Why a listen address cannot be bound: cpp-httplib's bind_to_port only answers false, so after a
// failed bind the address is resolved and bound again here to name the cause.
#pragma once

#include <optional>
#include <string>

namespace mamba::server {

/// Socket options of the listening socket: SO_REUSEADDR (restart while old connections linger in
/// TIME_WAIT), not cpp-httplib's default SO_REUSEPORT, which lets a second server bind the same
/// port and silently share its connections.
void listen_socket_options(int sock);

/// Why `host`:`port` (0 = any port) cannot be bound and listened on now, e.g. "cannot resolve the
/// address: Name or service not known" or "Address already in use"; nullopt when a trial socket
/// (bound with listen_socket_options, then closed) succeeds. mamba-server asks before its model
/// load, so that a taken port is reported in a second, not after minutes of loading.
std::optional<std::string> listen_address_unavailable(const std::string& host, int port);

/// listen_address_unavailable's reason, or "reason unknown (a second attempt succeeded)": for the
/// message after cpp-httplib's bind_to_port, which only answers false.
std::string bind_failure_reason(const std::string& host, int port);

/// "http://HOST:PORT", an IPv6 literal in brackets (http://[::1]:8080) so the URL is usable; a host
/// already in brackets is kept as given. For the start lines of mamba-server and the log.
std::string listen_url(const std::string& host, int port);

}  // namespace mamba::server
