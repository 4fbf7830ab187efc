#include "mamba/status.h"

namespace mamba {

const char* error_code_name(ErrorCode code) {
  switch (code) {
    case ErrorCode::kInvalidArgument: return "invalid_argument";
    case ErrorCode::kNotFound: return "not_found";
    case ErrorCode::kIo: return "io";
    case ErrorCode::kFormat: return "format";
    case ErrorCode::kShape: return "shape";
    case ErrorCode::kUnsupported: return "unsupported";
    case ErrorCode::kNumerical: return "numerical";
    case ErrorCode::kInternal: return "internal";
  }
  return "unknown";
}

}  // namespace mamba
