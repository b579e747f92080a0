#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-2.0
"""The upstream patch series: pristine 7.3.4 plus this repository, as `git format-patch` output.

Run through scripts/rsiw/series.sh, which sets RSIW_TOP, RSIW_CACHE and RSIW_PRISTINE.

The kernel tree kernel.sh builds is the target: the pristine source, the glue patches of
patches/series applied in order, and the repository's overlay directories copied in. This script
takes every line that tree adds to or removes from the pristine source and puts it in one patch
of the series declared in patches/upstream.txt:

1. a `Lines:` rule (a file and a regular expression on the line) of a patch or of [exclude];
2. otherwise the patch whose `Glue:` names the glue patch that added or removed the line;
3. otherwise (a file of the overlay) the patch whose `Files:` names the file, its directory or a
   glob matching it: an exact name wins over a glob, a glob over a directory, and a longer
   directory over a shorter one.

A line, glue patch or overlay file that none of these places is an error: nothing is dropped
silently. The state after patch k keeps the lines of patches 1..k, so every prefix is a tree;
the last one is the target minus what [exclude] keeps out.

  series.py make   [-o DIR]   write the series (cover letter 0/N and patches 1/N..N/N)
  series.py check  [-o DIR]   make, then `git am` onto pristine 7.3.4 in a cached scratch repo,
                              compare trees, run checkpatch.pl --strict
  series.py tree              compare the kernel tree kernel.sh last prepared with the tree the
                              last check's `git am` produced (run after `kernel.sh build`)
  series.py prefixes [--all] [--only K,...]
                              make, then build rust/ and the C directories the series changes
                              for every prefix but the whole series (--all: that too; --only:
                              these prefixes), in a private tree (slow: not part of make check)
"""

import argparse
import difflib
import fcntl
import fnmatch
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import defaultdict

TOP = os.environ.get("RSIW_TOP") or os.path.abspath(os.path.join(os.path.dirname(__file__), "../.."))
CACHE = os.environ.get("RSIW_CACHE") or os.path.join(
    os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "rsiw")
PRISTINE = os.environ.get("RSIW_PRISTINE") or os.path.join(CACHE, "src/linux-source-7.3")
TREE = os.environ.get("RSIW_TREE") or os.path.join(CACHE, "tree")
DATA = os.path.join(TOP, "patches/upstream.txt")
SCRATCH = os.path.join(CACHE, "series")
REPO = os.path.join(SCRATCH, "linux")
NEVER = 1 << 30  # the patch index of what [exclude] keeps out

# One name per checkout for its refs in the shared scratch repository.
KEY = hashlib.sha1(TOP.encode()).hexdigest()[:12]
PRISTINE_REF = "refs/rsiw/pristine"
SERIES_REF = f"refs/rsiw/series/{KEY}"
TARGET_REF = f"refs/rsiw/target/{KEY}"
AM_REF = f"refs/rsiw/am/{KEY}"


def rel(path):
    """A path as the user would type it: relative inside the checkout, absolute outside."""
    r = os.path.relpath(path, TOP)
    return path if r.startswith("..") else r


def log(msg):
    print(f"[rsiw] {msg}", file=sys.stderr, flush=True)


class SeriesError(Exception):
    pass


def die(msg):
    raise SeriesError(msg)


def git(*args, cwd=REPO, env=None, input=None, check=True):
    e = dict(os.environ)
    e["LC_ALL"] = "C"
    if cwd != TOP:
        # The scratch repository's commands ignore the user's and the system's configuration
        # (diff.noprefix, format.* ...); ls-files in the checkout sees what kernel.sh sees.
        e.update({"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": os.devnull})
    if env:
        e.update(env)
    r = subprocess.run(["git", *args], cwd=cwd, env=e, input=input,
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    if check and r.returncode != 0:
        die(f"git {' '.join(args[:3])} ...: {r.stderr.decode(errors='replace').strip()}")
    return r


# ---------------------------------------------------------------------------------------------
# patches/upstream.txt


class Stanza:
    def __init__(self, kind, name, lineno):
        self.kind = kind  # "cover", "patch" or "exclude"
        self.name = name
        self.lineno = lineno
        self.headers = defaultdict(list)
        self.body = []
        self.index = None

    def one(self, key, default=None):
        v = self.headers.get(key)
        if not v:
            return default
        if len(v) > 1:
            die(f"{DATA}:{self.lineno}: more than one {key}:")
        return v[0]

    def words(self, key):
        return [w for v in self.headers.get(key, []) for w in v.split()]

    def where(self):
        return f"[{self.kind}{' ' + self.name if self.name else ''}] ({os.path.relpath(DATA, TOP)}:{self.lineno})"


KNOWN = {
    "cover": {"Subject"},
    "patch": {"Subject", "From", "Files", "Lines", "Glue"},
    "exclude": {"Files", "Lines", "Glue"},
}


def parse_data():
    """Parses patches/upstream.txt into (global headers, [Stanza])."""
    glob_headers = {}
    stanzas = []
    cur = None
    in_headers = True
    last_key = None
    with open(DATA, encoding="utf-8") as f:
        lines = f.read().split("\n")
    for n, raw in enumerate(lines, 1):
        line = raw.rstrip()
        if line.startswith("#"):
            continue
        m = re.match(r"^\[(cover|exclude|patch\s+([A-Za-z0-9_.-]+))\]$", line)
        if m:
            kind = m.group(1).split()[0]
            cur = Stanza(kind, m.group(2), n)
            stanzas.append(cur)
            in_headers = True
            last_key = None
            continue
        if in_headers:
            if not line:
                if cur is not None and cur.headers:
                    in_headers = False
                continue
            if line[0] in " \t" and last_key:
                target = cur.headers[last_key] if cur else None
                if target is None:
                    glob_headers[last_key] += " " + line.strip()
                else:
                    target[-1] += " " + line.strip()
                continue
            m = re.match(r"^([A-Za-z-]+):\s*(.*)$", line)
            if not m:
                die(f"{DATA}:{n}: expected 'Key: value', got {line!r}")
            last_key = m.group(1)
            if cur is None:
                glob_headers[last_key] = m.group(2)
            else:
                if last_key not in KNOWN[cur.kind]:
                    die(f"{DATA}:{n}: unknown header {last_key}: in [{cur.kind}]")
                cur.headers[last_key].append(m.group(2))
        else:
            cur.body.append(raw.rstrip())
    for s in stanzas:
        while s.body and not s.body[-1]:
            s.body.pop()
        while s.body and not s.body[0]:
            s.body.pop(0)
    if "From" not in glob_headers:
        die(f"{DATA}: no From: at the top (the author of the series)")
    if sum(1 for s in stanzas if s.kind == "cover") != 1:
        die(f"{DATA}: needs exactly one [cover]")
    names = [s.name for s in stanzas if s.kind == "patch"]
    dup = {x for x in names if names.count(x) > 1}
    if dup:
        die(f"{DATA}: patch names used twice: {', '.join(sorted(dup))}")
    return glob_headers, stanzas


class Rules:
    """Where each line, glue patch and overlay file goes (see the module doc)."""

    def __init__(self, stanzas, glue_names):
        self.line_rules = []  # (path, regex, stanza)
        self.glue = {}  # glue patch name -> stanza
        self.exact = {}  # path -> stanza
        self.globs = []  # (pattern, stanza)
        self.dirs = []  # (dir/, stanza)
        self.used = set()  # ids of the rules that placed something
        for s in stanzas:
            if s.kind == "cover":
                continue
            for spec in s.headers.get("Lines", []):
                parts = spec.split(None, 1)
                if len(parts) != 2:
                    die(f"{s.where()}: Lines: needs a path and a regular expression: {spec!r}")
                try:
                    rx = re.compile(parts[1])
                except re.error as e:
                    die(f"{s.where()}: Lines: {parts[1]!r}: {e}")
                self.line_rules.append((parts[0], rx, s))
            for g in s.words("Glue"):
                if g in self.glue:
                    die(f"{s.where()}: glue patch {g} is already in {self.glue[g].where()}")
                self.glue[g] = s
            for p in s.words("Files"):
                if p.endswith("/"):
                    self.dirs.append((p, s))
                elif any(c in p for c in "*?["):
                    self.globs.append((p, s))
                else:
                    if p in self.exact:
                        die(f"{s.where()}: {p} is already in {self.exact[p].where()}")
                    self.exact[p] = s
        self.dirs.sort(key=lambda d: -len(d[0]))
        missing = [g for g in glue_names if g not in self.glue]
        if missing:
            die("glue patches in patches/series but in no patch of "
                f"{os.path.relpath(DATA, TOP)} (add each to the Glue: of a [patch] or of [exclude]):\n  "
                + "\n  ".join(missing))

    def for_line(self, path, text):
        for i, (p, rx, s) in enumerate(self.line_rules):
            if p == path and rx.search(text):
                self.used.add(("line", i))
                return s
        return None

    def for_file(self, path):
        if path in self.exact:
            self.used.add(("exact", path))
            return self.exact[path]
        hits = [(pat, s) for pat, s in self.globs if fnmatch.fnmatchcase(path, pat)]
        if len(hits) > 1 and len({id(s) for _, s in hits}) > 1:
            die(f"{path} matches globs of two patches: "
                + ", ".join(f"{pat} in {s.where()}" for pat, s in hits))
        if hits:
            self.used.add(("glob", hits[0][0]))
            return hits[0][1]
        for d, s in self.dirs:
            if path.startswith(d):
                self.used.add(("dir", d))
                return s
        return None

    def stale(self, glue_names):
        """Rules that placed nothing: names of files or glue patches that do not exist (yet)."""
        out = []
        for i, (p, rx, s) in enumerate(self.line_rules):
            if ("line", i) not in self.used:
                out.append(f"Lines: {p} {rx.pattern}")
        for g, s in self.glue.items():
            if g not in glue_names:
                out.append(f"Glue: {g}")
        for p, s in self.exact.items():
            if ("exact", p) not in self.used:
                out.append(f"Files: {p}")
        for p, s in self.globs:
            if ("glob", p) not in self.used:
                out.append(f"Files: {p}")
        for p, s in self.dirs:
            if ("dir", p) not in self.used:
                out.append(f"Files: {p}")
        return out


# ---------------------------------------------------------------------------------------------
# The target tree: what kernel.sh prepares.


def read_series():
    with open(os.path.join(TOP, "patches/series"), encoding="utf-8") as f:
        return [l.strip() for l in f if l.strip() and not l.startswith("#")]


def glue_files(name):
    """The files a glue patch touches, as kernel.sh finds them (its +++ b/ lines)."""
    out = []
    with open(os.path.join(TOP, "patches", name), "rb") as f:
        prev = b""
        for line in f:
            if line.startswith(b"+++ ") and prev.startswith(b"--- "):
                if line.startswith(b"+++ /dev/null"):
                    die(f"patches/{name} deletes a file: the series supports only additions and edits")
                if not line.startswith(b"+++ b/"):
                    die(f"patches/{name}: unexpected {line.decode(errors='replace').strip()}")
                out.append(line[6:].rstrip(b"\n").split(b"\t")[0].decode())
            prev = line
    return out


def glue_message(name):
    """The subject and body of a glue patch (git format-patch or quilt style)."""
    with open(os.path.join(TOP, "patches", name), encoding="utf-8", errors="replace") as f:
        text = f.read()
    head, sep, rest = text.partition("\n\n")
    m = re.search(r"^Subject: (.*(?:\n .*)*)", head, re.M)
    if not m:
        die(f"patches/{name} has no Subject: for its own patch")
    subject = re.sub(r"\s*\n\s*", " ", m.group(1))
    subject = re.sub(r"^\[[^]]*\]\s*", "", subject)
    body = re.split(r"^---$|^diff --git ", rest, maxsplit=1, flags=re.M)[0]
    body = [l for l in body.rstrip().split("\n") if not l.startswith("Signed-off-by: ")]
    while body and not body[-1]:
        body.pop()
    return subject, body


def overlay_dirs():
    with open(os.path.join(TOP, "scripts/rsiw/kernel.sh"), encoding="utf-8") as f:
        m = re.search(r"^OVERLAY_DIRS=\(([^)]*)\)", f.read(), re.M)
    if not m:
        die("cannot find OVERLAY_DIRS=(...) in scripts/rsiw/kernel.sh")
    return m.group(1).split()


def overlay_files():
    """The files kernel.sh overlays: tracked and untracked, not ignored, that exist."""
    r = git("ls-files", "-z", "--cached", "--others", "--exclude-standard", "--",
            *overlay_dirs(), cwd=TOP)
    return sorted({p for p in r.stdout.decode().split("\0")
                   if p and os.path.isfile(os.path.join(TOP, p))})


def read(path):
    with open(path, "rb") as f:
        return f.read()


def split_lines(data):
    return re.findall(rb"[^\n]*\n|[^\n]+\Z", data)


class Line:
    __slots__ = ("data", "born", "died")

    def __init__(self, data, born=None):
        self.data = data
        self.born = born  # None: in pristine; else "glue NAME" or "overlay"
        self.died = None


class File:
    """One file's lines with where each came from and where it went."""

    def __init__(self, path, pristine):
        self.path = path
        self.in_pristine = pristine is not None
        self.binary = False
        self.lines = []
        if pristine is not None:
            self.lines = self._units(pristine, None)

    def _units(self, data, src):
        if b"\0" in data or self.binary:
            self.binary = True
            return [Line(data, src)] if data else []
        return [Line(l, src) for l in split_lines(data)]

    def alive(self):
        return [l for l in self.lines if l.died is None]

    def change(self, data, src):
        """Moves to the contents `data`, attributing the lines it adds or removes to `src`."""
        if b"\0" in data and not self.binary:
            self.binary = True
            for l in self.alive():
                l.died = src
            self.lines.append(Line(data, src))
            return
        alive = self.alive()
        new = self._units(data, src)
        a = [l.data for l in alive]
        b = [l.data for l in new]
        if a == b:
            return
        pos = {id(l): i for i, l in enumerate(self.lines)}
        full = self.lines
        out = []
        cursor = 0

        def upto(k):  # full-list entries before alive[k] not yet copied
            nonlocal cursor
            end = pos[id(alive[k])] if k < len(alive) else len(full)
            out.extend(full[cursor:end])
            cursor = end

        # Trim the common ends first: difflib is quadratic in what is left.
        lo = 0
        while lo < len(a) and lo < len(b) and a[lo] == b[lo]:
            lo += 1
        hi = 0
        while hi < len(a) - lo and hi < len(b) - lo and a[-1 - hi] == b[-1 - hi]:
            hi += 1
        ops = [("equal", 0, lo, 0, lo)] if lo else []
        sm = difflib.SequenceMatcher(None, a[lo:len(a) - hi], b[lo:len(b) - hi], autojunk=False)
        for tag, i1, i2, j1, j2 in sm.get_opcodes():
            ops.append((tag, i1 + lo, i2 + lo, j1 + lo, j2 + lo))
        if hi:
            ops.append(("equal", len(a) - hi, len(a), len(b) - hi, len(b)))
        for tag, i1, i2, j1, j2 in ops:
            if tag == "equal":
                upto(i2 - 1)
                out.append(full[cursor])
                cursor += 1
            elif tag in ("delete", "replace"):
                for k in range(i1, i2):
                    upto(k)
                    alive[k].died = src
                    out.append(full[cursor])
                    cursor += 1
                if tag == "replace":
                    out.extend(new[j1:j2])
            else:  # insert before alive[i1]
                upto(i1)
                out.extend(new[j1:j2])
        out.extend(full[cursor:])
        self.lines = out

    def content(self, keep):
        """The contents with the lines `keep(line)` says are there."""
        return b"".join(l.data for l in self.lines if keep(l))


def build_target():
    """Applies patches/series and the overlay as kernel.sh does, tracking every line."""
    series = read_series()
    files = {}

    def get(path):
        if path not in files:
            p = os.path.join(PRISTINE, path)
            files[path] = File(path, read(p) if os.path.isfile(p) else None)
        return files[path]

    touched = {name: glue_files(name) for name in series}
    glued = sorted({p for ps in touched.values() for p in ps})
    stage = tempfile.mkdtemp(prefix="rsiw-series.")
    try:
        for p in glued:
            src = os.path.join(PRISTINE, p)
            if os.path.isfile(src):
                os.makedirs(os.path.dirname(os.path.join(stage, p)), exist_ok=True)
                shutil.copyfile(src, os.path.join(stage, p))
            get(p)
        for name in series:
            with open(os.path.join(TOP, "patches", name), "rb") as f:
                r = subprocess.run(["patch", "-s", "-p1", "-d", stage, "--no-backup-if-mismatch",
                                    "-F0"], stdin=f, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            if r.returncode != 0:
                die(f"patch {name} does not apply to pristine 7.3.4 after the ones before it:\n"
                    + r.stdout.decode(errors="replace"))
            for p in touched[name]:
                get(p).change(read(os.path.join(stage, p)), "glue " + name)
    finally:
        shutil.rmtree(stage)
    overlay = overlay_files()
    both = sorted(set(overlay) & set(glued))
    if both:
        die(f"a file is both patched and overlaid: {both[0]}")
    for p in overlay:
        get(p).change(read(os.path.join(TOP, p)), "overlay")
    files = {p: f for p, f in files.items() if f.in_pristine or f.alive()}
    return series, files, overlay


# ---------------------------------------------------------------------------------------------
# Placing every change in a patch


def place(files, rules, order):
    """The patch (index, or NEVER) of every line added (born) or removed (died)."""
    where = {}
    errors = []
    for f in files.values():
        file_rule = None
        for l in f.lines:
            for what, src in (("born", l.born), ("died", l.died)):
                if src is None:
                    continue
                s = None
                if not f.binary:
                    s = rules.for_line(f.path, l.data.decode("utf-8", "replace").rstrip("\n"))
                if s is None and src.startswith("glue "):
                    s = rules.glue[src[5:]]
                if s is None:
                    if file_rule is None:
                        file_rule = rules.for_file(f.path) or False
                    s = file_rule or None
                if s is None:
                    errors.append(f.path)
                    break
                where[(id(l), what)] = NEVER if s.kind == "exclude" else order[id(s)]
            else:
                continue
            break
    if errors:
        die(f"files overlaid into the kernel tree but in no patch of {os.path.relpath(DATA, TOP)} "
            "(add them to the Files: of a [patch] or of [exclude]):\n  " + "\n  ".join(sorted(set(errors))))
    return where


def state(f, where, k):
    def keep(l):
        if l.born is not None and where[(id(l), "born")] > k:
            return False
        if l.died is not None and where[(id(l), "died")] <= k:
            return False
        return True

    data = f.content(keep)
    exists = f.in_pristine or any(keep(l) for l in f.lines if l.born is not None)
    return data if exists else None


# ---------------------------------------------------------------------------------------------
# The scratch repository: pristine 7.3.4 committed once, then per checkout its series.


def ident(who):
    m = re.match(r"^\s*(.*?)\s*<([^>]+)>\s*$", who)
    if not m:
        die(f"not an identity 'Name <email>': {who!r}")
    return m.group(1), m.group(2)


def ensure_repo():
    """The scratch repository, created on first use (about a minute) and kept in the cache."""
    if os.path.exists(os.path.join(REPO, ".rsiw-ready")):
        return
    if not os.path.isfile(os.path.join(PRISTINE, ".rsiw-verified")):
        die(f"no verified pristine source in {PRISTINE} (scripts/rsiw/kernel.sh fetch)")
    log("committing pristine 7.3.4 to a scratch git repository (once)")
    t0 = time.time()
    tmp = REPO + ".tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    git("init", "-q", cwd=tmp)
    for k, v in (("user.name", "rsiw series check"), ("user.email", "rsiw@localhost"),
                 ("gc.auto", "0"), ("core.looseCompression", "1"), ("advice.detachedHead", "false"),
                 ("am.threeWay", "false"), ("core.autocrlf", "false")):
        git("config", k, v, cwd=tmp)
    env = {"GIT_DIR": os.path.join(tmp, ".git"), "GIT_WORK_TREE": PRISTINE}
    git("add", "-A", "-f", "--", ".", ":!.rsiw-verified", cwd=PRISTINE, env=env)
    tree = git("write-tree", cwd=PRISTINE, env=env).stdout.decode().strip()
    cenv = {"GIT_AUTHOR_NAME": "Linux 7.3.4", "GIT_AUTHOR_EMAIL": "linux-source-7.3@debian",
            "GIT_AUTHOR_DATE": "@0 +0000", "GIT_COMMITTER_NAME": "Linux 7.3.4",
            "GIT_COMMITTER_EMAIL": "linux-source-7.3@debian", "GIT_COMMITTER_DATE": "@0 +0000"}
    commit = git("commit-tree", tree, "-m", "Linux 7.3.4 (Debian linux-source-7.3 7.3.4-1~bpo13+1)",
                 cwd=tmp, env=cenv).stdout.decode().strip()
    git("update-ref", PRISTINE_REF, commit, cwd=tmp)
    # A sparse work tree for `git am`: only the directories a series touches are checked out.
    git("sparse-checkout", "set", "--cone", cwd=tmp)
    git("checkout", "-q", "-f", "--detach", PRISTINE_REF, cwd=tmp)
    with open(os.path.join(tmp, ".git", "info", "exclude"), "a") as f:
        f.write("/.rsiw-ready\n")
    open(os.path.join(tmp, ".rsiw-ready"), "w").close()
    shutil.rmtree(REPO, ignore_errors=True)
    os.rename(tmp, REPO)
    log(f"scratch repository ready ({time.time() - t0:.0f} s): {REPO}")


def lock():
    os.makedirs(SCRATCH, exist_ok=True)
    fd = os.open(os.path.join(SCRATCH, "lock"), os.O_CREAT | os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
    return fd


def fast_import(stream):
    git("fast-import", "--quiet", "--force", "--done", input=stream)


def fi_data(b):
    return b"data %d\n" % len(b) + b + b"\n"


def commit_message(s, author):
    subject, body = s.one("Subject"), list(s.body)
    if not subject or not body:
        # A patch made of one glue patch may take that patch's subject, body or both.
        glue = s.words("Glue")
        if len(glue) != 1:
            die(f"{s.where()}: needs a Subject: and a body (only a patch with one Glue: "
                "can take them from it)")
        g_subject, g_body = glue_message(glue[0])
        subject, body = subject or g_subject, body or g_body
    if not body:
        die(f"{s.where()}: no body: say what the patch does and why")
    if len(subject) > 75:
        die(f"{s.where()}: subject over 75 characters (give it a Subject:): {subject!r}")
    sob = f"Signed-off-by: {author}"
    msg = subject + "\n\n" + "\n".join(body).rstrip() + "\n"
    if sob not in msg:
        msg += "\n" + sob + "\n"
    return msg


def generate(outdir):
    """Builds the series' commits in the scratch repository and writes the patches."""
    t0 = time.time()
    top_headers, stanzas = parse_data()
    series, files, overlay = build_target()
    rules = Rules(stanzas, series)
    patches = [s for s in stanzas if s.kind == "patch"]
    order = {id(s): i for i, s in enumerate(patches, 1)}
    where = place(files, rules, order)
    stale = rules.stale(series)
    if stale:
        log(f"note: {len(stale)} names in {os.path.relpath(DATA, TOP)} are not in this tree (yet): "
            + "; ".join(stale))

    # The state after each patch; a patch that changes nothing (its files are not there yet)
    # is left out.
    paths = sorted(files)
    states = [{p: state(files[p], where, 0) for p in paths}]
    steps = []
    for k, s in enumerate(patches, 1):
        cur = {p: state(files[p], where, k) for p in paths}
        changed = [p for p in paths if cur[p] != states[-1][p]]
        if changed:
            steps.append((s, changed))
            states.append(cur)
        else:
            log(f"note: [patch {s.name}] has nothing in this tree: left out")
    if not steps:
        die(f"{os.path.relpath(DATA, TOP)} puts nothing in any patch")
    final = states[-1]
    target = {p: files[p].content(lambda l: l.died is None) for p in paths}
    for p in paths:
        want = read(os.path.join(TOP, p)) if p in overlay else None
        if want is not None and want != target[p]:
            die(f"internal error: {p} does not come out as the repository has it")
    excluded = [p for p in paths if final[p] != target[p]]

    date = git("log", "-1", "--format=%ct", cwd=TOP).stdout.decode().strip() or "0"
    ensure_repo()
    base = git("rev-parse", PRISTINE_REF).stdout.decode().strip()
    modes = {}
    for line in git("ls-tree", "-r", base, "--", *paths).stdout.decode().splitlines():
        meta, path = line.split("\t", 1)
        modes[path] = meta.split()[0]

    def mode(p):
        if p in modes:
            return modes[p]
        return "100755" if os.access(os.path.join(TOP, p), os.X_OK) and p in overlay else "100644"

    default_author = top_headers["From"]
    stream = [b"feature done\n"]
    for n, (s, changed) in enumerate(steps, 1):
        author = s.one("From", default_author)
        name, email = ident(author)
        msg = commit_message(s, author).encode()
        when = f"{int(date) + n} +0000".encode()
        stream.append(b"commit %s\nmark :%d\n" % (SERIES_REF.encode(), n))
        stream.append(b"author %s <%s> %s\n" % (name.encode(), email.encode(), when))
        stream.append(b"committer %s <%s> %s\n" % (name.encode(), email.encode(), when))
        stream.append(fi_data(msg))
        stream.append(b"from %s\n" % (base.encode() if n == 1 else b":%d" % (n - 1)))
        for p in changed:
            data = states[n][p]
            if data is None:
                stream.append(b"D %s\n" % p.encode())
            else:
                stream.append(b"M %s inline %s\n" % (mode(p).encode(), p.encode()))
                stream.append(fi_data(data))
    # The target: what kernel.sh builds, as one commit on pristine.
    stream.append(b"commit %s\n" % TARGET_REF.encode())
    stream.append(b"committer rsiw <rsiw@localhost> 0 +0000\n")
    stream.append(fi_data(b"kernel.sh's tree: pristine 7.3.4, patches/series and the overlay\n"))
    stream.append(b"from %s\n" % base.encode())
    for p in paths:
        if target[p] is not None and (not files[p].in_pristine or target[p] != states[0][p]):
            stream.append(b"M %s inline %s\n" % (mode(p).encode(), p.encode()))
            stream.append(fi_data(target[p]))
    stream.append(b"done\n")
    fast_import(b"".join(stream))

    # The patches, with the cover letter filled in.
    shutil.rmtree(outdir, ignore_errors=True)
    os.makedirs(outdir)
    git("format-patch", "-q", "-n", "--cover-letter", "--zero-commit", "--no-signature",
        "--subject-prefix=PATCH", "-o", outdir, f"{base}..{SERIES_REF}")
    cover = next(s for s in stanzas if s.kind == "cover")
    out = sorted(os.listdir(outdir))
    cl = os.path.join(outdir, out[0])
    text = open(cl, encoding="utf-8").read()
    text = text.replace("*** SUBJECT HERE ***", cover.one("Subject") or die("[cover] needs a Subject:"))
    text = text.replace("*** BLURB HERE ***", "\n".join(cover.body).rstrip())
    # The cover letter is the series author's, dated with the first patch.
    head, sep, rest = text.partition("\n\n")
    head = re.sub(r"^From: .*$", lambda m: f"From: {default_author}", head, count=1, flags=re.M)
    first = open(os.path.join(outdir, out[1]), encoding="utf-8").read() if len(out) > 1 else ""
    m = re.search(r"^Date: .*$", first, re.M)
    if m:
        head = re.sub(r"^Date: .*$", lambda _: m.group(0), head, count=1, flags=re.M)
    text = head + sep + rest
    open(cl, "w", encoding="utf-8").write(text)
    log(f"series: {len(steps)} patches and a cover letter in {rel(outdir)} "
        f"({time.time() - t0:.1f} s)")
    return steps, excluded, [os.path.join(outdir, f) for f in out], paths, states


# ---------------------------------------------------------------------------------------------
# Every prefix of the series is a consistent tree


def rust_paths(text, root):
    """The paths `root::a::b...` in Rust source, with use trees expanded; comments and strings
    are skipped."""
    text = re.sub(r'//[^\n]*|/\*.*?\*/|"(?:\\.|[^"\\])*"', " ", text, flags=re.S)
    toks = re.findall(r"[A-Za-z_][A-Za-z0-9_]*|::|[{},*;]|\S", text)
    out = []

    def tree(i, prefix):  # parses a use tree or a path at toks[i]; returns the next index
        if i < len(toks) and toks[i] == "{":
            i += 1
            while i < len(toks) and toks[i] != "}":
                i = tree(i, prefix)
                if i < len(toks) and toks[i] == ",":
                    i += 1
            return i + 1
        if i < len(toks) and re.match(r"[A-Za-z_]", toks[i]) and toks[i] not in ("self", "as"):
            path = prefix + [toks[i]]
            if i + 1 < len(toks) and toks[i + 1] == "::":
                return tree(i + 2, path)
            out.append(path)
            return i + 1
        out.append(prefix)
        return i + 1 if i < len(toks) and toks[i] in ("self", "*") else i

    for i, t in enumerate(toks):
        if t == root and i + 1 < len(toks) and toks[i + 1] == "::" and (i == 0 or toks[i - 1] != "::"):
            tree(i + 2, [])
    return out


def module_files(base, path):
    d = "/".join(path)
    return [f"{base}/{d}.rs", f"{base}/{d}/mod.rs"]


def prefix_problems(steps, states, final):
    """What would keep a prefix of the series from building, found without building it: a `mod`,
    `#include "..."` (C helpers), Kconfig `source` or Makefile `obj-` that names a file the prefix
    lacks, and Rust paths into a module that only a later patch adds."""
    problems = []
    for n, (s, changed) in enumerate(steps, 1):
        st = states[n]

        def have(path):
            if path in st:
                return st[path] is not None
            return os.path.exists(os.path.join(PRISTINE, path))

        def contents(path):
            if path in st:
                return st[path] or b""
            p = os.path.join(PRISTINE, path)
            return read(p) if os.path.isfile(p) else b""

        for p in changed:
            data = st[p]
            if data is None:
                continue
            text = data.decode("utf-8", "replace")
            need = []
            d = os.path.dirname(p)
            if p.endswith(".rs"):
                stem = os.path.basename(p)[:-3]
                # A crate root (lib.rs, or a module's object named in its Makefile) has its
                # modules beside it; any other file in the directory of its name.
                mk = b"".join(contents(f"{d}/{m}") for m in ("Makefile", "Kbuild"))
                root = stem in ("mod", "lib") or re.search(rb"\b%s\.o\b" % stem.encode(), mk)
                modbase = d if root else f"{d}/{stem}"
                for m in re.finditer(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", text, re.M):
                    need.append((m.group(0).strip(), module_files(modbase, [m.group(1)])))
                if p.startswith("rust/kernel/"):
                    for path in rust_paths(text, "crate"):
                        for j in range(1, len(path) + 1):
                            cands = module_files("rust/kernel", path[:j])
                            later = [c for c in cands if final.get(c) is not None]
                            if not later:
                                break  # not a module the series adds: an item, or pristine
                            need.append(("crate::" + "::".join(path[:j]), later))
            elif p == "rust/helpers/helpers.c":
                for m in re.finditer(r'^#include "([^"]+)"', text, re.M):
                    need.append((m.group(0), [f"rust/helpers/{m.group(1)}"]))
            elif os.path.basename(p).startswith("Kconfig"):
                for m in re.finditer(r'^\s*source "([^"]+)"', text, re.M):
                    need.append((m.group(0).strip(), [m.group(1)]))
            elif os.path.basename(p) in ("Makefile", "Kbuild"):
                for m in re.finditer(r"^obj-\$\(CONFIG_\w+\)\s*[+:]?=\s*(\S+)/\s*$", text, re.M):
                    sub = f"{d}/{m.group(1)}" if d else m.group(1)
                    need.append((m.group(0).strip(), [f"{sub}/Makefile", f"{sub}/Kbuild"]))
            for what, cands in need:
                if not any(have(c) for c in cands):
                    problems.append(f"patch {n}/{len(steps)} [{s.name}]: {p}: {what}: "
                                    f"{cands[0]} comes later or not at all")
    return list(dict.fromkeys(problems))


# ---------------------------------------------------------------------------------------------
# make check


def checkpatch(patch):
    r = subprocess.run(["perl", os.path.join(PRISTINE, "scripts/checkpatch.pl"), "--strict",
                        "--show-types", "--no-summary", "--mailback", "--color=never", patch],
                       cwd=PRISTINE, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    text = r.stdout.decode(errors="replace")
    found = re.findall(r"^(ERROR|WARNING|CHECK):([A-Z_0-9]+): (.*)$", text, re.M)
    return found, text


def check(outdir):
    t0 = time.time()
    fd = lock()
    try:
        if os.path.isdir(REPO):
            git("update-ref", "-d", AM_REF, check=False)  # no stale result for `tree`
        steps, excluded, out, paths, states = generate(outdir)
        patches = out[1:]
        passed = failed = 0
        failures = []

        # 1. git am onto pristine 7.3.4, in the sparse work tree.
        dirs = sorted({os.path.dirname(p) for p in paths if os.path.dirname(p)})
        git("am", "--abort", check=False)
        git("checkout", "-q", "-f", "--detach", PRISTINE_REF)
        git("sparse-checkout", "set", "--cone", *dirs)
        git("clean", "-q", "-f", "-d")
        r = git("am", "-q", "--whitespace=error-all", *patches, check=False)
        if r.returncode != 0:
            failed += 1
            failures.append("git am")
            text = r.stdout.decode(errors="replace") + r.stderr.decode(errors="replace")
            print("".join(l for l in text.splitlines(True) if not l.startswith("hint: ")))
            git("am", "--abort", check=False)
            print("series: git am onto pristine 7.3.4: FAILED")
        else:
            passed += 1
            git("update-ref", AM_REF, "HEAD")
            am_tree = git("rev-parse", "HEAD^{tree}").stdout.decode().strip()
            ser_tree = git("rev-parse", SERIES_REF + "^{tree}").stdout.decode().strip()
            print(f"series: git am onto pristine 7.3.4: {len(patches)} patches applied")
            # 2. The result is the tree kernel.sh builds, but for what [exclude] keeps out.
            diff = git("diff", "--name-only", "--no-renames", AM_REF, TARGET_REF).stdout.decode().split()
            if am_tree != ser_tree or sorted(diff) != sorted(excluded):
                failed += 1
                failures.append("tree")
                print("series: the git am tree differs from kernel.sh's tree in: "
                      + " ".join(sorted(set(diff) ^ set(excluded))))
            else:
                passed += 1
                print(f"series: the git am tree is kernel.sh's tree, byte for byte, but for "
                      f"{len(excluded)} file(s) kept out: {' '.join(excluded)}")

        # 3. Each prefix names only what it has.
        problems = prefix_problems(steps, states, states[-1])
        if problems:
            failed += 1
            failures.append("prefixes")
            print("series: a prefix of the series refers to what it lacks:\n  " + "\n  ".join(problems))
        else:
            passed += 1
            print(f"series: every prefix has the modules, helpers, Kconfig and Makefiles it names")

        # 4. checkpatch.pl --strict, on every patch but the cover letter.
        report = []
        warnings = 0
        for p, (s, _) in zip(patches, steps):
            found, text = checkpatch(p)
            report.append(f"==== {os.path.basename(p)}\n{text}")
            errs = [f for f in found if f[0] == "ERROR"]
            warnings += len(found) - len(errs)
            kinds = defaultdict(int)
            for level, typ, _ in found:
                kinds[f"{level}:{typ}"] += 1
            summary = ", ".join(f"{k} x{v}" if v > 1 else k for k, v in sorted(kinds.items())) or "clean"
            print(f"series: checkpatch {os.path.basename(p)}: {summary}")
            for level, typ, msg in errs:
                print(f"    {level}:{typ}: {msg}")
            if errs:
                failed += 1
                failures.append(os.path.basename(p))
            else:
                passed += 1
        with open(os.path.join(outdir, "checkpatch.txt"), "w") as f:
            f.write("\n".join(report))
        print(f"series: checkpatch --strict: {warnings} warnings and checks, "
              f"all in {rel(os.path.join(outdir, 'checkpatch.txt'))}")
    finally:
        os.close(fd)
    print(f"series: {passed} passed, {failed} failed ({time.time() - t0:.0f} s)")
    return failed == 0


def tree():
    """Compares kernel.sh's working tree with the tree the last check's `git am` produced."""
    fd = lock()
    try:
        if git("rev-parse", "-q", "--verify", AM_REF, check=False).returncode != 0:
            die("no git am result for this checkout: scripts/rsiw/series.sh check failed or did not run")
        # Every file kernel.sh patched or overlaid, and every file the series changes.
        listed = set()
        for n in ("patched", "overlay"):
            with open(os.path.join(TREE, ".rsiw", n)) as f:
                listed |= {l.strip() for l in f if l.strip()}

        def names(a, b):
            return set(git("diff", "--name-only", "--no-renames", a, b).stdout.decode().split())

        excluded = names(AM_REF, TARGET_REF)
        paths = sorted((listed | names(PRISTINE_REF, TARGET_REF) | names(PRISTINE_REF, AM_REF))
                       - excluded)
        want = {}
        for line in git("ls-tree", "-r", AM_REF, "--", *paths).stdout.decode().splitlines():
            meta, path = line.split("\t", 1)
            want[path] = meta.split()[2]
        there = [p for p in paths if os.path.isfile(os.path.join(TREE, p))]
        hashes = git("hash-object", "--no-filters", "--stdin-paths",
                     input="".join(os.path.join(TREE, p) + "\n" for p in there).encode()
                     ).stdout.decode().split()
        have = dict(zip(there, hashes))
        bad = [p for p in paths if have.get(p) != want.get(p)]
        if bad:
            print(f"series-tree: {TREE} is not the series' tree in {len(bad)} file(s) (was it "
                  "prepared from another checkout, or did this one change since the check?): "
                  + " ".join(bad[:20]))
            print("series-tree: 0 passed, 1 failed")
            return False
        print(f"series-tree: {TREE} is the series' git am tree, byte for byte, in all {len(paths)} "
              f"files that kernel.sh or the series changes (kept out: {len(excluded)})")
        print("series-tree: 1 passed, 0 failed")
        return True
    finally:
        os.close(fd)


def prefixes(every, only):
    """Builds the kernel crate and the changed C and Rust directories of every prefix of the
    series (but the whole series unless `every`: the kernel stage builds that tree; only the
    prefixes `only` if given), in a private tree and build directory with the light kernel's
    configuration.
    Slow (a kernel crate build per patch): on a shared machine, run it under the rig."""
    config = os.path.join(CACHE, "build-light", ".config")
    if not os.path.isfile(config):
        die(f"no {config}: build the light kernel first (scripts/rsiw/kernel.sh build light)")
    pin = f"refs/rsiw/prefixes/{KEY}"
    # The series is made afresh and pinned under the scratch lock, which is then released: a
    # `check` of any checkout must not wait for these builds. Objects are never pruned there.
    fd = lock()
    try:
        generate(os.path.join(SCRATCH, f"prefix-patches-{KEY}"))
        git("update-ref", pin, SERIES_REF)
    finally:
        os.close(fd)
    commits = git("rev-list", "--reverse", f"{PRISTINE_REF}..{pin}").stdout.decode().split()
    paths = git("diff", "--name-only", "--no-renames", PRISTINE_REF, pin).stdout.decode().split()
    last = len(commits) if every else len(commits) - 1
    todo = list(range(1, last + 1))
    if only:
        bad = [k for k in only if not 1 <= k <= len(commits)]
        if bad:
            die(f"no prefix {bad[0]}: the series has {len(commits)} patches")
        todo = sorted(set(only))
    # The private tree and build directory are shared by all checkouts: one run at a time.
    os.makedirs(SCRATCH, exist_ok=True)
    pfd = os.open(os.path.join(SCRATCH, "prefix.lock"), os.O_CREAT | os.O_RDWR)
    fcntl.flock(pfd, fcntl.LOCK_EX)
    try:
        ptree = os.path.join(SCRATCH, "prefix-tree")
        pbuild = os.path.join(SCRATCH, "prefix-build")
        if not os.path.isdir(ptree):
            # Hard links are safe: files are replaced below, never written in place.
            shutil.rmtree(ptree + ".tmp", ignore_errors=True)
            subprocess.run(["cp", "-al", PRISTINE, ptree + ".tmp"], check=True)
            os.rename(ptree + ".tmp", ptree)
        os.makedirs(pbuild, exist_ok=True)
        llvm = os.environ.get("RSIW_LLVM", "-19")
        passed = failed = 0
        for k in todo:
            c = commits[k - 1]
            subject = git("log", "-1", "--format=%s", c).stdout.decode().strip()
            blobs = {}
            for line in git("ls-tree", "-r", c, "--", *paths).stdout.decode().splitlines():
                meta, path = line.split("\t", 1)
                blobs[path] = meta.split()[2]
            for p in paths:
                dst = os.path.join(ptree, p)
                if p in blobs:
                    data = git("cat-file", "blob", blobs[p]).stdout
                elif os.path.isfile(os.path.join(PRISTINE, p)):
                    data = read(os.path.join(PRISTINE, p))
                else:
                    data = None
                if data is None:
                    if os.path.lexists(dst):
                        os.unlink(dst)
                    continue
                if os.path.isfile(dst) and read(dst) == data:
                    continue
                os.makedirs(os.path.dirname(dst), exist_ok=True)
                with open(dst + ".rsiw-tmp", "wb") as f:
                    f.write(data)
                os.replace(dst + ".rsiw-tmp", dst)
            # rust/ and every directory outside it with a changed C or Rust file in this prefix
            # and a Makefile (not a Rust module's subdirectory).
            dirs = sorted({os.path.dirname(p) + "/" for p in paths if p.endswith((".c", ".rs"))
                           and not p.startswith("rust/") and os.path.isfile(os.path.join(ptree, p))
                           and any(os.path.isfile(os.path.join(ptree, os.path.dirname(p), m))
                                   for m in ("Makefile", "Kbuild"))} | {"rust/"})
            pconfig = os.path.join(pbuild, ".config")
            if not os.path.isfile(pconfig) or read(pconfig) != read(config):
                shutil.copyfile(config, pconfig)
            mk = ["make", "-C", ptree, f"O={pbuild}", f"LLVM={llvm}", "-s"]
            t0 = time.time()
            logf = os.path.join(SCRATCH, f"prefix-{k}.log")
            with open(logf, "wb") as lf:
                ok = subprocess.run(mk + ["olddefconfig"], stdout=lf, stderr=subprocess.STDOUT).returncode == 0
                ok = ok and subprocess.run(mk + [f"-j{os.cpu_count()}", *dirs], stdout=lf,
                                           stderr=subprocess.STDOUT).returncode == 0
            state = "builds" if ok else f"FAILS (log: {logf})"
            print(f"prefixes: {k}/{len(commits)} {subject}: {' '.join(dirs)} {state} "
                  f"({time.time() - t0:.0f} s)", flush=True)
            passed, failed = passed + ok, failed + (not ok)
        print(f"prefixes: {passed} passed, {failed} failed")
        return failed == 0
    finally:
        os.close(pfd)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", nargs="?", default="make", choices=("make", "check", "tree", "prefixes"))
    ap.add_argument("--all", action="store_true", help="prefixes: the whole series too")
    ap.add_argument("--only", type=lambda v: [int(x) for x in v.split(",")], default=[],
                    metavar="K[,K...]", help="prefixes: only these (1: the first patch alone)")
    ap.add_argument("-o", "--output", default=os.path.join(TOP, "out/series"))
    a = ap.parse_args()
    try:
        if a.command == "make":
            fd = lock()
            try:
                generate(a.output)
            finally:
                os.close(fd)
            return 0
        if a.command == "check":
            return 0 if check(a.output) else 1
        if a.command == "prefixes":
            return 0 if prefixes(a.all, a.only) else 1
        return 0 if tree() else 1
    except SeriesError as e:
        print(f"[rsiw] error: {e}", file=sys.stderr)
        if a.command != "make":
            print(f"series: 0 passed, 1 failed")
        return 1


if __name__ == "__main__":
    sys.exit(main())
