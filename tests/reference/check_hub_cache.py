#!/usr/bin/env python3
"""model_dir= as a Hugging Face hub id (io/hub_cache.hpp) against huggingface_hub 1.33 and transformers, offline.

Caches are laid out in a temporary directory by huggingface_hub's own cache writers (the functions hf_hub_download
and snapshot_download call: repo_folder_name, _get_pointer_path, _create_symlink, _cache_commit_hash_for_specific_
revision, write_tree_cache), then checked with scan_cache_dir. Each setup sets HOME, HF_HUB_CACHE,
HUGGINGFACE_HUB_CACHE, HF_HOME, XDG_CACHE_HOME and the working directory, and asks for (value, revision) pairs. For
each, in a fresh process with that environment (huggingface_hub reads it when imported):
  tessera     hub_cache_dump VALUE REVISION: hub_cache_dir(), resolve_model_dir(), the files under it
  reference   constants.HF_HUB_CACHE; a value that is a directory (os.path.isdir, transformers' first test) is
              itself, otherwise snapshot_download(value, revision=..., local_files_only=True), the same with
              cache_dir=constants.HF_HUB_CACHE, try_to_load_from_cache for every file, and for some values
              transformers' cached_file(value, "config.json", revision=..., local_files_only=True), the resolver
              behind from_pretrained
Checked: the cache dir; that both refuse, or both resolve to the same path string; the same files with the same
bytes, each one try_to_load_from_cache also finds (the same file); cached_file's directory. A refusal by tessera must
name the id, the revision and the cache dir, and give the `hf download` command.

usage: check_hub_cache.py HUB_CACHE_DUMP [--perturb --expect-mismatch]
--perturb hands the comparison one wrong expected path (the first resolved one, with a character appended): a
negative control, which must then see a mismatch. Exit 0 when every check passes, 1 when one fails, 2 when
hub_cache_dump or the reference did not run. With --expect-mismatch exit 0 only when both ran and the comparison
failed.
"""
import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile

T, ONLY = "transformers", "snapshot_download only"  # what a query checks besides snapshot_download
# How huggingface_hub refuses a value the cache cannot answer: no snapshot, an incomplete one, not a repo id.
REFUSALS = ("LocalEntryNotFoundError", "IncompleteSnapshotError", "HFValidationError")
ENV_KEYS = ("HOME", "HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME")
C = {name: hashlib.sha1(name.encode()).hexdigest() for name in
     ("main", "v1", "pr", "llama", "gpt2", "xdg", "home", "legacy", "hub", "link", "rel", "empty", "part", "stale",
      "nl", "fmt", "missing")}


def reference(queries):
    """Runs in the setup's environment: what huggingface_hub (and transformers) resolve."""
    import warnings
    warnings.filterwarnings("ignore")
    from huggingface_hub import constants, snapshot_download, try_to_load_from_cache
    results = []
    for value, revision, also in queries:
        out = {"cache_dir": constants.HF_HUB_CACHE}
        results.append(out)
        if os.path.isdir(value):
            out["model_dir"] = value
        else:
            try:
                out["model_dir"] = snapshot_download(value, revision=revision, local_files_only=True)
            except Exception as e:  # noqa: BLE001 - any refusal is the answer
                out["error"] = f"{type(e).__name__}: {e}"
                continue
            again = snapshot_download(value, revision=revision, local_files_only=True,
                                      cache_dir=constants.HF_HUB_CACHE)
            if again != out["model_dir"]:
                out["error"] = f"snapshot_download with cache_dir=HF_HUB_CACHE: {again}, without: {out['model_dir']}"
        out["files"] = walk(out["model_dir"])
        if not os.path.isdir(value) and also != ONLY:
            out["cached"] = {rel: try_to_load_from_cache(value, rel, revision=revision) for rel, _ in out["files"]}
            out["cached"] = {rel: p if isinstance(p, str) else repr(p) for rel, p in out["cached"].items()}
        if also == T:
            from transformers.utils.hub import cached_file
            out["cached_file_dir"] = os.path.dirname(cached_file(value, "config.json", revision=revision,
                                                                 local_files_only=True))
    return results


def walk(top):
    files = []
    for root, _, names in os.walk(top):
        for name in names:
            path = os.path.join(root, name)
            if os.path.isfile(path):
                files.append([os.path.relpath(path, top).replace(os.sep, "/"), path])
    return sorted(files)


def git_blob_sha1(data):
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def lay_out(cache_dir, repo_id, commits, refs, trees=()):
    """A repo in the cache as hf_hub_download writes it: blobs named by etag (sha256 for LFS files, the git blob
    sha1 otherwise), snapshots/COMMIT/FILE links to them, refs/REF files, trees/COMMIT.json for `trees`."""
    from huggingface_hub import file_download as fd
    from huggingface_hub._tree_cache import TreeCacheEntry, write_tree_cache
    storage = os.path.join(cache_dir, fd.repo_folder_name(repo_id=repo_id, repo_type="model"))
    for commit, files in commits.items():
        entries = {}
        for name, data in files.items():
            lfs = name.endswith(".safetensors")
            etag = hashlib.sha256(data).hexdigest() if lfs else git_blob_sha1(data)
            blob = os.path.join(storage, "blobs", etag)
            os.makedirs(os.path.dirname(blob), exist_ok=True)
            with open(blob, "wb") as f:
                f.write(data)
            pointer = fd._get_pointer_path(storage, commit, name)
            os.makedirs(os.path.dirname(pointer), exist_ok=True)
            fd._create_symlink(blob, pointer, new_blob=False)
            entries[name] = TreeCacheEntry(size=len(data), blob_id=git_blob_sha1(data),
                                           lfs_sha256=etag if lfs else None, lfs_size=len(data) if lfs else None)
        if commit in trees:
            write_tree_cache(storage, commit, entries)
    for ref, commit in refs.items():
        fd._cache_commit_hash_for_specific_revision(storage, ref, commit)
    return storage


def model_files(tag):
    config = {"model_type": "llama", "vocab_size": 64, "hidden_size": 16, "intermediate_size": 32,
              "num_hidden_layers": 1, "num_attention_heads": 2, "tag": tag}
    return {"config.json": json.dumps(config).encode(), "tokenizer_config.json": b"{}",
            "model.safetensors": tag.encode() * 10}


def setups(root):
    """(name, env, cwd, queries): each query (value, revision, also), also "transformers" (cached_file too), "" or
    "snapshot_download only" (where try_to_load_from_cache and cached_file disagree with snapshot_download)."""
    home = os.path.join(root, "home")
    default_hub = os.path.join(home, ".cache", "huggingface", "hub")
    blip2, llama = "Salesforce/blip2-opt-2.7b", "openlm-research/open_llama_7b"
    lay_out(default_hub, blip2, {C["main"]: model_files("main"), C["v1"]: model_files("v1"),
                                 C["pr"]: {"config.json": b"{}", "sub/dir/extra.json": b"[]"}},
            {"main": C["main"], "v1.0": C["v1"], "refs/pr/1": C["pr"]})
    llama_files = {"config.json": model_files("llama")["config.json"], "tokenizer.model": b"sp",
                   "model-00001-of-00002.safetensors": b"1" * 64, "model-00002-of-00002.safetensors": b"2" * 64,
                   "model.safetensors.index.json": b"{\"weight_map\": {}}"}
    lay_out(default_hub, llama, {C["llama"]: llama_files}, {"main": C["llama"]}, trees=(C["llama"],))
    lay_out(default_hub, "gpt2", {C["gpt2"]: model_files("gpt2")}, {"main": C["gpt2"]})
    # The misses and the odd caches: an incomplete snapshot (its tree list names a file that is gone), a ref naming an
    # uncached commit, a ref ending in a newline, a tree list of another format (no check).
    storage = lay_out(default_hub, "org/partial", {C["part"]: model_files("part")}, {"main": C["part"]},
                      trees=(C["part"],))
    os.remove(os.path.join(storage, "snapshots", C["part"], "model.safetensors"))
    lay_out(default_hub, "org/stale", {C["main"]: model_files("x")}, {"main": C["main"], "old": C["stale"]})
    storage = lay_out(default_hub, "org/newline", {C["nl"]: model_files("nl")}, {"main": C["nl"]})
    with open(os.path.join(storage, "refs", "main"), "w") as f:
        f.write(C["nl"] + "\n")
    storage = lay_out(default_hub, "org/format", {C["fmt"]: model_files("fmt")}, {"main": C["fmt"]},
                      trees=(C["fmt"],))
    with open(os.path.join(storage, "trees", C["fmt"] + ".json"), "w") as f:
        json.dump({"format_version": 2, "files": {"gone.bin": {"size": 1, "blob_id": "x"}}}, f)
    plain = os.path.join(root, "plain_model_dir")
    os.makedirs(plain)
    with open(os.path.join(plain, "config.json"), "w") as f:
        f.write("{}")
    yield ("default cache under HOME", {"HOME": home}, root, [
        (blip2, "main", T), (blip2, "v1.0", T), (blip2, "refs/pr/1", ""), (blip2, C["v1"], T),
        (blip2, C["missing"], ""), (blip2, "v2", ""), (llama, "main", T), ("gpt2", "main", T),
        ("no-such/model", "main", ""), (llama, "v1.0", ""), ("org/partial", "main", ""),
        ("org/stale", "old", ""), ("org/stale", "main", ""), ("org/newline", "main", ""),
        ("org/format", "main", ""), (plain, "main", ""), ("a/b/c", "main", ""), ("bad--id", "main", "")])

    xdg = os.path.join(root, "xdg")
    lay_out(os.path.join(xdg, "huggingface", "hub"), blip2, {C["xdg"]: model_files("xdg")}, {"main": C["xdg"]})
    yield ("XDG_CACHE_HOME", {"HOME": home, "XDG_CACHE_HOME": xdg}, root, [(blip2, "main", T), (llama, "main", "")])

    home2 = os.path.join(root, "home2")
    lay_out(os.path.join(home2, "hfhome", "hub"), blip2, {C["home"]: model_files("home")}, {"main": C["home"]})
    yield ("HF_HOME with ~", {"HOME": home2, "HF_HOME": "~/hfhome", "XDG_CACHE_HOME": xdg}, root,
           [(blip2, "main", T)])

    legacy = os.path.join(root, "legacy")
    lay_out(legacy, blip2, {C["legacy"]: model_files("legacy")}, {"main": C["legacy"]})
    yield ("HUGGINGFACE_HUB_CACHE over HF_HOME", {"HOME": home, "HF_HOME": os.path.join(home2, "hfhome"),
                                                  "HUGGINGFACE_HUB_CACHE": legacy}, root, [(blip2, "main", T)])

    scratch = os.path.join(root, "scratch")
    lay_out(os.path.join(scratch, "hub"), blip2, {C["hub"]: model_files("hub")}, {"main": C["hub"]})
    yield ("HF_HUB_CACHE with $VAR over HUGGINGFACE_HUB_CACHE",
           {"HOME": home, "SCRATCH_DIR": scratch, "HF_HUB_CACHE": "$SCRATCH_DIR/hub", "HUGGINGFACE_HUB_CACHE": legacy},
           root, [(blip2, "main", T), (blip2, "v1.0", "")])

    real = os.path.join(root, "real", "hub")
    lay_out(real, blip2, {C["link"]: model_files("link")}, {"main": C["link"]})
    os.symlink(os.path.join(root, "real"), os.path.join(root, "link"))
    yield ("HF_HUB_CACHE through a link, with ./", {"HOME": home, "HF_HUB_CACHE": os.path.join(
        root, "link", ".", "hub") + "/"}, root, [(blip2, "main", T)])
    # realpath folds "missing/.." away; the kernel, which try_to_load_from_cache and so cached_file go through,
    # does not: there only snapshot_download (and hf_hub_download) find the snapshot, and tessera follows them.
    yield ("HF_HUB_CACHE through a missing directory and ..", {"HOME": home, "HF_HUB_CACHE": os.path.join(
        root, "link", "missing", "..", "hub")}, root, [(blip2, "main", ONLY)])

    work = os.path.join(root, "work")
    lay_out(os.path.join(work, "rel", "hub"), blip2, {C["rel"]: model_files("rel")}, {"main": C["rel"]})
    lay_out(os.path.join(work, "hub"), blip2, {C["empty"]: model_files("empty")}, {"main": C["empty"]})
    yield ("relative HF_HUB_CACHE", {"HOME": home, "HF_HUB_CACHE": "rel/hub"}, work, [(blip2, "main", T)])
    yield ("HF_HOME set but empty", {"HOME": home, "HF_HOME": ""}, work, [(blip2, "main", T)])
    yield ("HF_HUB_CACHE that does not exist", {"HOME": home, "HF_HUB_CACHE": os.path.join(root, "nowhere")}, root,
           [(blip2, "main", "")])


def run_env(env_vars):
    env = {k: v for k, v in os.environ.items() if k not in ENV_KEYS}
    env.update(env_vars)
    env["HF_HUB_OFFLINE"] = "1"  # never the network, whatever a bug would try
    return env


def compare(name, query, mine, ref, perturbed, cwd):
    value, revision, _ = query
    where = f"[{name}] {value} @ {revision}"
    problems = []
    if mine.get("cache_dir") != ref["cache_dir"]:
        problems.append(f"cache dir: tessera {mine.get('cache_dir')!r}, huggingface_hub {ref['cache_dir']!r}")
    if "error" in ref:
        kind = ref["error"].split(":")[0]
        if kind not in REFUSALS:
            problems.append(f"huggingface_hub refuses for another reason than a cache miss or a bad id: {ref['error']}")
        if "error" not in mine:
            problems.append(f"tessera resolved {mine.get('model_dir')!r}; huggingface_hub refuses: {ref['error']}")
        else:
            for part in ([value, "revision " + revision, mine["cache_dir"], "hf download " + value]
                         if "not a Hugging Face hub id" not in mine["error"] and "nor a Hugging Face hub id"
                         not in mine["error"] else [value]):
                if part not in mine["error"]:
                    problems.append(f"tessera's refusal does not name {part!r}: {mine['error']}")
        return where, problems, f"refused by both ({kind})"
    if "error" in mine:
        problems.append(f"tessera refuses ({mine['error']}); huggingface_hub resolves {ref['model_dir']!r}")
        return where, problems, ""
    want = ref["model_dir"] + ("x" if perturbed else "")
    if mine["model_dir"] != want:
        problems.append(f"model dir: tessera {mine['model_dir']!r}, huggingface_hub {want!r}")
    mine_files = dict(mine["files"])
    ref_files = dict(ref["files"])
    if sorted(mine_files) != sorted(ref_files):
        problems.append(f"files: tessera {sorted(mine_files)}, huggingface_hub {sorted(ref_files)}")
    for rel in sorted(set(mine_files) & set(ref_files)):
        with open(mine_files[rel], "rb") as a, open(ref_files[rel], "rb") as b:
            if a.read() != b.read():
                problems.append(f"{rel}: other bytes than huggingface_hub's")
        # try_to_load_from_cache and cached_file spell the cache dir as given (relative to the setup's working
        # directory, links unresolved): the same file is asked of them, not the same spelling.
        cached = os.path.join(cwd, ref.get("cached", {}).get(rel, mine_files[rel]))
        if not os.path.isfile(cached) or not os.path.samefile(cached, mine_files[rel]):
            problems.append(f"{rel}: try_to_load_from_cache gives {cached!r}")
    if "cached_file_dir" in ref and not os.path.samefile(os.path.join(cwd, ref["cached_file_dir"]), mine["model_dir"]):
        problems.append(f"transformers' cached_file reads from {ref['cached_file_dir']!r}")
    return where, problems, f"{len(mine_files)} files"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("dump", nargs="?")
    ap.add_argument("--perturb", action="store_true")
    ap.add_argument("--expect-mismatch", action="store_true")
    ap.add_argument("--reference", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.reference:
        json.dump(reference(json.loads(a.reference)), sys.stdout)
        return 0
    if not a.dump:
        ap.error("HUB_CACHE_DUMP is required")
    a.dump = os.path.abspath(a.dump)  # each setup runs in its own working directory
    ok, perturb, ran = True, a.perturb, True
    with tempfile.TemporaryDirectory(prefix="tessera_hub_cache_") as tmp:
        root = os.path.realpath(tmp)
        try:
            all_setups = list(setups(root))
        except Exception as e:  # noqa: BLE001
            print(f"could not lay out the caches with huggingface_hub: {e}")
            return 2
        # huggingface_hub's own reader of the cache must see the repos laid out, corrupt only where meant to be.
        from huggingface_hub import scan_cache_dir
        for hub in (os.path.join(root, "home", ".cache", "huggingface", "hub"), os.path.join(root, "legacy")):
            info = scan_cache_dir(hub)
            unmeant = [w for w in info.warnings if not any(f"models--org--{r}" in str(w) for r in ("stale", "newline"))]
            if unmeant or not info.repos:
                print(f"scan_cache_dir({hub}) does not read the laid-out cache as a cache: {unmeant}")
                return 2
        for name, env_vars, cwd, queries in all_setups:
            env = run_env(env_vars)
            ref = subprocess.run([sys.executable, os.path.abspath(__file__), "--reference", json.dumps(queries)],
                                 env=env, cwd=cwd, capture_output=True, text=True)
            if ref.returncode != 0:
                print(f"[{name}] the reference did not run:\n{ref.stderr[-3000:]}")
                return 2
            refs = json.loads(ref.stdout)
            # Every query of the setup in one hub_cache_dump process, one JSON line each.
            dump = subprocess.run([a.dump] + [part for query in queries for part in query[:2]], env=env, cwd=cwd,
                                  capture_output=True, text=True)
            lines = dump.stdout.splitlines()
            if dump.returncode != 0 or len(lines) != len(queries):
                print(f"[{name}] hub_cache_dump failed ({dump.returncode}, {len(lines)} lines for {len(queries)} "
                      f"queries):\n{dump.stderr}")
                ran = False
                continue
            for query, expected, line in zip(queries, refs, lines):
                perturbed = perturb and "error" not in expected
                where, problems, summary = compare(name, query, json.loads(line), expected, perturbed, cwd)
                perturb = perturb and not perturbed
                ok = ok and not problems
                print(f"{'ok' if not problems else 'MISMATCH'}  {where}: {summary}")
                for p in problems:
                    print(f"    {p}")
            if a.expect_mismatch and not ok:
                break  # the control's one wrong path was caught: the other setups would only repeat the check
    if not ran:
        return 2
    if a.expect_mismatch:
        print("negative control: " + ("mismatch seen, as expected" if not ok else "NO mismatch seen"))
        return 0 if not ok else 1
    print("all checks passed" if ok else "MISMATCHES")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
