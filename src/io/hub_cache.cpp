// implements: io/hub_cache.hpp, as huggingface_hub 1.33 (constants.py, _snapshot_download.py, _tree_cache.py) and
// Python 3.11's posixpath (join, expanduser, expandvars, realpath) do it, so that each path is spelled as in Python.
#include "tessera/io/hub_cache.hpp"

#include <pwd.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <iterator>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <system_error>
#include <tuple>
#include <utility>
#include <vector>

#include "tessera/core/error.hpp"
#include "tessera/io/input_file.hpp"
#include "tessera/io/json_file.hpp"

namespace tessera::io {
namespace {

namespace fs = std::filesystem;

// os.getenv: a variable set to "" is set (huggingface_hub then uses "", a relative path, as Python would).
std::optional<std::string> env(const char* name) {
  const char* value = std::getenv(name);
  return value ? std::optional<std::string>(value) : std::nullopt;
}

// \w under re.ASCII.
bool is_word(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

// posixpath.join(a, b): an absolute b replaces a.
std::string py_join(const std::string& a, std::string_view b) {
  if (b.starts_with('/')) return std::string(b);
  if (a.empty() || a.ends_with('/')) return a + std::string(b);
  return a + "/" + std::string(b);
}

// posixpath.split: (head without trailing slashes unless all slashes, tail).
std::pair<std::string, std::string> py_split(const std::string& p) {
  const std::size_t i = p.rfind('/') + 1;  // npos + 1 = 0: no slash
  std::string head = p.substr(0, i);
  if (head.find_first_not_of('/') != std::string::npos) head.erase(head.find_last_not_of('/') + 1);
  return {head, p.substr(i)};
}

// posixpath.normpath: "." steps and repeated slashes dropped, ".." folded; POSIX keeps exactly two leading slashes.
std::string py_normpath(const std::string& path) {
  if (path.empty()) return ".";
  const std::size_t slashes = !path.starts_with('/') ? 0 : (path.starts_with("//") && !path.starts_with("///")) ? 2 : 1;
  std::vector<std::string> parts;
  for (std::size_t begin = 0; begin <= path.size();) {
    const std::size_t end = std::min(path.find('/', begin), path.size());
    const std::string part = path.substr(begin, end - begin);
    begin = end + 1;
    if (part.empty() || part == ".") continue;
    if (part != ".." || (slashes == 0 && parts.empty()) || (!parts.empty() && parts.back() == ".."))
      parts.push_back(part);
    else if (!parts.empty())
      parts.pop_back();
  }
  std::string out(slashes, '/');
  for (std::size_t i = 0; i < parts.size(); ++i) out += (i ? "/" : "") + parts[i];
  return out.empty() ? "." : out;
}

// posixpath.expanduser: "~" from $HOME (else the password database), "~user" from the database; unchanged when
// the user is unknown.
std::string py_expanduser(const std::string& path) {
  if (!path.starts_with('~')) return path;
  const std::size_t i = std::min(path.find('/', 1), path.size());
  std::string home;
  if (i == 1) {
    if (const auto value = env("HOME")) {
      home = *value;
    } else {
      const passwd* user = ::getpwuid(::getuid());
      if (!user) return path;
      home = user->pw_dir;
    }
  } else {
    const passwd* user = ::getpwnam(path.substr(1, i - 1).c_str());
    if (!user) return path;
    home = user->pw_dir;
  }
  home.erase(home.find_last_not_of('/') + 1);  // npos + 1 = 0: all slashes
  const std::string out = home + path.substr(i);
  return out.empty() ? "/" : out;
}

// posixpath.expandvars: $NAME (ASCII word characters) and ${ANY}; unknown variables stay, values are not rescanned.
std::string py_expandvars(std::string path) {
  for (std::size_t i = path.find('$'); i != std::string::npos; i = path.find('$', i)) {
    std::size_t end = i + 1;
    std::string name;
    if (end < path.size() && is_word(path[end])) {
      while (end < path.size() && is_word(path[end])) ++end;
      name = path.substr(i + 1, end - i - 1);
    } else if (end < path.size() && path[end] == '{' && path.find('}', end) != std::string::npos) {
      end = path.find('}', end) + 1;
      name = path.substr(i + 2, end - i - 3);
    } else {
      ++i;
      continue;
    }
    // os.environ splits each entry at its first '=', so a name holding one is never set.
    const auto value = name.find('=') == std::string::npos ? env(name.c_str()) : std::nullopt;
    if (!value) {
      i = end;
      continue;
    }
    path = path.substr(0, i) + *value + path.substr(end);
    i += value->size();
  }
  return path;
}

// os.path.exists / isdir / isfile: follow links; false for a path Python refuses (an embedded NUL).
std::optional<struct stat> py_stat(const std::string& path) {
  struct stat st {};
  if (path.find('\0') != std::string::npos || ::stat(path.c_str(), &st) != 0) return std::nullopt;
  return st;
}
bool py_exists(const std::string& path) { return py_stat(path).has_value(); }
bool py_isdir(const std::string& path) {
  const auto st = py_stat(path);
  return st && S_ISDIR(st->st_mode);
}
bool py_isfile(const std::string& path) {
  const auto st = py_stat(path);
  return st && S_ISREG(st->st_mode);
}

// posixpath._joinrealpath, non-strict: `seen` maps a link to what it resolved to (nullopt while resolving: a loop).
std::pair<std::string, bool> join_realpath(std::string path, std::string rest,
                                           std::map<std::string, std::optional<std::string>>& seen) {
  if (rest.starts_with('/')) {
    rest.erase(0, 1);
    path = "/";
  }
  while (!rest.empty()) {
    const std::size_t cut = rest.find('/');
    const std::string name = rest.substr(0, cut);
    rest = cut == std::string::npos ? "" : rest.substr(cut + 1);
    if (name.empty() || name == ".") continue;
    if (name == "..") {
      if (path.empty()) {
        path = "..";
      } else {
        auto [head, tail] = py_split(path);
        path = tail == ".." ? py_join(py_join(head, ".."), "..") : head;
      }
      continue;
    }
    const std::string next = py_join(path, name);
    struct stat st {};
    if (::lstat(next.c_str(), &st) != 0 || !S_ISLNK(st.st_mode)) {
      path = next;
      continue;
    }
    if (const auto it = seen.find(next); it != seen.end()) {
      if (!it->second) return {py_join(next, rest), false};
      path = *it->second;
      continue;
    }
    seen[next] = std::nullopt;
    std::string target(4096, '\0');
    const ssize_t n = ::readlink(next.c_str(), target.data(), target.size());
    target.resize(n < 0 ? 0 : static_cast<std::size_t>(n));
    bool ok = false;
    std::tie(path, ok) = join_realpath(path, target, seen);
    if (!ok) return {py_join(path, rest), false};
    seen[next] = path;
  }
  return {path, true};
}

// os.path.realpath(path) (what Path.resolve() calls): absolute, links resolved as far as the path exists.
std::string py_realpath(const std::string& path) {
  std::map<std::string, std::optional<std::string>> seen;
  std::string out = join_realpath("", path, seen).first;
  if (!out.starts_with('/')) out = py_join(fs::current_path().string(), out);
  return py_normpath(out);
}

// `size` hex digits, lowercase only or either case.
bool is_hex(std::string_view text, std::size_t size, bool lowercase_only) {
  return text.size() == size && std::all_of(text.begin(), text.end(), [&](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (!lowercase_only && c >= 'A' && c <= 'F');
         });
}

// A revision that is a commit already (file_download.REGEX_COMMIT_HASH, fullmatch): 40 lowercase hex digits.
bool is_commit_hash(std::string_view revision) { return is_hex(revision, 40, true); }

// The first `limit` names of what `dir` holds, sorted, files relative to it when `files` (refs/pr/1), for messages.
std::string listing(const std::string& dir, bool files, std::size_t limit = 8) {
  std::vector<std::string> names;
  std::error_code ec;
  for (auto it = fs::recursive_directory_iterator(dir, ec); !ec && it != fs::recursive_directory_iterator();
       it.increment(ec)) {
    if (!files) it.disable_recursion_pending();
    std::error_code entry_ec;  // an unreadable entry is left out, the walk goes on
    if (files ? it->is_regular_file(entry_ec) : it->is_directory(entry_ec))
      names.push_back(it->path().lexically_relative(dir).string());
  }
  std::sort(names.begin(), names.end());
  if (names.empty()) return "none";
  std::string out;
  for (std::size_t i = 0; i < std::min(limit, names.size()); ++i) out += (i ? ", " : "") + names[i];
  if (names.size() > limit) out += ", ... (" + std::to_string(names.size() - limit) + " more)";
  return out;
}

struct Lookup {
  std::string repo_id, revision;
  const HubCacheDir& cache;

  std::string subject() const { return "Hugging Face hub id " + repo_id + ", revision " + revision + ": "; }
  std::string in_cache() const { return "the hub cache " + cache.path.string() + " (" + cache.origin + ")"; }
  // The way out: huggingface_hub 1.x ships `hf`; its `huggingface-cli` only prints that it is gone.
  std::string fetch_hint(std::string_view verb = "fetch it") const {
    const std::string args = repo_id + (revision == "main" ? "" : " --revision " + revision) +
                             " --cache-dir " + cache.path.string();
    return ". tessera reads the cache only, as from_pretrained(..., local_files_only=True) or HF_HUB_OFFLINE=1 "
           "do: " + std::string(verb) + " where there is network access with `hf download " + args +
           "` (huggingface_hub < 1.0: `huggingface-cli download " + args +
           "`), or give model_dir= a local model directory";
  }
  [[noreturn]] void fail(const std::string& why, std::string_view verb = "fetch it") const {
    throw ConfigError(subject() + why + fetch_hint(verb));
  }
};

// _raise_if_incomplete_snapshot with no patterns: when the download cached the commit's tree list
// (STORAGE/trees/HASH.json, format 1), every file it names must be a file under the snapshot. A list Python reads as
// absent (missing, unreadable, not JSON, another format, an entry without size and blob_id, an invalid xet_hash)
// checks nothing; one whose shape makes Python raise is refused here too.
void check_tree_list(const Lookup& at, const std::string& storage, const std::string& commit,
                     const std::string& snapshot) {
  const std::string list = py_join(py_join(storage, "trees"), commit + ".json");
  InputFile in(list);  // a FIFO or device is read as absent, without blocking
  if (!in.is_open()) return;
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (text.starts_with("\xEF\xBB\xBF") || json_nesting_error(text)) return;  // json.load refuses a BOM
  const nlohmann::ordered_json data = nlohmann::ordered_json::parse(text, nullptr, false);
  if (data.is_discarded()) return;
  const auto refuse = [&](const std::string& why) {
    at.fail(list + " " + why + ", so the snapshot cannot be checked; remove it", "fetch it again");
  };
  if (!data.is_object()) refuse("is not a JSON object");
  const auto version = data.find("format_version");
  if (version == data.end() || !((version->is_boolean() && version->get<bool>()) ||
                                 (version->is_number() && version->get<double>() == 1.0)))
    return;
  const auto files = data.find("files");
  if (files == data.end()) return;
  if (!files->is_object()) refuse("has \"files\" that is not an object");
  for (const auto& [name, info] : files->items())
    if (!info.is_object() || !info.contains("size") || !info.contains("blob_id")) return;
  for (const auto& [name, info] : files->items()) {
    const auto xet = info.find("xet_hash");
    if (xet == info.end() || xet->is_null()) continue;
    if (!xet->is_string()) refuse("has a \"xet_hash\" that is not a string (file " + name + ")");
    const std::string hash = xet->get<std::string>();
    if (!is_hex(hash, 64, false)) return;
  }
  std::vector<std::string> missing;
  for (const auto& [name, info] : files->items()) {
    std::string path = snapshot;
    for (std::size_t begin = 0; begin <= name.size();) {
      const std::size_t end = std::min(name.find('/', begin), name.size());
      path = py_join(path, name.substr(begin, end - begin));
      begin = end + 1;
    }
    if (!py_isfile(path)) missing.push_back(name);
  }
  if (missing.empty()) return;
  std::string sample;
  for (std::size_t i = 0; i < std::min<std::size_t>(3, missing.size()); ++i) sample += (i ? ", " : "") + missing[i];
  if (missing.size() > 3) sample += ", ... (" + std::to_string(missing.size() - 3) + " more)";
  at.fail("the cached snapshot " + snapshot + " (commit " + commit + ") is incomplete: " +
              std::to_string(missing.size()) + " file(s) of its tree list " + list + " are missing (" + sample +
              "), as after an interrupted download",
          "complete it");
}

}  // namespace

bool looks_like_repo_id(std::string_view value) {
  const auto part_ok = [](std::string_view part) {
    return !part.empty() && part.size() <= 96 && is_word(part.front()) && is_word(part.back()) &&
           std::all_of(part.begin(), part.end(), [](char c) { return is_word(c) || c == '-' || c == '.'; });
  };
  const std::size_t slash = value.find('/');
  if (slash != std::string_view::npos && value.find('/', slash + 1) != std::string_view::npos) return false;
  const bool parts_ok = slash == std::string_view::npos
                            ? part_ok(value)
                            : part_ok(value.substr(0, slash)) && part_ok(value.substr(slash + 1));
  return parts_ok && value.find("--") == std::string_view::npos && value.find("..") == std::string_view::npos &&
         !value.ends_with(".git");
}

HubCacheDir hub_cache_location() {
  const auto expanded = [](const std::string& path) { return py_expandvars(py_expanduser(path)); };
  if (const auto cache = env("HF_HUB_CACHE")) return {expanded(*cache), "HF_HUB_CACHE=" + *cache};
  // constants.py still honours the legacy name, below HF_HUB_CACHE and above HF_HOME.
  if (const auto cache = env("HUGGINGFACE_HUB_CACHE"))
    return {expanded(*cache), "HUGGINGFACE_HUB_CACHE=" + *cache + ", the legacy name of HF_HUB_CACHE"};
  std::string hf_home;
  std::string origin;
  if (const auto home = env("HF_HOME")) {
    hf_home = *home;
    origin = "HF_HOME=" + *home + ", plus /hub";
  } else if (const auto xdg = env("XDG_CACHE_HOME")) {
    hf_home = py_join(*xdg, "huggingface");
    origin = "XDG_CACHE_HOME=" + *xdg + ", plus /huggingface/hub";
  } else {
    hf_home = py_join(py_join(py_expanduser("~"), ".cache"), "huggingface");
    origin = "the default: HF_HUB_CACHE, HF_HOME and XDG_CACHE_HOME are unset";
  }
  // HF_HOME is expanded, then HF_HUB_CACHE's default (HF_HOME/hub) is expanded once more, as constants.py does.
  return {expanded(py_join(expanded(hf_home), "hub")), origin};
}

fs::path hub_cache_dir() { return hub_cache_location().path; }

fs::path resolve_hub_snapshot(std::string_view repo_id, std::string_view revision, const HubCacheDir& cache) {
  if (!looks_like_repo_id(repo_id))
    throw ConfigError(std::string(repo_id) + ": not a Hugging Face hub id (NAME or ORG/NAME, each of letters, digits, "
                      "'-', '_', '.', starting and ending with a letter, digit or '_', no \"--\" or \"..\")");
  if (revision.empty())
    throw ConfigError("Hugging Face hub id " + std::string(repo_id) +
                      ": the revision is empty; give a branch, tag or commit hash, e.g. main");
  const Lookup at{std::string(repo_id), std::string(revision), cache};
  // snapshot_download: str(Path(cache_dir).expanduser().resolve()); pathlib refuses a ~ it cannot expand.
  const std::string raw = cache.path.string();
  const std::string expanded = py_expanduser(raw);
  if (raw.starts_with('~') && expanded.starts_with('~'))
    at.fail("cannot find the home directory that the hub cache " + raw + " (" + cache.origin + ") starts with");
  const std::string cache_dir = py_realpath(expanded);
  std::string folder = "models";
  const std::size_t slash = repo_id.find('/');
  folder += slash == std::string_view::npos ? "--" + at.repo_id
                                             : "--" + at.repo_id.substr(0, slash) + "--" + at.repo_id.substr(slash + 1);
  const std::string storage = py_join(cache_dir, folder);

  std::optional<std::string> commit;
  const std::string ref = py_join(py_join(storage, "refs"), revision);
  if (is_commit_hash(revision)) {
    commit = at.revision;
  } else if (py_exists(ref)) {
    InputFile in(ref);  // a FIFO or device refused, without blocking
    if (!in.is_open())
      at.fail(ref + " exists but cannot be read as a file (it " + in.problem() + ")", "fetch it again");
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // open() in text mode: "\r\n" and "\r" read as "\n"; nothing is stripped, so a ref with a newline names no
    // snapshot, in Python too.
    std::string read;
    for (std::size_t i = 0; i < text.size(); ++i) {
      if (text[i] == '\r' && i + 1 < text.size() && text[i + 1] == '\n') continue;
      read += text[i] == '\r' ? '\n' : text[i];
    }
    commit = read;
  }
  if (commit) {
    const std::string snapshot = py_join(py_join(storage, "snapshots"), *commit);
    if (py_exists(snapshot)) {
      // Python would return a file here too; no model directory can be read from one.
      if (!py_isdir(snapshot)) at.fail(snapshot + " is not a directory", "fetch it again");
      check_tree_list(at, storage, *commit, snapshot);
      return snapshot;
    }
  }
  // Not found: the outermost missing piece, and what the cache holds instead.
  if (!py_isdir(cache_dir)) at.fail("not in " + at.in_cache() + ", which does not exist");
  if (!py_isdir(storage)) at.fail("not in " + at.in_cache() + ": it has no " + folder);
  const std::string snapshots = "; its snapshots: " + listing(py_join(storage, "snapshots"), false);
  if (!commit)
    at.fail("not in " + at.in_cache() + ": " + folder + " has no refs/" + at.revision + " (its refs: " +
            listing(py_join(storage, "refs"), true) + snapshots + ")");
  // Anything but a hash is quoted and escaped: a ref ending in a newline (hand-written) names no snapshot, and the
  // message shows why.
  const std::string shown =
      is_commit_hash(*commit) ? *commit
                              : nlohmann::json(*commit).dump(-1, ' ', true, nlohmann::json::error_handler_t::replace);
  const std::string named = is_commit_hash(revision) ? "" : "refs/" + at.revision + " names commit " + shown + ", but ";
  at.fail("not in " + at.in_cache() + ": " + named + folder + " has no snapshots/" + shown + snapshots);
}

fs::path resolve_hub_snapshot(std::string_view repo_id, std::string_view revision) {
  return resolve_hub_snapshot(repo_id, revision, hub_cache_location());
}

fs::path resolve_model_dir(std::string_view value, std::string_view revision) {
  if (value.empty()) return {};
  std::error_code ec;
  if (fs::is_directory(fs::path(value), ec)) return fs::path(value);
  if (!looks_like_repo_id(value))
    throw ConfigError(std::string(value) + ": not an existing directory, nor a Hugging Face hub id (ORG/NAME, e.g. "
                      "openlm-research/open_llama_7b); give a Hugging Face model dir with config.json, or the hub id "
                      "of a model in the hub cache");
  return resolve_hub_snapshot(value, revision);
}

}  // namespace tessera::io
