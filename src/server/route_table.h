// RouteTable: which methods each literal route path accepts, so a known path asked with another
// method gets 405 Method Not Allowed (with an Allow header) rather than cpp-httplib's 404.
#pragma once

#include <map>
#include <set>
#include <string>

#include <httplib.h>

namespace mamba::server {

class RouteTable {
 public:
  /// Registers `handler` on `svr` for `method` ("GET" or "POST") at the literal `path`, and
  /// records the pair. A GET route also answers HEAD (as cpp-httplib does).
  void add(httplib::Server& svr, const std::string& method, const std::string& path, httplib::Server::Handler handler);

  /// The Allow header value for `path` when it is a known path that does not accept `method`
  /// (e.g. "POST" for GET /generate); "" when the method is allowed or the path is unknown.
  std::string disallowed(const std::string& method, const std::string& path) const;

  /// The methods `path` accepts, as an Allow header lists them ("GET, HEAD", "POST"); "" for an
  /// unknown path.
  std::string allowed(const std::string& path) const;

  /// The handler registered for POST `path`, or nullptr (for requests cpp-httplib refused before
  /// routing that the server still wants to serve; see http_server.cc's error handler).
  const httplib::Server::Handler* post_handler(const std::string& path) const;

 private:
  std::map<std::string, std::set<std::string>> methods_;
  std::map<std::string, httplib::Server::Handler> post_handlers_;
};

}  // namespace mamba::server
