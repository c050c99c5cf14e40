#!/usr/bin/env python3
"""Joins one instruction set's objects into a single object whose only global
definitions are its entry points (CMakeLists.txt: convoy_isa_units).

The same sources are compiled once per instruction set (base x86-64, AVX2,
AVX-512). Each copy defines the same C++ names, and the inline functions and
template instantiations they use (std::vector's, oneDNN's header functions)
are weak: left global, the linker would keep one copy for the whole program,
possibly the AVX-512 one, and a base-path call would die with SIGILL on an
AVX2 machine. So every defined symbol but the entry points is made local to
its copy and renamed `isa_<set>.<name>` (tests/isa_dispatch.sh reads the
names to check that AVX-512 code lives only in the AVX-512 copy). What must
stay one object program-wide stays global: data in writable sections, the
weak type_info objects and names of types used outside the copies
(exceptions are caught by type), and the exception-handling personality
reference. A type defined inside the copies (its type_info strong there) gets
a local type_info per copy; exceptions still match by name. Constant statics
of inline functions (std::to_chars' digit table; GNU unique symbols, which
objcopy cannot make local) get a name of the copy's own; a writable one is an
error, since each copy would silently get its own.

  isa_localize.py --isa avx2 --entry convoy_cpu_backend_avx2 --out OUT.o OBJ...
"""
import argparse
import os
import subprocess
import sys
import tempfile


def symbols(obj):
    """(name, bind, section) of each defined symbol of obj (readelf -sW)."""
    sections = {}
    out = subprocess.run(["readelf", "-SW", obj], check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        line = line.strip()
        if line.startswith("[") and "]" in line:
            idx, rest = line[1:].split("]", 1)
            parts = rest.split()
            if idx.strip().isdigit() and parts:
                sections[idx.strip()] = parts[0]
    out = subprocess.run(["readelf", "-sW", obj], check=True, capture_output=True, text=True).stdout
    result = []
    for line in out.splitlines():
        parts = line.split()
        # Num: Value Size Type Bind Vis Ndx Name
        if len(parts) < 8 or not parts[0].endswith(":"):
            continue
        _, _, _, kind, bind, _, ndx, name = parts[:8]
        if ndx in ("UND", "ABS") or kind in ("SECTION", "FILE"):
            continue
        result.append((name, bind, sections.get(ndx, "")))
    return result


def stays_global(name, bind, section, entries):
    if name in entries or name.startswith("DW.ref."):
        return True
    if name.startswith(("_ZTI", "_ZTS")) and bind == "WEAK":  # type_info of a type used outside: one per type
        return True
    writable = section.startswith((".data", ".bss", ".tdata", ".tbss")) and not section.startswith(".data.rel.ro")
    return writable


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--isa", required=True)
    ap.add_argument("--entry", action="append", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--ld", default="ld")
    ap.add_argument("--objcopy", default="objcopy")
    ap.add_argument("objects", nargs="+")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        joined = os.path.join(tmp, "joined.o")
        subprocess.run([a.ld, "-r", "-o", joined, *a.objects], check=True)
        keep, rename, private = [], [], []
        found = set()
        for name, bind, section in symbols(joined):
            if name in a.entry:
                found.add(name)
            if bind == "UNIQUE":
                # Statics of inline functions (std::to_chars' digit table): objcopy
                # cannot make them local, so a constant one gets a name of this
                # copy's own; a writable one would silently become one per copy.
                if section.startswith((".data", ".bss", ".tdata", ".tbss")) and not section.startswith(".data.rel.ro"):
                    sys.exit(f"isa_localize: {name} is a writable static of an inline function used by the "
                             f"{a.isa} kernels; each copy would get its own. Define it out of line.")
                private.append(name)
                continue
            if bind != "LOCAL" and stays_global(name, bind, section, set(a.entry)):
                keep.append(name)
            elif bind != "LOCAL" or section.startswith(".text"):
                rename.append(name)  # local functions too: the disassembly check reads every name
        missing = set(a.entry) - found
        if missing:
            sys.exit(f"isa_localize: {', '.join(sorted(missing))} not defined by the {a.isa} objects")
        keep_file, rename_file = os.path.join(tmp, "keep"), os.path.join(tmp, "rename")
        with open(keep_file, "w") as f:
            f.write("\n".join(keep) + "\n")
        with open(rename_file, "w") as f:
            f.write("".join(f"{n} isa_{a.isa}.{n}\n" for n in sorted(set(rename))))
            f.write("".join(f"{n} isa_{a.isa}.{a.entry[0]}.{n}\n" for n in sorted(set(private))))
        # Section groups (COMDAT) go: the linker would otherwise drop this
        # copy's now-local functions in favour of another object's group.
        subprocess.run([a.objcopy, "--remove-section=.group", f"--keep-global-symbols={keep_file}",
                        f"--redefine-syms={rename_file}", joined, a.out + ".tmp"], check=True)
        os.replace(a.out + ".tmp", a.out)


if __name__ == "__main__":
    main()
