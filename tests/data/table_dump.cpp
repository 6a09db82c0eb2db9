// table_dump: a table (data/table_source.hpp) as tessera reads it, for tests/reference/check_table_source.py to
// compare with what `datasets` and pyarrow read.
//   table_dump DATA SPLIT OUT.json [COLUMN:KIND ...]     KIND: text, integer or image
// OUT.json: {"rows": N, "description": ..., "columns": [[name, kind, arrow type], ...],
//            "values": {COLUMN: [value per row]}}; an image value is [byte count, FNV-1a 64 of the bytes as hex].
// Exit 2 on bad arguments, 1 with the message when the table or a value is refused.
#include <cstdint>
#include <cstdio>
#include <exception>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "tessera/data/table_source.hpp"

namespace {

std::string fnv1a64(const std::vector<std::uint8_t>& bytes) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (std::uint8_t b : bytes) {
    h ^= b;
    h *= 0x100000001b3ULL;
  }
  char text[17];
  std::snprintf(text, sizeof(text), "%016llx", static_cast<unsigned long long>(h));
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  using tessera::data::ColumnKind;
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s DATA SPLIT OUT.json [COLUMN:KIND ...]\n", argv[0]);
    return 2;
  }
  try {
    const tessera::data::TableSource table(argv[1], argv[2]);
    nlohmann::json out;
    out["rows"] = table.rows();
    out["description"] = table.description();
    out["columns"] = nlohmann::json::array();
    const char* kinds[] = {"text", "integer", "image", "other"};
    for (const auto& c : table.columns()) out["columns"].push_back({c.name, kinds[static_cast<int>(c.kind)], c.type});
    out["values"] = nlohmann::json::object();
    for (int a = 4; a < argc; ++a) {
      const std::string arg = argv[a];
      const auto colon = arg.rfind(':');
      if (colon == std::string::npos) {
        std::fprintf(stderr, "%s: COLUMN:KIND expected\n", arg.c_str());
        return 2;
      }
      const std::string name = arg.substr(0, colon), kind = arg.substr(colon + 1);
      const ColumnKind k = kind == "text" ? ColumnKind::text : kind == "integer" ? ColumnKind::integer
                                                                                 : ColumnKind::image;
      const std::size_t c = table.column(name, k, name + "_column");
      auto& values = out["values"][name] = nlohmann::json::array();
      for (std::int64_t r = 0; r < table.rows(); ++r) {
        if (k == ColumnKind::text) {
          values.push_back(table.text(r, c));
        } else if (k == ColumnKind::integer) {
          values.push_back(table.integer(r, c));
        } else {
          const auto bytes = table.image_bytes(r, c);
          values.push_back({bytes.size(), fnv1a64(bytes)});
        }
      }
    }
    std::ofstream file(argv[3]);
    file << out.dump() << '\n';
    if (!file) throw std::runtime_error(std::string(argv[3]) + ": cannot write it");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return 1;
  }
  return 0;
}
