"""Reads ptsnap's --help (CLI11's format) into commands and options.

Shared by tools/gen-man and tools/gen-completion, which both write what the
built binary prints, so neither can drift from it. CLI11 (2.x,
Formatter.hpp) prints, in order: the description, "Usage: PROG ...", a
"Positionals:" table, one table per option group ("Options:"), a
"Subcommands:" table, a blank line and the footer. A table row is two spaces,
the name field padded to the column width (30), then the help text; a name
field too wide for the column puts the help on the next line, indented to
the column, and so does every line of a help text that has a newline.
"""
import re
import subprocess

# Words of an option's name field that are not its type (make_option_opts).
_NOT_TYPES = {"REQUIRED", "Excludes:", "Needs:", "Env:", "...", "x"}
# What a name field too wide for the column may have at the column: the row's
# help is then on the next line.
_NAME_WORD = re.compile(r"^(-|REQUIRED( |$)|Excludes: |Needs: |Env: |[A-Z]+(=|:\{))")
_TYPE = re.compile(r"^([A-Z][A-Z_]*)(?:=(.*)|:\{(.*)\}|:(.*))?$")


class Option:
    """One row of a Positionals: or an options table."""

    def __init__(self, field, help_text, positional):
        self.positional = positional
        self.help = help_text
        self.type = None  # "TEXT", "INT", ...: None for a flag
        self.default = None
        self.choices = []  # from a CLI::IsMember check, "TEXT:{a,b}"
        self.excludes = []
        self.needs = []
        self.required = False
        self.multiple = False
        words = field.split()
        self.names = [words[0]] if positional else words[0].split(",")
        listing = None  # the list "Excludes:"/"Needs:" is filling
        for w in words[1:]:
            if w in ("Excludes:", "Needs:"):
                listing = self.excludes if w == "Excludes:" else self.needs
            elif w == "REQUIRED":
                self.required, listing = True, None
            elif w == "...":
                self.multiple, listing = True, None
            elif listing is not None:
                listing.append(w)
            elif self.type is None and w not in _NOT_TYPES and _TYPE.match(w):
                m = _TYPE.match(w)
                self.type, self.default = m.group(1), m.group(2)
                if m.group(3):
                    self.choices = m.group(3).split(",")
        if not self.choices:
            self.choices = help_choices(help_text)

    @property
    def long_names(self):
        return [n for n in self.names if n.startswith("--")]

    @property
    def short_names(self):
        return [n for n in self.names if n.startswith("-") and not n.startswith("--")]

    @property
    def takes_value(self):
        return self.type is not None


def help_choices(help_text):
    """The fixed words a help text starting "low | normal | high | ..." lists.

    An alternative with a placeholder ("custom:KEY=VAL,...") keeps its
    literal head ("custom:")."""
    m = re.match(r"^(\S+(?: \| \S+)+)", help_text)
    if not m:
        return []
    out = []
    for alt in m.group(1).split(" | "):
        head = re.match(r"^[a-z0-9_][a-z0-9_.-]*:?", alt)
        if head:
            out.append(head.group(0))
    return out


class Command:
    """One --help page: the top level or a subcommand."""

    def __init__(self, name):
        self.name = name  # "" for the top level
        self.description = []  # lines
        self.usage = ""  # after the program name: "run [OPTIONS] [command...]"
        self.positionals = []
        self.options = []
        self.subcommands = []  # (name, help)
        self.footer = []  # lines

    def all_options(self):
        return self.positionals + self.options


def _column(lines):
    """Where help texts start: every page has -h,--help's row."""
    for line in lines:
        m = re.match(r"^(  -h,--help +)\S", line)
        if m:
            return len(m.group(1))
    raise ValueError("no -h,--help row in the help text")


def _rows(lines, col):
    """A table's lines as (name field, help text) pairs."""
    rows = []
    for line in lines:
        if line.startswith(" " * col) and rows:  # help on its own line, or its next line
            field, text = rows[-1]
            rows[-1] = (field, (text + "\n" if text else "") + line[col:].rstrip())
        elif (len(line) > col and line[col - 1] == " " and line[col] != " " and
              not _NAME_WORD.match(line[col:])):
            rows.append((line[:col].strip(), line[col:].rstrip()))
        else:
            rows.append((line.strip(), ""))
    return rows


def parse(text, name=""):
    """Parses one page of CLI11 help into a Command."""
    cmd = Command(name)
    lines = text.rstrip("\n").split("\n")
    col = _column(lines)
    i = 0
    while i < len(lines) and not lines[i].startswith("Usage: "):
        cmd.description.append(lines[i])
        i += 1
    if i == len(lines):
        raise ValueError("no Usage: line in the help text")
    # "Usage: PROG run [OPTIONS] ...": PROG is argv[0], whatever path ran it.
    usage = lines[i][len("Usage: "):].split(" ", 1)
    cmd.usage = usage[1] if len(usage) > 1 else ""
    i += 1
    blocks, block = [], []
    for line in lines[i:] + [""]:
        if line.strip():
            block.append(line)
        elif block:
            blocks.append(block)
            block = []
    tables_end = 0
    for n, b in enumerate(blocks):
        if re.match(r"^\S.*:$", b[0]) and all(line.startswith("  ") for line in b[1:]) and b[1:]:
            tables_end = n + 1
            rows = _rows(b[1:], col)
            if b[0] == "Positionals:":
                cmd.positionals += [Option(f, h, True) for f, h in rows]
            elif b[0] == "Subcommands:":
                cmd.subcommands += rows
            else:
                cmd.options += [Option(f, h, False) for f, h in rows]
    for b in blocks[tables_end:]:
        cmd.footer += b + [""]
    cmd.footer = cmd.footer[:-1]
    return cmd


def help_text(exe, *args):
    """What `exe ARGS --help` prints; it must exit 0."""
    r = subprocess.run([exe, *args, "--help"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       text=True, check=False)
    if r.returncode != 0:
        raise RuntimeError(f"{exe} {' '.join(args)} --help exited {r.returncode}: {r.stderr}")
    return r.stdout


def load(exe):
    """The top-level page and one page per subcommand it lists."""
    top = parse(help_text(exe))
    if not top.subcommands:
        raise ValueError(f"{exe} --help lists no subcommands")
    subs = [parse(help_text(exe, name), name) for name, _ in top.subcommands]
    return top, subs


def version(exe):
    r = subprocess.run([exe, "--version"], stdout=subprocess.PIPE, text=True, check=True)
    return r.stdout.strip()
