"""What every example workflow shares: where it runs (``--s3``, ``--remote``), its key, and its image.

The scripts run as ``python workflows/NN_x.py``, so this folder is on ``sys.path`` and they import this
module as ``_support``. Three targets, one code path for the tasks themselves:

* default: ``flyte.init()`` and a local ``flyte.run``; stores land under the local defaults
  (``/tmp/flyte/raw_data/agents/memory-store/v0/local/default/development/<key>``), shared by every local
  run on the machine.
* ``--s3``: a moto S3 server on 127.0.0.1 started here (stopped at the end, also on error), Flyte's
  storage pointed at it, and the run's raw data in ``s3://<bucket>/raw``; ``--s3-endpoint URL`` uses an
  S3 endpoint that is already running instead (the test suite's own moto server).
* ``--remote``: ``flyte.init_from_config()`` and the image of `task_image`; stores land in the cluster's
  raw-data bucket, keyed by org/project/domain.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import pathlib
import shutil
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import flyte

from flyteplugins_memory import InvalidKey, MemoryStore, __version__

#: The checkout this folder belongs to, when the scripts run from one (an unreleased version).
CHECKOUT = pathlib.Path(__file__).resolve().parent.parent
IMAGE_NAME = "flyteplugins-memory-workflows"
EXTRAS = ("s3", "gcs")
DEFAULT_BUCKET = "flyte-memory-demo"
MOTO_CREDENTIALS = {"access_key_id": "testing", "secret_access_key": "testing", "region": "us-east-1"}
MISSING_MOTO = "--s3 runs a local moto S3 server: pip install 'flyteplugins-memory[s3,test]'"


def parser(doc: str | None, default_key: str) -> argparse.ArgumentParser:
    """The options every workflow takes; a script adds its own before ``parse_args()``."""
    summary = (doc or "").strip().splitlines()[0] if doc else None
    cli = argparse.ArgumentParser(description=summary)
    where = cli.add_mutually_exclusive_group()
    where.add_argument("--s3", action="store_true", help="run against S3 (a local moto server unless --s3-endpoint)")
    where.add_argument("--remote", action="store_true", help="run on the Flyte cluster of your Flyte config")
    cli.add_argument("--s3-endpoint", metavar="URL", help="--s3 against a moto server already running there")
    cli.add_argument("--s3-bucket", metavar="NAME", default=DEFAULT_BUCKET, help="with --s3: the bucket")
    cli.add_argument("--key", default=default_key, type=store_key, help=f"the store's key (default: {default_key})")
    return cli


def store_key(text: str) -> str:
    """A key the store accepts, checked before any run starts (argparse prints the reason and exits 2)."""
    try:
        MemoryStore.remote_path_for_key(key=text, org="local", project="default", domain="development")
    except InvalidKey as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    return text


def plural(count: int, word: str, many: str | None = None) -> str:
    """`count` and `word` in the number it takes: ``plural(1, "file")`` is "1 file", ``plural(2, "file")``
    "2 files"; `many` for a word whose plural is not `word` + "s" (``plural(2, "entry", "entries")``)."""
    return f"{count} {word if count == 1 else many or word + 's'}"


def cli_program(executable: str = sys.executable, cwd: pathlib.Path | None = None) -> str:
    """How to call ``flyte-memory`` from this shell: the bare name when the shell finds the one installed
    beside this interpreter (an activated venv), else that one's path (``.venv/bin/flyte-memory`` after
    ``make demo``, whose venv is not activated), so a printed command works as printed."""
    beside = pathlib.Path(executable).parent / "flyte-memory"  # not resolved: a venv's python is a symlink
    found = shutil.which("flyte-memory")
    if not beside.exists() or (found is not None and pathlib.Path(found).absolute() == beside.absolute()):
        return "flyte-memory"
    with contextlib.suppress(ValueError):
        return str(beside.absolute().relative_to((cwd or pathlib.Path.cwd()).absolute()))
    return str(beside.absolute())


# -- the image -----------------------------------------------------------------------------------------


def is_checkout(folder: pathlib.Path = CHECKOUT) -> bool:
    """Whether `folder` is a source checkout of this package (its pyproject names the project)."""
    pyproject = folder / "pyproject.toml"
    return pyproject.is_file() and 'name = "flyteplugins-memory"' in pyproject.read_text()


def task_image(checkout: pathlib.Path | None = CHECKOUT, extras: tuple[str, ...] = ()) -> flyte.Image:
    """The image the workflows' tasks run in on a cluster: flyte's Debian base plus this package.

    From a source checkout (an unreleased version), the checkout itself is installed with the S3 and GCS
    extras and `extras` (e.g. ``("openrath",)`` for a framework adapter; ``uv sync --project``, the project
    copied in minus ``.dockerignore``); otherwise the released ``flyteplugins-memory[s3,gcs,...]`` of the
    version installed here. Only a spec: nothing is built until a
    ``--remote`` run deploys it. In a container the spec is rebuilt but not used (images are looked up by
    environment name there).
    """
    base, wanted = flyte.Image.from_debian_base(name=IMAGE_NAME), (*EXTRAS, *extras)
    if checkout is not None and is_checkout(checkout):
        return base.with_dockerignore(checkout / ".dockerignore").with_uv_project(
            checkout / "pyproject.toml",
            project_install_mode="install_project",
            extra_args=" ".join(f"--extra {extra}" for extra in wanted),
        )
    return base.with_pip_packages(f"flyteplugins-memory[{','.join(wanted)}]=={__version__}")


def image_packages(image: flyte.Image) -> list[str]:
    """The Python packages `image` installs on top of its base, as requirement strings: a pip layer's
    packages, and for a uv project layer the project itself, its dependencies and those of its extras."""
    from flyte._image import PipPackages, UVProject

    found: list[str] = []
    for layer in image._layers:
        if isinstance(layer, PipPackages):
            found.extend(layer.packages or ())
        elif isinstance(layer, UVProject):
            found.extend(_project_requirements(layer.pyproject, (layer.extra_args or "").split()[1::2]))
    return found


def _project_requirements(pyproject: pathlib.Path, extras: list[str]) -> list[str]:
    project = tomllib.loads(pyproject.read_text())["project"]
    optional = project.get("optional-dependencies", {})
    return [
        f"{project['name']} @ {pyproject.parent}",
        *project["dependencies"],
        *(r for e in extras for r in optional[e]),
    ]


# -- where a run goes ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """Where a workflow's runs go and its stores land."""

    mode: str  # "local", "s3" or "remote"
    key: str
    raw_data_path: str | None = None
    endpoint: str | None = None
    #: the S3 server lives only as long as the script (its own moto server)
    ephemeral: bool = False
    #: the URL of every run made so far, oldest first (a local run's is the folder of its report.html)
    run_urls: list[str] = field(default_factory=list)

    def run(self, task: Any, **inputs: Any) -> Any:
        """One ``flyte.run`` of `task`, waited for; returns its outputs (``outputs[0]`` for one value)."""
        if self.mode == "remote":
            run = flyte.run(task, **inputs)
            print(f"run: {run.url}")
            run.wait()
        else:
            run = flyte.with_runcontext(mode="local", raw_data_path=self.raw_data_path).run(task, **inputs)
        self.run_urls.append(run.url)
        return run.outputs()

    def cli(self, verb: str) -> str:
        """The ``flyte-memory`` command that runs `verb` on this target's store (`cli_program`: as this
        shell finds it)."""
        program = cli_program()
        if self.mode == "remote":  # a Flyte config names no bucket: the local root would be searched
            return f"{program} {verb} --key {self.key} --root s3://<raw-data bucket>"
        if self.mode != "s3":
            return f"{program} {verb} --key {self.key}"
        command = f"{program} {verb} --key {self.key} --root s3://{self.bucket}"
        if self.ephemeral:
            return command
        credentials = "FLYTE_AWS_ACCESS_KEY_ID=testing FLYTE_AWS_SECRET_ACCESS_KEY=testing"
        return f"FLYTE_AWS_ENDPOINT={self.endpoint} {credentials} {command}"

    def look_inside(self, *verbs: str) -> str:
        """How to look inside this target's store with the CLI, one command per verb."""
        header = "Look inside the store with the CLI:"
        if self.mode == "remote":
            header = "Look inside the store with the CLI (your cluster's raw-data bucket as --root; gs:// on GCS):"
        if self.ephemeral:
            header = "Look inside the store with the CLI (this script's moto server has stopped; on a real bucket):"
        return "\n".join([header, *(f"  {self.cli(verb)}" for verb in verbs)])

    @property
    def bucket(self) -> str:
        return (self.raw_data_path or "").removeprefix("s3://").split("/", 1)[0]

    def where(self) -> str:
        """Where the stores of this target land, in words."""
        if self.mode == "remote":
            return "the cluster's raw-data bucket (see the run's URL)"
        if self.mode == "s3":
            return f"S3 at {self.endpoint}, bucket {self.bucket}"
        return "the local disk"


@contextlib.contextmanager
def connect(args: argparse.Namespace) -> Iterator[Target]:
    """Initialize Flyte for the target the options name; with ``--s3`` and no endpoint, run moto here."""
    if args.remote:
        flyte.init_from_config()
        yield Target("remote", args.key)
    elif args.s3 or args.s3_endpoint:
        with _s3_endpoint(args.s3_endpoint) as endpoint:
            _make_bucket(endpoint, args.s3_bucket)
            flyte.init(storage=flyte.storage.S3(endpoint=endpoint, **MOTO_CREDENTIALS))
            raw_data_path = f"s3://{args.s3_bucket}/raw"
            yield Target("s3", args.key, raw_data_path, endpoint, ephemeral=not args.s3_endpoint)
    else:
        flyte.init()
        yield Target("local", args.key)


@contextlib.contextmanager
def _s3_endpoint(given: str | None) -> Iterator[str]:
    if given:
        yield given
        return
    try:
        from moto.server import ThreadedMotoServer

        from flyteplugins_memory.testing.moto import atomic_conditional_puts
    except ImportError:
        sys.exit(MISSING_MOTO)
    logging.getLogger("werkzeug").setLevel(logging.WARNING)  # not a line per request
    atomic_conditional_puts()  # S3 decides conditional writes atomically; moto's server does not on its own
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    try:
        host, port = server.get_host_and_port()
        yield f"http://{host}:{port}"
    finally:
        server.stop()


def _make_bucket(endpoint: str, bucket: str) -> None:
    try:
        import s3fs
    except ImportError:
        sys.exit(MISSING_MOTO)
    # moto takes any credentials; set them for the libraries that read the environment, never over real ones
    for name, value in (("AWS_ACCESS_KEY_ID", "testing"), ("AWS_SECRET_ACCESS_KEY", "testing")):
        os.environ.setdefault(name, value)
    fs = s3fs.S3FileSystem(endpoint_url=endpoint, key="testing", secret="testing", skip_instance_cache=True)
    if not fs.exists(bucket):
        fs.mkdir(bucket)
