// tests: io/hub_cache.hpp: repo ids, the cache dir's environment precedence, snapshots by branch, tag and hash,
// every miss and its message, and model_dir= / revision= through parse_run_config.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "tessera/config/run_config.hpp"
#include "tessera/core/error.hpp"
#include "tessera/io/hub_cache.hpp"

namespace {

namespace fs = std::filesystem;
using tessera::ConfigError;
using tessera::io::HubCacheDir;
using tessera::io::hub_cache_dir;
using tessera::io::looks_like_repo_id;
using tessera::io::resolve_hub_snapshot;
using tessera::io::resolve_model_dir;

using Env = std::map<std::string, std::optional<std::string>>;

const std::string kMain(40, 'a');  // commit hashes: 40 lowercase hex digits
const std::string kV1(40, 'b');
const std::string kPr(40, 'c');

// Sets (or, with nullopt, unsets) the variables the cache dir depends on, and puts them back at the end.
class EnvScope {
 public:
  explicit EnvScope(const Env& values) {
    for (const char* name : {"HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME", "HOME"}) {
      const char* old = std::getenv(name);
      saved_[name] = old ? std::optional<std::string>(old) : std::nullopt;
      if (name != std::string("HOME")) ::unsetenv(name);
    }
    for (const auto& [name, value] : values) set(name, value);
  }
  ~EnvScope() {
    for (const auto& [name, value] : saved_) set(name, value);
  }
  EnvScope(const EnvScope&) = delete;
  EnvScope& operator=(const EnvScope&) = delete;

  static void set(const std::string& name, const std::optional<std::string>& value) {
    if (value) ::setenv(name.c_str(), value->c_str(), 1);
    else ::unsetenv(name.c_str());
  }

 private:
  std::map<std::string, std::optional<std::string>> saved_;
};

// A hub cache laid out as huggingface_hub writes it: blobs/ holding the contents, snapshots/HASH/ of relative links
// into blobs/, refs/NAME holding a commit hash (no newline), removed at the end of the test.
class Cache {
 public:
  Cache() : root_(fs::temp_directory_path() / ("tessera_hub_cache_test_" + std::to_string(std::random_device{}()))) {
    fs::create_directories(dir());
  }
  ~Cache() { fs::remove_all(root_); }
  Cache(const Cache&) = delete;
  Cache& operator=(const Cache&) = delete;

  fs::path root() const { return root_; }
  fs::path dir() const { return root_ / "hub"; }
  fs::path repo(const std::string& folder) const { return dir() / folder; }
  HubCacheDir location() const { return {dir(), "HF_HUB_CACHE=" + dir().string()}; }

  // Files "name" or "sub/name" with their contents, linked from snapshots/commit.
  void add_snapshot(const std::string& folder, const std::string& commit,
                    const std::map<std::string, std::string>& files) const {
    for (const auto& [name, text] : files) {
      const std::string blob = std::to_string(std::hash<std::string>{}(name + text));
      fs::create_directories(repo(folder) / "blobs");
      std::ofstream(repo(folder) / "blobs" / blob) << text;
      const fs::path link = repo(folder) / "snapshots" / commit / name;
      fs::create_directories(link.parent_path());
      fs::path up;  // from the link's directory back to the repo folder
      const fs::path parent = fs::path(name).parent_path();
      for (auto it = parent.begin(); it != parent.end(); ++it) up /= "..";
      fs::create_symlink(fs::path("..") / ".." / up / "blobs" / blob, link);
    }
  }
  void add_ref(const std::string& folder, const std::string& name, const std::string& text) const {
    fs::create_directories((repo(folder) / "refs" / name).parent_path());
    std::ofstream(repo(folder) / "refs" / name, std::ios::binary) << text;
  }

 private:
  fs::path root_;
};

std::string read(const fs::path& file) {
  std::ifstream in(file);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// Salesforce/blip2-opt-2.7b with main, the tag v1 and the pull-request ref refs/pr/1, each its own commit.
void lay_out_blip2(const Cache& cache) {
  const std::string folder = "models--Salesforce--blip2-opt-2.7b";
  cache.add_snapshot(folder, kMain, {{"config.json", "{\"main\": 1}"}, {"sub/tokenizer.json", "{}"}});
  cache.add_snapshot(folder, kV1, {{"config.json", "{\"v1\": 1}"}});
  cache.add_snapshot(folder, kPr, {{"config.json", "{\"pr\": 1}"}});
  cache.add_ref(folder, "main", kMain);
  cache.add_ref(folder, "v1", kV1);
  cache.add_ref(folder, "refs/pr/1", kPr);
}

}  // namespace

TEST_CASE("looks_like_repo_id follows huggingface_hub's validate_repo_id", "[hub_cache]") {
  for (const std::string_view id : {"gpt2", "openlm-research/open_llama_7b", "Salesforce/blip2-opt-2.7b", "a/b",
                                    "_x_/y_", "Foo-BAR_foo.bar123", "1/2", "a-b.c_d/e.f-g"}) {
    INFO(id);
    CHECK(looks_like_repo_id(id));
  }
  CHECK(looks_like_repo_id(std::string(96, 'a') + "/" + std::string(96, 'b')));
  for (const std::string& id :
       {std::string(""), std::string("/x"), std::string("x/"), std::string("a/b/c"), std::string("-a/b"),
        std::string("a/b-"), std::string(".a"), std::string("a."), std::string("a/.b"), std::string("foo--bar"),
        std::string("a..b"), std::string("foo.git"), std::string("a b"), std::string("caf\xc3\xa9"),
        std::string("a/b:c"), std::string(97, 'a'), std::string("org/") + std::string(97, 'a'), std::string("./m"),
        std::string("../m"), std::string("/abs/path")}) {
    INFO(id);
    CHECK_FALSE(looks_like_repo_id(id));
  }
}

TEST_CASE("the hub cache dir follows HF_HUB_CACHE, HUGGINGFACE_HUB_CACHE, HF_HOME, XDG_CACHE_HOME, then HOME",
          "[hub_cache]") {
  {
    EnvScope env(Env{{"HF_HUB_CACHE", "/a/hub"}, {"HUGGINGFACE_HUB_CACHE", "/legacy"}, {"HF_HOME", "/h"}});
    CHECK(hub_cache_dir() == "/a/hub");
    CHECK(tessera::io::hub_cache_location().origin == "HF_HUB_CACHE=/a/hub");
  }
  {
    EnvScope env(Env{{"HUGGINGFACE_HUB_CACHE", "/legacy"}, {"HF_HOME", "/h"}, {"XDG_CACHE_HOME", "/x"}});
    CHECK(hub_cache_dir() == "/legacy");
  }
  {
    EnvScope env(Env{{"HF_HOME", "/h"}, {"XDG_CACHE_HOME", "/x"}});
    CHECK(hub_cache_dir() == "/h/hub");
  }
  {
    EnvScope env(Env{{"XDG_CACHE_HOME", "/x/"}, {"HOME", "/home/u"}});
    CHECK(hub_cache_dir() == "/x/huggingface/hub");
  }
  {
    EnvScope env(Env{{"HOME", "/home/u/"}});  // expanduser strips the home's trailing slash
    CHECK(hub_cache_dir() == "/home/u/.cache/huggingface/hub");
  }
  SECTION("~ and $VARS are expanded, unknown variables stay, an empty setting is the empty path") {
    EnvScope env(Env{{"HOME", "/home/u"}, {"HF_HOME", "~/hf"}});
    CHECK(hub_cache_dir() == "/home/u/hf/hub");
    EnvScope::set("SCRATCH_FOR_TESSERA_TEST", "/scratch");
    EnvScope::set("HF_HUB_CACHE", "$SCRATCH_FOR_TESSERA_TEST/hub:${SCRATCH_FOR_TESSERA_TEST}:$NO_SUCH_VAR_TESSERA");
    CHECK(hub_cache_dir() == "/scratch/hub:/scratch:$NO_SUCH_VAR_TESSERA");
    ::unsetenv("SCRATCH_FOR_TESSERA_TEST");
    EnvScope::set("HF_HUB_CACHE", std::nullopt);
    EnvScope::set("HF_HOME", "");  // os.getenv returns "", and os.path.join("", "hub") is "hub"
    CHECK(hub_cache_dir() == "hub");
  }
}

TEST_CASE("a hub id resolves to its snapshot by branch, tag, pull-request ref and commit hash", "[hub_cache]") {
  const Cache cache;
  lay_out_blip2(cache);
  const fs::path repo = fs::canonical(cache.dir()) / "models--Salesforce--blip2-opt-2.7b";
  const auto at = [&](std::string_view revision) {
    return resolve_hub_snapshot("Salesforce/blip2-opt-2.7b", revision, cache.location());
  };
  CHECK(at("main") == repo / "snapshots" / kMain);
  CHECK(read(at("main") / "config.json") == "{\"main\": 1}");
  CHECK(read(at("main") / "sub" / "tokenizer.json") == "{}");
  CHECK(at("v1") == repo / "snapshots" / kV1);
  CHECK(at("refs/pr/1") == repo / "snapshots" / kPr);
  // A commit hash is the commit itself, with or without a ref naming it.
  fs::remove_all(repo / "refs");
  CHECK(at(kV1) == repo / "snapshots" / kV1);
}

TEST_CASE("the cache dir is made absolute with its links resolved, as Path.resolve does", "[hub_cache]") {
  const Cache cache;
  lay_out_blip2(cache);
  const fs::path real = fs::canonical(cache.dir());
  fs::create_directory_symlink(cache.dir(), cache.root() / "link");
  const fs::path want = real / "models--Salesforce--blip2-opt-2.7b" / "snapshots" / kMain;
  CHECK(resolve_hub_snapshot("Salesforce/blip2-opt-2.7b", "main", {cache.root() / "link", "test"}) == want);
  CHECK(resolve_hub_snapshot("Salesforce/blip2-opt-2.7b", "main", {cache.root() / "link/./x/../", "test"}) == want);
  const fs::path relative = cache.dir().lexically_relative(fs::current_path());
  CHECK(resolve_hub_snapshot("Salesforce/blip2-opt-2.7b", "main", {relative, "test"}) == want);
  EnvScope env(Env{{"HF_HUB_CACHE", (cache.root() / "link").string()}});
  CHECK(resolve_hub_snapshot("Salesforce/blip2-opt-2.7b", "main") == want);
}

TEST_CASE("resolve_model_dir keeps a directory, resolves a hub id, refuses anything else", "[hub_cache]") {
  const Cache cache;
  lay_out_blip2(cache);
  EnvScope env(Env{{"HF_HUB_CACHE", cache.dir().string()}});
  CHECK(resolve_model_dir("", "main").empty());
  CHECK(resolve_model_dir(cache.root().string(), "main") == cache.root());
  CHECK(resolve_model_dir("Salesforce/blip2-opt-2.7b", "v1") ==
        fs::canonical(cache.dir()) / "models--Salesforce--blip2-opt-2.7b" / "snapshots" / kV1);
  CHECK_THROWS_AS(resolve_model_dir("no such/dir", "main"), ConfigError);
  CHECK_THROWS_WITH(resolve_model_dir("no such/dir", "main"),
                    Catch::StartsWith("no such/dir: not an existing directory, nor a Hugging Face hub id"));
}

TEST_CASE("every miss names the id, the revision, the cache and the command that fetches it", "[hub_cache]") {
  const Cache cache;
  lay_out_blip2(cache);
  const std::string folder = "models--Salesforce--blip2-opt-2.7b";
  const std::string cache_text = cache.dir().string();
  const auto fails = [&](std::string_view id, std::string_view revision, const HubCacheDir& where,
                         const std::string& why) {
    INFO(id << " at " << revision << ": " << why);
    CHECK_THROWS_AS(resolve_hub_snapshot(id, revision, where), ConfigError);
    CHECK_THROWS_WITH(resolve_hub_snapshot(id, revision, where),
                      Catch::StartsWith("Hugging Face hub id " + std::string(id) + ", revision " +
                                        std::string(revision) + ": ") &&
                          Catch::Contains(why) && Catch::Contains(where.path.string()) &&
                          Catch::Contains("hf download " + std::string(id)) &&
                          Catch::Contains("huggingface-cli download " + std::string(id)) &&
                          Catch::Contains("HF_HUB_OFFLINE=1") && Catch::Contains("local_files_only=True"));
  };
  fails("Salesforce/blip2-opt-2.7b", "main", {cache.root() / "nowhere", "HF_HUB_CACHE=somewhere"},
        "(HF_HUB_CACHE=somewhere), which does not exist");
  fails("openlm-research/open_llama_7b", "main", cache.location(),
        "it has no models--openlm-research--open_llama_7b");
  fails("Salesforce/blip2-opt-2.7b", "v2", cache.location(), folder + " has no refs/v2 (its refs: main, refs/pr/1, v1");
  fails("Salesforce/blip2-opt-2.7b", "v2", cache.location(), "--revision v2 --cache-dir " + cache_text);
  fails("Salesforce/blip2-opt-2.7b", std::string(40, 'd'), cache.location(),
        "has no snapshots/" + std::string(40, 'd') + "; its snapshots: " + kMain);
  cache.add_ref(folder, "stale", std::string(40, 'e'));
  fails("Salesforce/blip2-opt-2.7b", "stale", cache.location(),
        "refs/stale names commit " + std::string(40, 'e') + ", but " + folder + " has no snapshots/");
  // Python reads a ref as it is: a newline (a hand-written ref) is part of the hash, which names no snapshot.
  cache.add_ref(folder, "newline", kMain + "\n");
  fails("Salesforce/blip2-opt-2.7b", "newline", cache.location(), "names commit \"" + kMain + "\\n\"");
  // A ref that is not a file.
  fs::create_directories(cache.repo(folder) / "refs" / "adir");
  fails("Salesforce/blip2-opt-2.7b", "adir", cache.location(), "exists but cannot be read as a file");
  CHECK_THROWS_WITH(resolve_hub_snapshot("Salesforce/blip2-opt-2.7b", "", cache.location()),
                    Catch::Contains("the revision is empty"));
  CHECK_THROWS_WITH(resolve_hub_snapshot("a/b/c", "main", cache.location()),
                    Catch::StartsWith("a/b/c: not a Hugging Face hub id"));
}

TEST_CASE("a snapshot missing a file of its cached tree list is incomplete, as snapshot_download says",
          "[hub_cache]") {
  const Cache cache;
  lay_out_blip2(cache);
  const fs::path trees = cache.repo("models--Salesforce--blip2-opt-2.7b") / "trees";
  fs::create_directories(trees);
  const auto write_tree = [&](const std::string& text) { std::ofstream(trees / (kMain + ".json")) << text; };
  const auto at_main = [&] { return resolve_hub_snapshot("Salesforce/blip2-opt-2.7b", "main", cache.location()); };
  const std::string entry = "{\"size\": 2, \"blob_id\": \"x\"}";
  write_tree("{\"format_version\": 1, \"files\": {\"config.json\": " + entry + ", \"sub/tokenizer.json\": " + entry +
             "}}");
  CHECK_NOTHROW(at_main());
  write_tree("{\"format_version\": 1, \"files\": {\"config.json\": " + entry + ", \"model.safetensors\": " + entry +
             "}}");
  CHECK_THROWS_WITH(at_main(), Catch::Contains("is incomplete: 1 file(s) of its tree list") &&
                                   Catch::Contains("are missing (model.safetensors)") &&
                                   Catch::Contains("hf download Salesforce/blip2-opt-2.7b"));
  // Lists Python reads as absent check nothing: another format, an entry without blob_id, not JSON, a BOM.
  write_tree("{\"format_version\": 2, \"files\": {\"model.safetensors\": " + entry + "}}");
  CHECK_NOTHROW(at_main());
  write_tree("{\"format_version\": 1, \"files\": {\"model.safetensors\": {\"size\": 2}}}");
  CHECK_NOTHROW(at_main());
  write_tree("{\"format_version\": 1,");
  CHECK_NOTHROW(at_main());
  write_tree("\xEF\xBB\xBF{\"format_version\": 1, \"files\": {\"model.safetensors\": " + entry + "}}");
  CHECK_NOTHROW(at_main());
  // One whose shape makes Python raise is refused.
  write_tree("[1, 2]");
  CHECK_THROWS_WITH(at_main(), Catch::Contains("is not a JSON object"));
}

TEST_CASE("model_dir takes a hub id and revision picks its snapshot, through parse_run_config", "[hub_cache]") {
  const Cache cache;
  lay_out_blip2(cache);
  EnvScope env(Env{{"HF_HUB_CACHE", cache.dir().string()}});
  const fs::path repo = fs::canonical(cache.dir()) / "models--Salesforce--blip2-opt-2.7b";
  using Args = std::vector<std::string_view>;
  CHECK(tessera::parse_run_config(Args{}).revision == "main");
  CHECK(tessera::parse_run_config(Args{"model_dir=Salesforce/blip2-opt-2.7b"}).model_dir ==
        (repo / "snapshots" / kMain).string());
  CHECK(tessera::parse_run_config(Args{"model_dir=Salesforce/blip2-opt-2.7b", "revision=v1"}).model_dir ==
        (repo / "snapshots" / kV1).string());
  // A directory is itself, whatever revision says (from_pretrained ignores revision for a directory too).
  const std::string dir = cache.root().string();
  CHECK(tessera::parse_run_config(Args{"model_dir=" + dir, "revision=v1"}).model_dir == dir);
  CHECK_THROWS_AS(tessera::parse_run_config(Args{"model_dir=Salesforce/other"}), ConfigError);
  CHECK_THROWS_WITH(tessera::parse_run_config(Args{"model_dir=Salesforce/other"}),
                    Catch::StartsWith("model_dir=Salesforce/other: not an existing directory; Hugging Face hub id "
                                      "Salesforce/other, revision main: not in the hub cache " +
                                      cache.dir().string()));
  CHECK_THROWS_WITH(tessera::parse_run_config(Args{"model_dir=Salesforce/blip2-opt-2.7b", "revision=v9"}),
                    Catch::StartsWith("model_dir=Salesforce/blip2-opt-2.7b: not an existing directory; ") &&
                        Catch::Contains("has no refs/v9"));
  CHECK_THROWS_WITH(tessera::parse_run_config(Args{"model_dir=a/b/c"}),
                    Catch::StartsWith("model_dir=a/b/c: not an existing directory, nor a Hugging Face hub id"));
  CHECK_THROWS_WITH(tessera::parse_run_config(Args{"revision="}),
                    Catch::StartsWith("revision=: must name a branch, tag or commit hash"));
  CHECK_THROWS_WITH(tessera::parse_run_config(Args{"revision=v1"}),
                    Catch::StartsWith("revision=v1: picks a revision of model_dir as a Hugging Face hub id"));
}
