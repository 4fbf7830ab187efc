// Lenient JSON for config files written by Python's json module.
//
// Python writes the non-standard bare tokens `Infinity`, `-Infinity` and `NaN` (e.g.
// `"time_step_limit": [0.0, Infinity]` in many published Mamba-2 configs), which nlohmann rejects.
// Outside string literals they are rewritten to the strings "Infinity", "-Infinity", "NaN" before
// parsing; json_to_double() then accepts numbers, those strings and HF 5.x's {"__float__": "..."}.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "mamba/status.h"

namespace mamba::io {

/// Parses `text` as JSON, accepting Python's bare Infinity/-Infinity/NaN. `source` names the file
/// in errors. Errors: kFormat with the parser's byte position.
Result<nlohmann::json> parse_json_lenient(const std::string& text, const std::string& source);

/// Reads a float field: a JSON number, "Infinity"/"-Infinity"/"NaN"/"inf" strings, or
/// {"__float__": "<one of those or a number string>"}. `what` names the field in errors (kFormat).
Result<double> json_to_double(const nlohmann::json& v, const std::string& what);

}  // namespace mamba::io
