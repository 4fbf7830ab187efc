// Route registration: TGI routes (routes_tgi.cc) and OpenAI routes (routes_openai.cc).
#pragma once

#include <httplib.h>

#include "server/context.h"

namespace mamba::server {

/// POST /generate, /generate_stream, /, /tokenize; GET /info, /health, /metrics.
void register_tgi_routes(httplib::Server& svr, ServerContext& ctx);
/// POST /v1/completions, /v1/chat/completions; GET /v1/models.
void register_openai_routes(httplib::Server& svr, ServerContext& ctx);

}  // namespace mamba::server
