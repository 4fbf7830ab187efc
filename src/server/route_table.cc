#include "server/route_table.h"

#include <utility>

namespace mamba::server {

void RouteTable::add(httplib::Server& svr, const std::string& method, const std::string& path, httplib::Server::Handler handler) {
  auto& m = methods_[path];
  if (method == "GET") {
    svr.Get(path, std::move(handler));
    m.insert("GET");
    m.insert("HEAD");
  } else {
    post_handlers_[path] = handler;
    svr.Post(path, std::move(handler));
    m.insert("POST");
  }
}

std::string RouteTable::disallowed(const std::string& method, const std::string& path) const {
  auto it = methods_.find(path);
  if (it == methods_.end() || it->second.count(method) != 0) return "";
  std::string allow;
  for (const auto& m : it->second) {
    if (!allow.empty()) allow += ", ";
    allow += m;
  }
  return allow;
}

const httplib::Server::Handler* RouteTable::post_handler(const std::string& path) const {
  auto it = post_handlers_.find(path);
  return it == post_handlers_.end() ? nullptr : &it->second;
}

}  // namespace mamba::server
