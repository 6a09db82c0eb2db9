// lab_order_dump: tessera's side of tests/reference/check_lab_order.py. Reads one request per line on stdin and
// writes one JSON line per request on stdout, in order:
//   numpy SEED N                            -> {"rows": numpy_permutation(SEED, N)}
//   split N TEST_SIZE SEED                  -> {"train": [...], "test": [...]}   (numpy_train_test_split)
//   randperm N SEED                         -> {"rows": torch_randperm(N, SEED)}
//   loader N SEED BATCH DROP EPOCHS         -> {"epochs": [[...], ...]}   (TorchShuffledEpochs, EPOCHS of them)
//   loader_epoch N SEED EPOCH BATCH DROP    -> {"rows": dataloader_epoch_order(N, SEED, EPOCH, BATCH, DROP)}
//   dist N W RANK SEED EPOCH SHUFFLE DROP   -> {"rows": distributed_sampler_indices(...)}
// DROP and SHUFFLE are 0 or 1; TEST_SIZE is a decimal that round-trips a double (Python's repr). A request the
// library refuses answers {"error": "<ConfigError message>"}. Exit 2 on a malformed request line.
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/data/lab_order.hpp"

namespace {

namespace d = tessera::data;

struct BadRequest {
  std::string why;
};

std::string next_word(std::istringstream& in, const char* what) {
  std::string w;
  if (!(in >> w)) throw BadRequest{std::string("missing ") + what};
  return w;
}

std::int64_t int_arg(std::istringstream& in, const char* what) {
  const std::string w = next_word(in, what);
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(w.c_str(), &end, 10);
  if (errno != 0 || end != w.c_str() + w.size()) throw BadRequest{std::string(what) + " is not an int64: " + w};
  return v;
}

std::uint64_t seed_arg(std::istringstream& in) {
  const std::string w = next_word(in, "SEED");
  errno = 0;
  char* end = nullptr;
  const unsigned long long v = std::strtoull(w.c_str(), &end, 10);
  if (w.empty() || w[0] == '-' || errno != 0 || end != w.c_str() + w.size())
    throw BadRequest{"SEED is not a uint64: " + w};
  return v;
}

double double_arg(std::istringstream& in, const char* what) {
  const std::string w = next_word(in, what);
  char* end = nullptr;
  const double v = std::strtod(w.c_str(), &end);
  if (end != w.c_str() + w.size()) throw BadRequest{std::string(what) + " is not a number: " + w};
  return v;
}

bool flag_arg(std::istringstream& in, const char* what) {
  const std::string w = next_word(in, what);
  if (w != "0" && w != "1") throw BadRequest{std::string(what) + " must be 0 or 1, not " + w};
  return w == "1";
}

void put_rows(std::string& out, const std::vector<std::int64_t>& rows) {
  out += '[';
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (i) out += ',';
    out += std::to_string(rows[i]);
  }
  out += ']';
}

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (const char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

// One request line -> its JSON answer (without the newline).
std::string answer(const std::string& line) {
  std::istringstream in(line);
  const std::string kind = next_word(in, "request kind");
  std::string out;
  if (kind == "numpy") {
    const auto seed = seed_arg(in);
    const auto n = int_arg(in, "N");
    out = "{\"rows\":";
    put_rows(out, d::numpy_permutation(seed, n));
  } else if (kind == "split") {
    const auto n = int_arg(in, "N");
    const auto test_size = double_arg(in, "TEST_SIZE");
    const auto seed = seed_arg(in);
    const auto split = d::numpy_train_test_split(n, test_size, seed);
    out = "{\"train\":";
    put_rows(out, split.train);
    out += ",\"test\":";
    put_rows(out, split.test);
  } else if (kind == "randperm") {
    const auto n = int_arg(in, "N");
    const auto seed = seed_arg(in);
    out = "{\"rows\":";
    put_rows(out, d::torch_randperm(n, seed));
  } else if (kind == "loader") {
    const auto n = int_arg(in, "N");
    const auto seed = seed_arg(in);
    const auto batch = int_arg(in, "BATCH");
    const bool drop = flag_arg(in, "DROP");
    const auto epochs = int_arg(in, "EPOCHS");
    d::TorchShuffledEpochs loader(n, seed, batch, drop);
    out = "{\"epochs\":[";
    for (std::int64_t e = 0; e < epochs; ++e) {
      if (e) out += ',';
      put_rows(out, loader.next_epoch());
    }
    out += ']';
  } else if (kind == "loader_epoch") {
    const auto n = int_arg(in, "N");
    const auto seed = seed_arg(in);
    const auto epoch = int_arg(in, "EPOCH");
    const auto batch = int_arg(in, "BATCH");
    const bool drop = flag_arg(in, "DROP");
    out = "{\"rows\":";
    put_rows(out, d::dataloader_epoch_order(n, seed, epoch, batch, drop));
  } else if (kind == "dist") {
    const auto n = int_arg(in, "N");
    const auto w = int_arg(in, "W");
    const auto rank = int_arg(in, "RANK");
    const auto seed = seed_arg(in);
    const auto epoch = int_arg(in, "EPOCH");
    const bool shuffle = flag_arg(in, "SHUFFLE");
    const bool drop = flag_arg(in, "DROP");
    out = "{\"rows\":";
    put_rows(out, d::distributed_sampler_indices(n, w, rank, seed, epoch, shuffle, drop));
  } else {
    throw BadRequest{"unknown request kind " + kind};
  }
  std::string extra;
  if (in >> extra) throw BadRequest{"trailing word " + extra};
  return out + '}';
}

}  // namespace

int main() {
  std::ios::sync_with_stdio(false);
  std::string line;
  std::int64_t number = 0;
  while (std::getline(std::cin, line)) {
    ++number;
    if (line.empty()) continue;
    try {
      std::cout << answer(line) << '\n';
    } catch (const BadRequest& e) {
      std::cerr << "lab_order_dump: line " << number << ": " << e.why << ": " << line << '\n';
      return 2;
    } catch (const tessera::ConfigError& e) {
      std::cout << "{\"error\":" << json_string(e.what()) << "}\n";
    }
  }
  std::cout.flush();
  return 0;
}
