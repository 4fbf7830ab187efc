#include "server/route_table.h"

#include <string_view>
#include <utility>

namespace mamba::server {

namespace {
/// cpp-httplib matches a route's pattern as a regular expression: the literal path with its
/// metacharacters escaped (a model id such as "org/mamba-2.8b" in /v1/models/{id}).
std::string regex_literal(const std::string& path) {
  std::string out;
  for (char c : path) {
    if (std::string_view("\\^$.|?*+()[]{}").find(c) != std::string_view::npos) out += '\\';
    out += c;
  }
  return out;
}
}  // namespace

void RouteTable::add(httplib::Server& svr, const std::string& method, const std::string& path, httplib::Server::Handler handler) {
  auto& m = methods_[path];
  if (method == "GET") {
    svr.Get(regex_literal(path), std::move(handler));
    m.insert("GET");
    m.insert("HEAD");
  } else {
    post_handlers_[path] = handler;
    svr.Post(regex_literal(path), std::move(handler));
    m.insert("POST");
  }
}

std::string RouteTable::allowed(const std::string& path) const {
  auto it = methods_.find(path);
  if (it == methods_.end()) return "";
  std::string allow;
  for (const auto& m : it->second) {
    if (!allow.empty()) allow += ", ";
    allow += m;
  }
  return allow;
}

std::string RouteTable::disallowed(const std::string& method, const std::string& path) const {
  auto it = methods_.find(path);
  if (it == methods_.end() || it->second.count(method) != 0) return "";
  return allowed(path);
}

const httplib::Server::Handler* RouteTable::post_handler(const std::string& path) const {
  auto it = post_handlers_.find(path);
  return it == post_handlers_.end() ? nullptr : &it->second;
}

}  // namespace mamba::server
