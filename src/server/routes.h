// Route registration: TGI routes (routes_tgi.cc), OpenAI routes (routes_openai.cc), and the
// tokenizer's routes in TGI's and vLLM's shapes (routes_tokenize.cc).
#pragma once

#include <httplib.h>

#include "server/context.h"

namespace mamba::server {

/// POST /generate, /generate_stream, /; GET /info, /health, /metrics.
void register_tgi_routes(httplib::Server& svr, ServerContext& ctx);
/// POST /v1/completions, /v1/chat/completions; GET /v1/models.
void register_openai_routes(httplib::Server& svr, ServerContext& ctx);
/// POST /tokenize (TGI's `inputs` or vLLM's `prompt` / `messages`), POST /detokenize (vLLM's).
void register_tokenize_routes(httplib::Server& svr, ServerContext& ctx);

}  // namespace mamba::server
