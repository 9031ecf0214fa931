"""The project installs as a package: the sdist and the wheel build and pass
`twine check --strict`, and the wheel, pip-installed into a fresh virtual environment
(dependencies from the package index, not from this checkout), runs the `statechart`
command and the support-triage demo from a directory outside the repository.

One build and one virtual environment serve the whole module (about 15 s in all).
"""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGE = REPO / "statechart"
PROJECT = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
DEMO = REPO / "agents" / "support_triage.py"


@dataclass(frozen=True)
class Installed:
    """The built artifacts, the virtual environment the wheel went into, and the demo's run."""

    sdist: Path
    wheel: Path
    venv: Path
    work: Path  # outside the repository: every command of the venv runs here
    demo: subprocess.CompletedProcess[str]

    @property
    def python(self) -> Path:
        return self.venv / "bin" / "python"

    @property
    def statechart(self) -> Path:
        return self.venv / "bin" / "statechart"

    def run(self, *args: str | Path) -> subprocess.CompletedProcess[str]:
        """A command of the virtual environment, run in `work`."""
        return _run(*args, cwd=self.work, env=_clean_env(self.venv))


def _run(
    *args: str | Path, cwd: Path, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=600
    )


def _ok(done: subprocess.CompletedProcess[str]) -> subprocess.CompletedProcess[str]:
    assert done.returncode == 0, f"{done.args} -> {done.returncode}:\n{done.stdout}{done.stderr}"
    return done


def _clean_env(venv: Path) -> dict[str, str]:
    """This process's environment without what could point an import back at the checkout
    (or change what the demo does), with the venv first on PATH and a wide plain terminal."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "PYTHONSTARTUP"}
        and not k.startswith(("STATECHART_", "SUPPORT_TRIAGE_", "OTEL_"))
    }
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env.update(VIRTUAL_ENV=str(venv), COLUMNS="200", NO_COLOR="1", TERM="dumb")
    return env


def _package_files() -> list[str]:
    """Every file of the package in the checkout, as a wheel names it (statechart/x/y.py):
    sources, py.typed and any data file a module reads at runtime."""
    return sorted(
        p.relative_to(REPO).as_posix()
        for p in PACKAGE.rglob("*")
        if p.is_file()
        and "__pycache__" not in p.parts
        and p.suffix not in {".pyc", ".pyo"}
        and not p.name.startswith(".")
    )


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    root = tmp_path_factory.mktemp("package")
    dist, venv, work = root / "dist", root / "venv", root / "work"
    work.mkdir()
    # `python -m build` with no --sdist/--wheel builds the sdist, then the wheel FROM the
    # sdist: that proves the sdist is complete, and it leaves no `build/` folder in the
    # checkout (--sdist --wheel builds both from the tree and writes ./build, which is not
    # ignored by git and keeps stale modules). Isolated: the build env gets setuptools>=77
    # from the index, ~6 s; --no-isolation takes ~2 s but needs setuptools>=77 in the
    # calling env, and .venv (the dev extra) has the venv's own older setuptools.
    _ok(_run(sys.executable, "-m", "build", "--outdir", dist, REPO, cwd=root))
    (sdist,) = dist.glob("*.tar.gz")
    (wheel,) = dist.glob("*.whl")
    # A bare venv (no pip, no setuptools: ~0.1 s instead of ~4.5 s for ensurepip), filled by
    # this interpreter's pip through --python (pip >= 22.3): the wheel file, not the tree,
    # and its dependencies from the index.
    _ok(_run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=root))
    env = _clean_env(venv)
    pip = [sys.executable, "-m", "pip", "--python", venv / "bin" / "python"]
    _ok(_run(*pip, "--disable-pip-version-check", "-q", "install", wheel, cwd=work, env=env))
    demo = _run(venv / "bin" / "python", DEMO, cwd=work, env=env)
    return Installed(sdist=sdist, wheel=wheel, venv=venv, work=work, demo=demo)


def test_artifacts_are_named_for_the_distribution(installed: Installed) -> None:
    stem = f"{PROJECT['name'].replace('-', '_')}-{PROJECT['version']}"
    assert installed.sdist.name == f"{stem}.tar.gz"
    assert installed.wheel.name == f"{stem}-py3-none-any.whl"


def test_twine_check_strict_passes_on_both(installed: Installed) -> None:
    twine = [sys.executable, "-m", "twine", "check", "--strict"]
    done = _ok(_run(*twine, installed.sdist, installed.wheel, cwd=installed.work))
    assert done.stdout.count("PASSED") == 2, done.stdout


def test_the_console_script_lists_its_commands(installed: Installed) -> None:
    from statechart.cli import app  # the checkout's command list: a new command is covered

    commands = {c.name or c.callback.__name__.replace("_", "-") for c in app.registered_commands}
    assert {"run", "resume", "approve", "show", "mine"} <= commands
    done = _ok(installed.run(installed.statechart, "--help"))
    # Each command's row starts with its name, inside the table's border (box or ASCII).
    listed = {m[1] for m in map(re.compile(r"\W*([\w-]+)").match, done.stdout.splitlines()) if m}
    assert commands <= listed, done.stdout


def test_the_demo_runs_to_done_from_the_wheel(installed: Installed) -> None:
    demo = _ok(installed.demo)
    assert "waiting: tool 'send_reply' needs approval" in demo.stdout, demo.stdout
    assert "outcome: done (ended)" in demo.stdout, demo.stdout
    assert "Per KB-12 we refund duplicate charges" in demo.stdout, demo.stdout
    with closing(sqlite3.connect(installed.work / "statechart.db")) as db:
        ((run_id, chart, status, state, seq),) = db.execute(
            "SELECT run_id, chart, status, state, seq FROM runs"
        ).fetchall()
        events = db.execute(
            "SELECT seq, actor, by, trigger, target FROM events WHERE run_id = ? ORDER BY seq",
            (run_id,),
        ).fetchall()
    assert (chart, status, state) == ("support_triage", "ended", "done")
    assert [e[0] for e in events] == list(range(1, seq + 1))  # every transition is one row
    assert ("human", "demo-operator", "approved") in {e[1:4] for e in events}
    assert events[-1][4] == "done"
    with closing(sqlite3.connect(installed.work / "helpdesk.db")) as helpdesk:
        ((sent,),) = helpdesk.execute("SELECT text FROM replies").fetchall()
    assert "KB-12" in sent
    # The installed command reads back what the installed library wrote.
    shown = _ok(
        installed.run(installed.statechart, "show", run_id, "--json", "--db", "statechart.db")
    )
    timeline = json.loads(shown.stdout)
    assert (timeline["run"]["state"], timeline["run"]["status"]) == ("done", "ended")
    assert len(timeline["events"]) == seq


def test_the_import_is_the_installed_copy(installed: Installed) -> None:
    probe = (
        "import importlib.metadata as m, json, sysconfig, statechart; "
        "print(json.dumps([statechart.__file__, sysconfig.get_paths()['purelib'], "
        f"m.version({PROJECT['name']!r})]))"
    )
    file, purelib, version = json.loads(_ok(installed.run(installed.python, "-c", probe)).stdout)
    assert Path(file).is_relative_to(Path(purelib)), (file, purelib)
    assert Path(purelib).is_relative_to(installed.venv) and not Path(file).is_relative_to(REPO)
    assert (Path(file).parent / "py.typed").is_file()
    assert version == PROJECT["version"]


def test_the_sdist_holds_the_sources_and_pyproject(installed: Installed) -> None:
    with tarfile.open(installed.sdist) as sdist:
        names = {PurePosixPath(n) for n in sdist.getnames()}
    top = PurePosixPath(installed.sdist.name.removesuffix(".tar.gz"))
    held = {n.relative_to(top).as_posix() for n in names if n.is_relative_to(top)}
    wanted = {"pyproject.toml", "README.md", "PKG-INFO", "agents/support_triage.py"}
    missing = sorted(wanted.union(_package_files()) - held)
    assert not missing, missing


def test_the_wheel_holds_every_subpackage_and_nothing_else(installed: Installed) -> None:
    with zipfile.ZipFile(installed.wheel) as wheel:
        names = set(wheel.namelist())
        entry_points = wheel.read(
            next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
        ).decode()
    subpackages = sorted(
        p.relative_to(REPO).as_posix()
        for p in [PACKAGE, *PACKAGE.rglob("*")]
        if p.is_dir() and (p / "__init__.py").is_file()
    )
    assert len(subpackages) > 10  # statechart and its records, chart, engine, runtime, ...
    missing = [p for p in subpackages if f"{p}/__init__.py" not in names]
    assert not missing, missing
    missing = [f for f in _package_files() if f not in names]  # py.typed, data files too
    assert not missing, missing
    tops = {n.split("/")[0] for n in names}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"statechart"}  # no agents, tests
    assert "statechart = statechart.cli:entry" in entry_points
