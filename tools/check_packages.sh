#!/usr/bin/env bash
# Packaging audit: does setup.sh install everything a build read?
#
# After a build, collects every file outside the source tree and the build
# folder that the compiler, the linker and CMake read:
#   - the compiler's dependency files (*.d: every header, with gcc's -MD);
#   - the link lines (*/link.txt): absolute libraries, -lNAME resolved the way
#     the linker does (-L folders, then the compiler's own), the compiler's
#     implicit libraries (libstdc++, libm, libc, libgcc...), GNU ld scripts
#     followed (libc.so names libc.so.6 and libc_nonshared.a), the tools;
#   - CMake's cache (*_LIBRARY, *_INCLUDE_DIR, *_DIR, compilers and tools),
#     the package config files configure read (CMakeFiles/Makefile.cmake)
#     and the pkg-config files behind pkg_check_modules;
# maps each file to its Debian package (dpkg's database, read once; a path
# is tried as given, with its folders' symlinks resolved, fully resolved,
# and in its /usr-merged twin), and checks that each package is in
# setup.sh's `packages=( ... )` list or pulled in, recursively, by one that
# is (Depends and Pre-Depends of the installed packages; alternatives, version
# constraints, :any and Provides handled).
#
# Exit 0 when every package is covered, 1 naming each file and its package
# when one is not, 2 on a usage error or a build folder without dependency
# files. Files from no package (the CUDA toolkit under /usr/local/cuda, a
# hand-built library) are listed in one summary and do not fail: CUDA is
# optional (docs/cuda.md), and anything else there is worth a look.
#
#   tools/check_packages.sh [--list FILE] [--verbose] [BUILD_DIR]   # default build/
#   CONVOY_PACKAGE_LIST=FILE tools/check_packages.sh                # same as --list
# FILE is either a shell file with a `packages=( ... )` array (setup.sh is
# the default) or plain package names, separated by blanks or lines, with
# # comments. tools/check_packages_selftest.sh shows it failing.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
list="${CONVOY_PACKAGE_LIST:-$root/setup.sh}"
verbose=0
build=""
usage() { sed -n '/^#   tools/,/^#   CONVOY/p' "$0" | sed 's/^# *//'; }
while (($#)); do
  case "$1" in
    --list) [[ $# -ge 2 ]] || { usage >&2; exit 2; }; list="$2"; shift 2 ;;
    --list=*) list="${1#--list=}"; shift ;;
    -v|--verbose) verbose=1; shift ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "check_packages: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) [[ -z $build ]] || { echo "check_packages: one build folder only" >&2; exit 2; }; build="$1"; shift ;;
  esac
done
build="${build:-$root/build}"
[[ -d $build ]] || { echo "check_packages: no build folder $build" >&2; exit 2; }
[[ -f $list ]] || { echo "check_packages: no package list $list" >&2; exit 2; }
command -v dpkg-query >/dev/null || { echo "check_packages: needs dpkg (a Debian system)" >&2; exit 2; }

exec python3 - "$root" "$(cd "$build" && pwd)" "$list" "$verbose" <<'PY'
import glob, os, re, shlex, subprocess, sys

root, build, list_file, verbose = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4] == "1"

def fail_usage(msg):
    print(f"check_packages: {msg}", file=sys.stderr)
    sys.exit(2)

# ---- the package list -------------------------------------------------------
def read_list(path):
    text = open(path, encoding="utf-8").read()
    m = re.search(r"^\s*packages=\((.*?)^\s*\)", text, re.S | re.M)
    body = m.group(1) if m else text
    names = []
    for line in body.splitlines():
        line = line.split("#", 1)[0]
        names += [w for w in line.split() if w]
    bad = [n for n in names if not re.fullmatch(r"[a-z0-9][a-z0-9+.-]+(:[a-z0-9-]+)?", n)]
    if bad:
        fail_usage(f"{path}: not package names: {' '.join(bad)}")
    return [n.split(":")[0] for n in names]

listed = read_list(list_file)
if not listed:
    fail_usage(f"{list_file}: no packages found")

# ---- cache and tree -----------------------------------------------------------
cache = {}
cache_file = os.path.join(build, "CMakeCache.txt")
if os.path.exists(cache_file):
    for line in open(cache_file, encoding="utf-8", errors="replace"):
        m = re.match(r"^([^#/][^:=]*):([A-Z]+)=(.*)$", line.rstrip("\n"))
        if m:
            cache[m.group(1)] = (m.group(2), m.group(3))
trees = [os.path.realpath(build), os.path.realpath(root)]
if "CMAKE_HOME_DIRECTORY" in cache:
    trees.append(os.path.realpath(cache["CMAKE_HOME_DIRECTORY"][1]))

def outside(p):
    rp = os.path.realpath(p)
    for t in trees:
        if rp == t or rp.startswith(t + "/") or p == t or p.startswith(t + "/"):
            return False
    return True

files = {}  # path -> where it was seen (first source)
def add(path, why):
    path = os.path.normpath(path)
    if path.startswith("/") and outside(path) and os.path.exists(path):
        files.setdefault(path, why)

# ---- dependency files ---------------------------------------------------------
depfiles = [p for p in glob.glob(os.path.join(build, "**", "*.d"), recursive=True) if os.path.isfile(p)]
if not depfiles:
    fail_usage(f"{build} has no compiler dependency files (*.d): build it first")
for d in depfiles:
    # The Makefile generator runs the compiler in the folder above CMakeFiles/.
    cwd = d.split("/CMakeFiles/")[0] if "/CMakeFiles/" in d else os.path.dirname(d)
    text = open(d, encoding="utf-8", errors="replace").read().replace("\\\n", " ")
    for line in text.splitlines():
        if ":" not in line or line.startswith("#"):
            continue
        # target(s): prerequisites; "\ " is an escaped blank inside a name
        deps = re.split(r"(?<!\\):\s", line, maxsplit=1)
        if len(deps) < 2:
            continue
        for tok in re.split(r"(?<!\\)\s+", deps[1].strip()):
            tok = tok.replace("\\ ", " ").replace("$$", "$")
            if tok:
                add(tok if tok.startswith("/") else os.path.join(cwd, tok), "header")

# ---- link lines -----------------------------------------------------------------
def implicit(var_suffix):
    out = []
    for f in glob.glob(os.path.join(build, "CMakeFiles", "*", "CMake*Compiler.cmake")):
        for line in open(f, encoding="utf-8", errors="replace"):
            m = re.match(r'set\(CMAKE_\w+_IMPLICIT_' + var_suffix + r' "(.*)"\)', line)
            if m:
                out += [x for x in m.group(1).split(";") if x and x not in out]
    return out

implicit_dirs = implicit("LINK_DIRECTORIES")
implicit_libs = implicit("LINK_LIBRARIES")

def ld_script_inputs(path):
    """Files a GNU ld script (e.g. libc.so) names in GROUP/INPUT."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(4096)
    except OSError:
        return []
    if head.startswith(b"\x7fELF") or b"GROUP" not in head and b"INPUT" not in head:
        return []
    text = head.decode("utf-8", "replace")
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    return re.findall(r"(/[^\s()]+)", " ".join(re.findall(r"(?:GROUP|INPUT|AS_NEEDED)\s*\(([^)]*)\)", text)))

def add_library(path, why):
    add(path, why)
    for p in ld_script_inputs(path):
        add(p, why + " (ld script)")

def resolve_l(name, dirs, static):
    if name.startswith(":"):
        cands = [name[1:]]
    else:
        cands = ([] if static else [f"lib{name}.so"]) + [f"lib{name}.a"]
    for d in dirs:
        for c in cands:
            p = os.path.join(d, c)
            if os.path.exists(p):
                return p
    return None

unresolved = []
for lt in glob.glob(os.path.join(build, "**", "link.txt"), recursive=True):
    cwd = lt.split("/CMakeFiles/")[0]
    for line in open(lt, encoding="utf-8", errors="replace"):
        try:
            toks = shlex.split(line)
        except ValueError:
            toks = line.split()
        if not toks:
            continue
        if toks[0].startswith("/"):
            add(toks[0], "tool")
        ldirs, static = [], False
        for t in toks:
            if t.startswith("-L"):
                ldirs.append(t[2:])
        dirs = ldirs + implicit_dirs
        for t in toks[1:]:
            if t in ("-Wl,-Bstatic", "-static"):
                static = True
            elif t == "-Wl,-Bdynamic":
                static = False
            elif t.startswith("-l"):
                p = resolve_l(t[2:], dirs, static)
                if p:
                    add_library(p, "link -l")
                else:
                    unresolved.append(t)
            elif not t.startswith("-") and re.search(r"\.(so(\.[0-9.]+)?|a)$", t):
                add_library(t if t.startswith("/") else os.path.join(cwd, t), "link")
        if "-o" in toks and not os.path.basename(toks[0]).endswith(("ar", "ranlib")):
            # the compiler driver links its own libraries too
            for lib in implicit_libs:
                p = resolve_l(lib, implicit_dirs, False)
                if p:
                    add_library(p, "implicit link")

# ---- CMake's cache, configure's inputs, pkg-config -----------------------------------
key_re = re.compile(r"(_LIBRARY|_LIBRARIES|_LIBRARY_RELEASE|_INCLUDE_DIRS?|_DIR|_EXECUTABLE|_COMPILER|_AR|_RANLIB|_LINKER|^pkgcfg_lib_\w+)$|_LIBRARY_|_INCLUDE_DIR")
dirs_seen = []
for key, (typ, val) in cache.items():
    if typ not in ("PATH", "FILEPATH", "STRING") or not key_re.search(key):
        continue
    for v in val.split(";"):
        if v.startswith("/") and "NOTFOUND" not in v:
            if os.path.isdir(v):
                dirs_seen.append(v)
            else:
                add(v, "CMake cache")
mk = os.path.join(build, "CMakeFiles", "Makefile.cmake")
if os.path.exists(mk):
    text = open(mk, encoding="utf-8", errors="replace").read()
    m = re.search(r"set\(CMAKE_MAKEFILE_DEPENDS(.*?)\)", text, re.S)
    for p in re.findall(r'"(/[^"]+)"', m.group(1) if m else ""):
        add(p, "configure")
pc_todo = []
for key, (typ, val) in cache.items():
    if key.startswith("__pkg_config_arguments_"):
        pc_todo += [a.split()[0] for a in val.split(";")
                    if a and a not in ("REQUIRED", "QUIET", "IMPORTED_TARGET", "GLOBAL", "NO_CMAKE_PATH", "NO_CMAKE_ENVIRONMENT_PATH")]
pc_done = set()
pkg_config = cache.get("PKG_CONFIG_EXECUTABLE", ("", "pkg-config"))[1] or "pkg-config"
while pc_todo:
    mod = re.split(r"[<>=!]", pc_todo.pop())[0].strip()
    if not mod or mod in pc_done:
        continue
    pc_done.add(mod)
    try:
        path = subprocess.run([pkg_config, "--path", mod], capture_output=True, text=True).stdout.strip()
        req = subprocess.run([pkg_config, "--print-requires", "--print-requires-private", mod],
                             capture_output=True, text=True).stdout.split("\n")
    except OSError:
        break
    if path:
        add(path, "pkg-config")
    pc_todo += [r.split()[0] for r in req if r.strip()]

# ---- dpkg's database: files -> packages ------------------------------------------
owners = {}
for lst in glob.glob("/var/lib/dpkg/info/*.list"):
    pkg = os.path.basename(lst)[:-5].split(":")[0]
    with open(lst, encoding="utf-8", errors="surrogateescape") as fh:
        for line in fh:
            owners.setdefault(line.rstrip("\n"), set()).add(pkg)
if os.path.exists("/var/lib/dpkg/diversions"):
    # triples: original path, diverted-to path, diverting package
    lines = open("/var/lib/dpkg/diversions", encoding="utf-8", errors="replace").read().splitlines()
    for orig, to, by in zip(lines[0::3], lines[1::3], lines[2::3]):
        if orig in owners and to not in owners:
            owners[to] = set(owners[orig])

def merged_twins(p):
    out = [p]
    for top in ("/bin/", "/sbin/", "/lib/", "/lib32/", "/lib64/", "/libx32/"):
        if p.startswith(top):
            out.append("/usr" + p)
        if p.startswith("/usr" + top):
            out.append(p[4:])
    return out

def lookup(p):
    for q in merged_twins(p):
        if q in owners:
            return owners[q]
    return None

def file_owners(p):
    """Owner sets that must be installed for p to be there: the path as named
    (folders' symlinks resolved if needed) and, if different, its target."""
    groups = []
    named = [p, os.path.join(os.path.realpath(os.path.dirname(p)), os.path.basename(p))]
    for c in named:
        o = lookup(c)
        if o:
            groups.append((c, o))
            break
    rp = os.path.realpath(p)
    if rp not in named or not groups:
        o = lookup(rp)
        if o and not (groups and groups[0][1] == o):
            groups.append((rp, o))
    return groups

# ---- the closure of the list ---------------------------------------------------
q = subprocess.run(["dpkg-query", "-W", "-f=${Package}\t${db:Status-Abbrev}\t${Provides}\t${Depends}\t${Pre-Depends}\n"],
                   capture_output=True, text=True, check=True).stdout
installed, provides = {}, {}
for line in q.splitlines():
    f = line.split("\t")
    if len(f) < 5 or not f[1].startswith("ii"):
        continue
    name = f[0]
    installed.setdefault(name, []).append(f[3] + ", " + f[4])
    for prov in f[2].split(","):
        prov = re.sub(r"\(.*?\)", "", prov).strip().split(":")[0]
        if prov:
            provides.setdefault(prov, set()).add(name)

def strip_dep(alt):
    return re.sub(r"\(.*?\)|\[.*?\]|<.*?>", "", alt).strip().split(":")[0]

def satisfiers(name):
    if name in installed:
        return [name]
    return sorted(provides.get(name, ()))

def close(names, not_installed=None):
    """names plus everything they pull in, recursively."""
    closure, todo = set(), list(names)
    while todo:
        name = todo.pop()
        if name in closure:
            continue
        sat = satisfiers(name)
        if not sat:
            if not_installed is not None and name in names:
                not_installed.append(name)
            continue
        closure.add(name)
        follow(name, sat, todo)
    return closure

def follow(name, sat, todo):
    for s in sat:
        if s != name:
            todo.append(s)
            continue
        for deps in installed[s]:
            for clause in deps.split(","):
                if not clause.strip():
                    continue
                # alternatives: the first one installed here is what apt picks
                for alt in clause.split("|"):
                    dep = strip_dep(alt)
                    if dep and satisfiers(dep):
                        todo.append(dep)
                        break

not_installed = []
closure = close(listed, not_installed)

# ---- the verdict -------------------------------------------------------------------
# Packages whose files configure reads only because they are there: CMake
# package configs that include them OPTIONAL. Allowed only while every file
# of theirs that the build read is such a configure-time read.
optional_reads = {
    "libgmock-dev": "GTestConfig.cmake includes GMockTargets.cmake OPTIONAL; convoy uses no gmock",
}
missing = {}       # package -> files
packages = set()
orphans = []
for p in sorted(files):
    groups = file_owners(p)
    if not groups:
        orphans.append(p)
        continue
    for via, own in groups:
        packages |= own
        if not own & closure:
            for pkg in sorted(own):
                missing.setdefault(pkg, []).append(p if via == p else f"{p} -> {via}")
optional_seen = {}
for pkg in list(missing):
    if pkg in optional_reads and all(files[f.split(" -> ")[0]] == "configure" for f in missing[pkg]):
        optional_seen[pkg] = missing.pop(pkg)

print(f"check_packages: {len(files)} files outside the tree read by the build in {build}"
      f" ({len(depfiles)} dependency files), from {len(packages)} Debian packages;"
      f" {os.path.relpath(list_file, root) if list_file.startswith(root + '/') else list_file}"
      f" lists {len(listed)} packages, {len(closure)} with their dependencies")
if unresolved:
    print(f"check_packages: link flags the linker's search path does not resolve here: {' '.join(sorted(set(unresolved)))}")
if not_installed:
    print(f"check_packages: listed but not installed here (their dependencies are not followed): {' '.join(sorted(not_installed))}")
if orphans:
    tops = {}
    for p in orphans:
        parts = p.split("/")
        tops.setdefault("/".join(parts[:4]) if len(parts) > 4 else os.path.dirname(p), []).append(p)
    print(f"check_packages: {len(orphans)} files are not from a Debian package (not checked;"
          f" /usr/local/cuda is the optional CUDA toolkit): "
          + ", ".join(f"{t}/ ({len(v)})" for t, v in sorted(tops.items())))
    if verbose:
        for p in orphans:
            print(f"  not from a package: {p}  [{files[p]}]")
for pkg, fl in sorted(optional_seen.items()):
    print(f"check_packages: {pkg} is not in the list, but configure read its {len(fl)} files only because they"
          f" are there ({optional_reads[pkg]}): not needed")
if verbose:
    for pkg in sorted(packages):
        state = ("listed" if pkg in listed else "pulled in" if pkg in closure
                 else "optional read" if pkg in optional_seen else "MISSING")
        print(f"  package {pkg}: {state}")
if missing:
    for pkg, fl in sorted(missing.items()):
        print(f"check_packages: MISSING package {pkg}: neither in the list nor pulled in by it; the build read {len(fl)} of its files:")
        for f in fl:
            print(f"  {f}  [{files[f.split(' -> ')[0]]}]  (package {pkg})")
    # the fewest to add: leave out what another missing package pulls in
    fix = [p for p in sorted(missing)
           if not any(p != o and p in close([o]) for o in missing)]
    print(f"check_packages: FAIL: add {' '.join(fix)} to setup.sh's packages")
    sys.exit(1)
print(f"check_packages: OK: all {len(packages) - len(optional_seen)} packages the build needs are covered by the list")
PY
