// Rules for command-line values shared by mamba-cli, mamba-server and the bench programs (CLI11):
// non-empty strings, numbers read as plain decimal, and thread counts.
//
// CLI11 2.1 converts integers with strtoll(…, base 0): "010" is octal 8 and "0x10" is 16, so
// `-n 010` silently generated 8 tokens; and it reads an empty value ("") as 0, so `--temp ""`
// silently meant greedy. strict_numbers() puts one transform in front of every numeric option's
// validators (before its range checks) that accepts only what a user means as a decimal number.
#pragma once

#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <string>
#include <system_error>

#include "mamba/model.h"

#include "mamba/thread_limit.h"

namespace mamba::cli {

/// CLI11 validator: the value must not be empty (`-m ""` would otherwise quietly mean "the
/// default"). `what` says what a valid value is, e.g. "a model directory or HF repo id ORG/NAME".
inline CLI::Validator non_empty(const std::string& what) {
  return CLI::Validator([what](std::string& v) { return v.empty() ? "must not be empty: expected " + what : std::string(); },
                        "NONEMPTY");
}

/// The decimal-integer rule: optional sign, then digits; leading zeros and a '+' dropped ("010" →
/// "10", "+1" → "1": the range checks after it read the digits). Returns an error message for
/// anything else ("" included), else "" after normalising `v`.
inline std::string decimal_integer(std::string& v) {
  std::size_t i = v.empty() || (v[0] != '+' && v[0] != '-') ? 0 : 1;
  const std::size_t digits = i;
  for (; i < v.size(); ++i)
    if (v[i] < '0' || v[i] > '9') break;
  if (v.size() == digits || i != v.size()) return "expected a decimal integer, got '" + v + "'";
  std::size_t z = digits;
  while (z + 1 < v.size() && v[z] == '0') ++z;
  v = (v[0] == '-' ? std::string("-") : std::string()) + v.substr(z);
  return {};
}

/// The decimal-number rule for floating-point options: all of `v` one decimal number as
/// std::from_chars reads it (an optional leading '+' allowed; no hexadecimal "0x1p3", not empty).
inline std::string decimal_float(std::string& v) {
  const char* b = v.data() + (!v.empty() && v[0] == '+' ? 1 : 0);
  const char* e = v.data() + v.size();
  double x = 0;
  const auto [p, ec] = std::from_chars(b, e, x, std::chars_format::general);
  if (b == e || p != e || (ec != std::errc() && ec != std::errc::result_out_of_range))
    return "expected a decimal number, got '" + v + "'";
  return {};
}

/// CLI11 validator of a 32-bit float option (the sampling parameters): a decimal number beyond
/// ±3.4e38 is refused as typed — it would become ±inf and be reported as "temperature = inf" — and
/// so is a non-zero one below 7.1e-46, which would become 0 (--temp 1e-300 decoded greedily).
/// "inf" and "nan" themselves pass (the option's own range check names them).
inline CLI::Validator float32_range() {
  return CLI::Validator(
      [](std::string& v) {
        const double x = std::strtod(v.c_str(), nullptr);
        const bool typed_inf = v.find_first_of("iInN") != std::string::npos;
        if (!typed_inf && std::fabs(x) > static_cast<double>(std::numeric_limits<float>::max()))
          return "expected a number of magnitude at most 3.4e38 (a 32-bit float), got '" + v + "'";
        // As the server: a non-zero value that a 32-bit float rounds to 0 is named, not taken as 0.
        if (!typed_inf && x != 0.0 && static_cast<float>(x) == 0.0f)
          return "'" + v + "' is below 7.1e-46 in magnitude, which a 32-bit float rounds to 0 (give 0 itself, or a larger value)";
        return std::string();
      },
      "FLOAT");
}

/// Applies decimal_integer / decimal_float to every option of `app` and of its subcommands whose
/// CLI11 type is INT / UINT / FLOAT (lists: to each item). Call once every option is added, before
/// parse(). Errors then read "--top-k: expected a decimal integer, got 'abc'".
inline void strict_numbers(CLI::App& app) {
  for (CLI::Option* opt : app.get_options()) {
    const std::string type = opt->get_type_name();
    const std::string base = type.substr(0, type.find(':'));
    if ((base == "INT" || base == "UINT") && opt->check_lname("threads")) {
      // `perplexity -t tokenizer.json` (tokenize's -t is its tokenizer): a value naming a file or
      // repo is pointed at --tokenizer.
      opt->transform(CLI::Validator(
          [](std::string& v) {
            std::string problem = decimal_integer(v);
            // A letter or a '/' ("tok.json", "org/name"), not a decimal point ("1.0").
            if (!problem.empty() && (v.find('/') != std::string::npos ||
                                     std::any_of(v.begin(), v.end(), [](unsigned char c) { return std::isalpha(c) != 0; })))
              problem += " (a thread count; a tokenizer file or repo goes in --tokenizer)";
            return problem;
          },
          "", "decimal integer"));
    } else if (base == "INT" || base == "UINT") {
      opt->transform(CLI::Validator(decimal_integer, "", "decimal integer"));
    }
    else if (base == "FLOAT")
      opt->transform(CLI::Validator(decimal_float, "", "decimal number"));
  }
  for (CLI::App* sub : app.get_subcommands([](CLI::App*) { return true; })) strict_numbers(*sub);
}

/// CLI11 validator: a decimal integer in [lo, hi], else "expected an integer from lo<lo_note> to hi,
/// got V" (the value as typed).
inline CLI::Validator decimal_int_in(long long lo, long long hi, const std::string& lo_note, const std::string& type_name) {
  return CLI::Validator(
      [lo, hi, lo_note](std::string& v) {
        long long n = lo - 1;
        const auto [p, ec] = std::from_chars(v.data(), v.data() + v.size(), n);
        if (ec == std::errc() && p == v.data() + v.size() && n >= lo && n <= hi) return std::string();
        return fmt::format("expected an integer from {}{} to {}, got {}", lo, lo_note, hi, v);
      },
      type_name);
}

/// CLI11 validator of a thread count: a decimal integer in [0, kMaxThreads] (0 = all hardware
/// threads). Checked at parse time, before any model is loaded (100000 threads crashed OpenMP).
inline CLI::Validator thread_count() {
  return decimal_int_in(0, kMaxThreads, " (all hardware threads)", fmt::format("INT in [0, {}]", kMaxThreads));
}

/// CLI11 validator of an int option that must not be negative: a decimal integer in [0, INT_MAX],
/// worded like thread_count ("expected an integer from 0 to 2147483647, got -3"; CLI11's own
/// NonNegativeNumber printed its bound as a 310-digit double, and "Could not convert" past INT_MAX).
inline CLI::Validator non_negative_int() { return decimal_int_in(0, std::numeric_limits<int>::max(), "", "INT >= 0"); }

/// The same for an int option that must be at least 1 ("expected an integer from 1 to 2147483647, got 0").
inline CLI::Validator positive_int() { return decimal_int_in(1, std::numeric_limits<int>::max(), "", "INT >= 1"); }

/// CLI11 validator of --precision (mamba-cli, mamba-server, the benches), attached with ->transform:
/// what mamba::parse_precision accepts (auto, exact, bf16 or int8, any case), rewritten to its
/// canonical lower-case name; else "expected auto, exact, bf16 or int8, got 'V'" (CLI11's IsMember
/// printed an empty value as "--precision:  not in {exact,bf16,int8}").
inline CLI::Validator precision_tier() {
  return CLI::Validator(
      [](std::string& v) {
        const Result<Precision> p = parse_precision(v);
        if (!p.ok()) return fmt::format("expected auto, exact, bf16 or int8, got '{}'", v);
        v = precision_name(*p);
        return std::string();
      },
      "{auto,exact,bf16,int8}");
}

/// --precision's help, one text for mamba-cli run / perplexity and mamba-server.
inline constexpr const char* kPrecisionHelp =
    "projection arithmetic, any case: auto (default: bf16 when every projection is stored in bf16, the CPU target has "
    "AVX-512 BF16 and the tier's copy fits in available memory, else exact; the log says which and why), "
    "exact (fp32 activations, the tier checked against HF transformers), bf16 (bf16 activations, AVX-512 BF16 "
    "dot products) or int8 (q8/q4 checkpoints: 8-bit activations, AVX-512 VNNI); README §Precision";

}  // namespace mamba::cli
