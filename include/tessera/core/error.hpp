#pragma once
// defines: tessera::Error and its kinds. Every error a user can cause is one of these,
// and its message names the offending value and what to do instead.
#include <stdexcept>
#include <string>

namespace tessera {

// Base of every error tessera throws on bad input or a failed run.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// A run-config key or value that is not allowed (message: key, value seen, what is allowed).
class ConfigError : public Error {
 public:
  using Error::Error;
};

// A file whose contents break its format (message: path, what rule broke, where).
class FormatError : public Error {
 public:
  using Error::Error;
};

}  // namespace tessera
