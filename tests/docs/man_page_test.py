#!/usr/bin/env python3
"""The generated ptsnap(1) documents every option the binary prints.

usage: man_page_test.py MAN_PAGE SRC_DIR    (PTSNAP_BIN names the binary)

TAP output. Reads the help texts itself (not through tools/cli_help.py, so a
bug there cannot hide here) and checks: every subcommand has its
subsection; every long option each --help prints has an entry (.TP) in its
command's subsection; ENVIRONMENT names every PTSNAP_*/MAGIC_TRACE_* variable
whose name src/ spells as a string; and the page renders without a warning,
with every option visible in the rendered text. Rendering needs groff or
mandoc; without either, those checks are reported as skipped (with the
reason) and the rest still run.
"""
import os
import re
import shutil
import subprocess
import sys

results = []


def check(ok, what, detail=""):
    results.append((bool(ok), what, detail))


def skip(what, reason):
    results.append((None, what, reason))


def help_of(exe, *args):
    r = subprocess.run([exe, *args, "--help"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True)
    if r.returncode != 0:
        raise RuntimeError(f"{exe} {' '.join(args)} --help exited {r.returncode}: {r.stderr}")
    return r.stdout


def table(text, header):
    """The rows of one "Header:" table of a help text."""
    m = re.search(rf"^{header}:\n((?:  .*\n)+)", text, re.M)
    return m.group(1).split("\n") if m else []


def long_options(text):
    """Every long option an Options: row defines ("  -o,--output TEXT ...")."""
    out = []
    for line in table(text, "Options"):
        m = re.match(r"^  (-\S+)", line)
        if m:
            out += [n for n in m.group(1).split(",") if n.startswith("--")]
    return out


def troff(name):
    return name.replace("\\", "\\e").replace("-", "\\-")


def sections(page, macro):
    """{heading: body} for each .SH or .SS of the page."""
    out, name, body = {}, None, []
    for line in page.split("\n"):
        m = re.match(r"^\.(SH|SS) +\"?(.*?)\"?$", line)
        if m:
            if name is not None:
                out[name] = "\n".join(body)
            name, body = (m.group(2) if m.group(1) == macro else None), []
        elif name is not None:
            body.append(line)
    if name is not None:
        out[name] = "\n".join(body)
    return out


def entries(body):
    """The tag lines of a section's .TP entries."""
    lines = body.split("\n")
    return [lines[i + 1] for i, line in enumerate(lines[:-1]) if line.strip() == ".TP"]


def render(page_path):
    """(tool, rendered text, warnings) or None when no formatter exists."""
    if shutil.which("groff"):
        cmd = ["groff", "-man", "-Tutf8", "-P-cbou", "-rLL=300n", "-ww", page_path]
        tool = "groff"
    elif shutil.which("mandoc"):
        lint = subprocess.run(["mandoc", "-man", "-T", "lint", "-W", "warning", page_path],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        r = subprocess.run(["mandoc", "-man", "-T", "utf8", "-O", "width=300", page_path],
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        return "mandoc", re.sub(r".\b", "", r.stdout), (lint.stdout + r.stderr).strip()
    else:
        return None
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    warnings = r.stderr.strip() + (f"\nexit status {r.returncode}" if r.returncode else "")
    return tool, r.stdout, warnings


def main(argv):
    exe = os.environ.get("PTSNAP_BIN")
    if len(argv) != 3 or not exe:
        print(f"Bail out! usage: PTSNAP_BIN=ptsnap {argv[0]} MAN_PAGE SRC_DIR")
        return 1
    page_path, src = argv[1], argv[2]
    with open(page_path) as f:
        page = f.read()

    top = help_of(exe)
    subs = [line.split()[0] for line in table(top, "Subcommands") if line.strip()]
    check(len(subs) >= 6, f"the top-level help lists the subcommands ({' '.join(subs)})")
    commands = sections(page, "SS")
    all_long = long_options(top)

    top_tags = "\n".join(entries(sections(page, "SH").get("OPTIONS", "")))
    missing = [o for o in long_options(top) if f"\\fB{troff(o)}\\fR" not in top_tags]
    check(long_options(top) and not missing, "OPTIONS has every top-level long option",
          "missing: " + " ".join(missing))
    for sub in subs:
        opts = long_options(help_of(exe, sub))
        all_long += opts
        if sub not in commands:
            check(False, f"COMMANDS has a subsection for {sub}", f"subsections: {list(commands)}")
            continue
        tags = "\n".join(entries(commands[sub]))
        missing = [o for o in opts if f"\\fB{troff(o)}\\fR" not in tags]
        check(opts and not missing, f"{sub}: an entry for each of its {len(opts)} long options",
              "missing: " + " ".join(missing))

    # The variables src/ reads: every "PTSNAP_X" / "MAGIC_TRACE_X" string literal
    # outside the tests (getenv's arguments and the lists they loop over).
    names = set()
    for root, _, files in os.walk(src):
        for name in files:
            if name.endswith((".cpp", ".h")) and not name.endswith(("_test.cpp", "_fuzzer.cpp")):
                with open(os.path.join(root, name), errors="replace") as f:
                    names |= set(re.findall(r'"((?:PTSNAP|MAGIC_TRACE)_[A-Z0-9_]+)"', f.read()))
    env = "\n".join(entries(sections(page, "SH").get("ENVIRONMENT", "")))
    missing = sorted(n for n in names if f"\\fB{troff(n)}\\fR" not in env)
    check({"PTSNAP_QEMU", "PTSNAP_QEMU_PLUGIN", "PTSNAP_NO_KCORE"} <= names,
          f"src/ reads PTSNAP_QEMU, PTSNAP_QEMU_PLUGIN, PTSNAP_NO_KCORE (found {len(names)})")
    check(names and not missing, "ENVIRONMENT names every variable src/ reads",
          "missing: " + " ".join(missing))
    for sh in ("NAME", "SYNOPSIS", "DESCRIPTION", "COMMANDS", "ENVIRONMENT", "FILES",
               "EXIT STATUS", "SEE ALSO"):
        check(sh in sections(page, "SH"), f"the page has {sh}")
    check(re.search(r"^\.TH PTSNAP 1 ", page, re.M), "the page is PTSNAP(1)")

    # troff specials: no text line a formatter would read as a request, no raw
    # hyphen in an option's tag.
    bad = [line for line in page.split("\n")
           if line.startswith(("'", ".")) and not re.match(r"^\.(\\\"|[A-Za-z]{1,2}\b)", line)]
    check(not bad, "no text line starts with . or '", "\n".join(bad[:5]))

    r = render(page_path)
    if r is None:
        skip("the page renders without warnings", "no groff or mandoc on this machine")
        skip("the rendered page shows every long option", "no groff or mandoc on this machine")
    else:
        tool, text, warnings = r
        check(text.strip() and not warnings, f"the page renders without warnings ({tool})",
              warnings)
        flat = " ".join(text.replace("\u2212", "-").replace("\u2010", "-").split())
        missing = sorted({o for o in all_long if o not in flat})
        check(all_long and not missing, f"the rendered page shows every long option ({tool})",
              "missing: " + " ".join(missing))

    print(f"1..{len(results)}")
    for n, (ok, what, detail) in enumerate(results, 1):
        if ok is None:
            print(f"ok {n} - {what} # SKIP {detail}")
            continue
        print(f"{'ok' if ok else 'not ok'} {n} - {what}")
        if not ok and detail:
            for line in detail.split("\n"):
                print(f"# {line}")
    return 0 if all(ok is not False for ok, _, _ in results) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
