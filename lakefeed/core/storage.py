"""Where lakefeed keeps files: a local folder or an S3 bucket, behind one small interface.

Tables, checkpoints, schema locations, the event log and the lease may live on ``s3://`` /
``s3a://`` URIs as well as local paths. Everything lakefeed itself reads or writes there (Delta
data files written by tasks, Delta log files it reads, Spark's checkpoint files it checks, the
lease) goes through this module; Spark's own checkpoint I/O goes through Hadoop's S3A (see
:mod:`lakefeed.object_store`) and Delta commits through delta-rs's object store.

Built on ``pyarrow.fs``: pyarrow is already on every driver and executor (the Arrow readers and
writers need it), its ``S3FileSystem`` speaks the S3 REST API natively, and Parquet readers and
writers take its streams, so a task writes a data file straight to S3 without a local copy.
fsspec/s3fs would add a dependency for the same; delta-rs's object store has no Python file API.

:func:`as_path` hands out a :class:`pathlib.Path` for a local location and an :class:`ObjectPath`
(the part of ``Path``'s interface lakefeed uses) for an object-store one, so code that walks a
checkpoint or a lakehouse works on both without asking which.

Endpoint, region and credentials of a location resolve in S3A's order, per key: Hadoop
settings given as options of the read or write that uses the location (``fs.s3a.access.key``
..., registered here by :func:`register`, for that location and everything under it), then
Spark's Hadoop conf (``spark.hadoop.fs.s3a.*``, registered by the session), S3A's per-bucket
form ``fs.s3a.bucket.<bucket>.<key>`` before the plain one at each level, then the standard
AWS environment variables (``AWS_ENDPOINT_URL``, ``AWS_REGION``, ``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, ``AWS_SESSION_TOKEN``), the ones delta-rs and S3A read too. The
registry is per process: readers and writers that run elsewhere (executors, Spark's Python
planner processes) carry their locations' settings (:class:`CarriesSettings`) and register
them where they arrive.
"""

from __future__ import annotations

import fnmatch
import functools
import os
import time
import uuid
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Union
from urllib.parse import urlparse

import pyarrow.fs as pafs

from lakefeed.core.errors import MANGLED_URI, NO_CONDITIONAL_WRITES, ConfigError

OBJECT_SCHEMES = ("s3", "s3a")


def is_object_store(location: str | os.PathLike[str] | ObjectPath) -> bool:
    """Whether ``location`` is an ``s3://`` / ``s3a://`` URI (not a local path)."""
    scheme, sep, _ = str(location).partition("://")
    return bool(sep) and scheme.lower() in OBJECT_SCHEMES


AWS_VARIABLES = (
    "AWS_ENDPOINT_URL_S3",
    "AWS_ENDPOINT_URL",
    "AWS_REGION",
    "AWS_DEFAULT_REGION",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
    "AWS_SESSION_TOKEN",
)
"""What :meth:`S3Settings.from_env` reads."""
HADOOP_KEYS = {
    "endpoint": "endpoint",
    "region": "endpoint.region",
    "access_key": "access.key",
    "secret_key": "secret.key",
    "session_token": "session.token",
}
"""S3Settings fields and the S3A keys (``fs.s3a.<key>``) that set them."""
S3A_PREFIX = "fs.s3a."
HADOOP_PREFIXES = ("fs.", "dfs.")
"""Options that are Hadoop file system settings (delta-spark's rule for DataFrame options)."""


@dataclass(frozen=True)
class S3Settings:
    """Endpoint and credentials of an S3 location; None means "not set here" (the next source,
    finally the SDK default). The secrets stay out of ``repr`` (and so out of any log line
    that prints the settings)."""

    endpoint: str | None = None
    region: str | None = None
    access_key: str | None = None
    secret_key: str | None = field(default=None, repr=False)
    session_token: str | None = field(default=None, repr=False)

    @classmethod
    def from_env(cls) -> S3Settings:
        env = os.environ  # the names in AWS_VARIABLES
        return cls(
            endpoint=env.get("AWS_ENDPOINT_URL_S3") or env.get("AWS_ENDPOINT_URL"),
            region=env.get("AWS_REGION") or env.get("AWS_DEFAULT_REGION"),
            access_key=env.get("AWS_ACCESS_KEY_ID"),
            secret_key=env.get("AWS_SECRET_ACCESS_KEY"),
            session_token=env.get("AWS_SESSION_TOKEN"),
        )

    @classmethod
    def from_hadoop(cls, conf: Mapping[str, str], bucket: str | None = None) -> S3Settings:
        """S3A's keys in ``conf`` (``fs.s3a.<key>``, any case), the per-bucket form
        ``fs.s3a.bucket.<bucket>.<key>`` winning, as S3A reads them. An endpoint in S3A's
        ``host:port`` form becomes a URL (``connection.ssl.enabled`` picks the scheme)."""
        lowered = {str(k).lower(): str(v) for k, v in conf.items() if v not in (None, "")}

        def get(key: str) -> str | None:
            scoped = f"{S3A_PREFIX}bucket.{bucket.lower()}.{key}" if bucket else None
            return (lowered.get(scoped) if scoped else None) or lowered.get(S3A_PREFIX + key)

        found = {name: get(key) for name, key in HADOOP_KEYS.items()}
        endpoint = found["endpoint"]
        if endpoint and "://" not in endpoint:
            ssl = (get("connection.ssl.enabled") or "true").lower() != "false"
            found["endpoint"] = f"{'https' if ssl else 'http'}://{endpoint}"
        return cls(**found)

    def over(self, base: S3Settings) -> S3Settings:
        """These settings where set, ``base``'s elsewhere; keys and token go together (an
        access key never pairs with another source's secret)."""
        keys = self if self.access_key or self.secret_key else base
        return S3Settings(
            endpoint=self.endpoint or base.endpoint,
            region=self.region or base.region,
            access_key=keys.access_key,
            secret_key=keys.secret_key,
            session_token=keys.session_token,
        )

    def hadoop(self) -> dict[str, str]:
        """The same settings as S3A keys (``fs.s3a.<key>``; the endpoint as a URL)."""
        found = {S3A_PREFIX + key: getattr(self, name) for name, key in HADOOP_KEYS.items()}
        return {key: value for key, value in found.items() if value}

    def storage_options(self) -> dict[str, str]:
        """The same settings as delta-rs's ``storage_options`` (its ``AWS_*`` keys)."""
        names = {
            "AWS_ENDPOINT_URL": self.endpoint,
            "AWS_REGION": self.region,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_SESSION_TOKEN": self.session_token,
        }
        found = {k: v for k, v in names.items() if v}
        if self.endpoint and self.endpoint.startswith("http://"):
            found["AWS_ALLOW_HTTP"] = "true"  # delta-rs refuses plain HTTP otherwise
        return found


_REGISTERED: dict[str, dict[str, str]] = {}
"""Location (``bucket/key prefix``, scheme dropped; "" for the session) -> its S3A settings."""
_GENERATION = 0
"""Bumped by each :func:`register` that changes :data:`_REGISTERED`."""


def _key(location: str) -> str:
    return location.split("://", 1)[-1].rstrip("/")


def hadoop_options(options: Mapping[str, str]) -> dict[str, str]:
    """The Hadoop file system settings among a read's or write's options (``fs.*``/``dfs.*``)."""
    return {k: str(v) for k, v in options.items() if str(k).lower().startswith(HADOOP_PREFIXES)}


def register(location: str | None, settings: Mapping[str, str]) -> None:
    """S3A settings (``fs.s3a.*`` keys; others are ignored) for ``location`` and everything
    under it, in this process; ``location`` None: the session's (Spark's Hadoop conf)."""
    global _GENERATION
    s3a = {k.lower(): v for k, v in settings.items() if k.lower().startswith(S3A_PREFIX)}
    if location is None:
        _REGISTERED[""] = s3a
    elif s3a and is_object_store(location):
        _REGISTERED[_key(location)] = s3a
    else:
        return
    _GENERATION += 1  # what settings_for resolved before may have changed


def given(location: str) -> dict[str, str]:
    """The S3A settings registered for ``location`` itself (options of its reads and writes),
    for Spark's own reads and writes of it as per-read options. Holds secrets."""
    return _own(_key(location)) if is_object_store(location) else {}


def _own(key: str) -> dict[str, str]:
    """The settings registered for the longest prefix of ``key`` (a location's own)."""
    prefixes = [p for p in _REGISTERED if p and (key == p or key.startswith(p + "/"))]
    return _REGISTERED[max(prefixes, key=len)] if prefixes else {}


def settings_for(location: str) -> S3Settings:
    """The S3 settings of ``location``: its own registered ones, the session's, then the AWS
    environment variables (per key; see the module docstring).

    Resolved once per location and kept until :func:`register` changes the registry or the
    AWS variables change (every file a reader or writer opens asks: resolving is 17 µs, a
    cached answer 5 µs, measured)."""
    env = tuple(os.environ.get(name) for name in AWS_VARIABLES)
    registry = (id(_REGISTERED), len(_REGISTERED))  # replaced or cleared outside register()
    return _resolved(_key(location), registry, _GENERATION, env)


@functools.lru_cache(maxsize=4096)
def _resolved(key: str, registry: tuple, generation: int, env: tuple) -> S3Settings:
    """:func:`settings_for` (``registry``, ``generation`` and ``env`` only key the cache)."""
    bucket = key.split("/", 1)[0]
    session = S3Settings.from_hadoop(_REGISTERED.get("", {}), bucket)
    own = S3Settings.from_hadoop(_own(key), bucket)
    return own.over(session).over(S3Settings.from_env())


def delta_options(location: str) -> dict[str, str] | None:
    """delta-rs's ``storage_options`` for a table at ``location``: None (delta-rs reads the
    AWS environment itself) unless settings were registered for it or the session."""
    if not (is_object_store(location) and (_REGISTERED.get("") or given(location))):
        return None
    return settings_for(location).storage_options()


class CarriesSettings:
    """A reader, writer or options object Spark pickles to other processes (executors, its
    Python planner processes) takes the S3 settings of its locations along, as this process
    resolves them (the AWS variables included: Spark's own S3A likewise ships the driver's to
    the executors in its Hadoop conf), and registers them where it is unpickled, before any of
    its methods runs there. Not in ``repr``: they hold secrets."""

    _settings: tuple[tuple[str, dict[str, str]], ...] = ()

    def carry(self, *locations: str | None) -> None:
        places = [place for place in locations if place and is_object_store(place)]
        found = tuple((place, settings_for(place).hadoop()) for place in places)
        object.__setattr__(self, "_settings", found)  # frozen dataclasses carry too

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        for location, settings in self._settings:
            if settings:
                register(location, settings)


@functools.lru_cache(maxsize=8)
def _s3(settings: S3Settings) -> pafs.S3FileSystem:
    kwargs: dict[str, object] = {"region": settings.region or "us-east-1"}
    if settings.endpoint:
        url = urlparse(settings.endpoint)
        kwargs |= {"endpoint_override": url.netloc or url.path, "scheme": url.scheme or "https"}
    if settings.access_key and settings.secret_key:
        kwargs |= {
            "access_key": settings.access_key,
            "secret_key": settings.secret_key,
            "session_token": settings.session_token,
        }
    return pafs.S3FileSystem(**kwargs)


def filesystem(location: str) -> tuple[pafs.FileSystem, str]:
    """The file system holding ``location`` and the path inside it (``bucket/key`` on S3)."""
    if is_object_store(location):
        return _s3(settings_for(location)), location.split("://", 1)[1].rstrip("/")
    return pafs.LocalFileSystem(), os.path.abspath(location)


def join(root: str, *parts: str) -> str:
    """``root`` joined with ``parts`` (``/`` for URIs, the OS separator locally)."""
    if is_object_store(root):
        return "/".join([root.rstrip("/"), *(p.strip("/") for p in parts if p)])
    return os.path.join(root, *parts)


def dirname(location: str) -> str:
    return location.rsplit("/", 1)[0] if is_object_store(location) else os.path.dirname(location)


def exists(location: str) -> bool:
    fs, path = filesystem(location)
    return fs.get_file_info(path).type != pafs.FileType.NotFound


def is_dir(location: str) -> bool:
    fs, path = filesystem(location)
    return fs.get_file_info(path).type == pafs.FileType.Directory


def list_names(folder: str) -> list[str]:
    """Names directly inside ``folder`` (empty when it does not exist)."""
    fs, path = filesystem(folder)
    selector = pafs.FileSelector(path, allow_not_found=True)
    return [info.base_name for info in fs.get_file_info(selector)]


def read_bytes(location: str) -> bytes:
    """The content of a file; ``FileNotFoundError`` when it is not there (on S3 too)."""
    fs, path = filesystem(location)
    try:
        with fs.open_input_stream(path) as stream:
            return bytes(stream.read())
    except OSError as error:
        if isinstance(error, FileNotFoundError) or "not found" in str(error).lower():
            raise FileNotFoundError(location) from None
        raise


def _temporary(path: str) -> str:
    """A local file's temporary twin: unique per writer, thread or process, and hidden (a
    leading dot), so folder readers (Spark's file sources, cloudFiles) never pick it up."""
    folder, name = os.path.split(path)
    return os.path.join(folder, f".{name}.{uuid.uuid4().hex}.tmp")


def write_bytes(location: str, data: bytes, durable: bool = False) -> None:
    """Write a whole file. On S3 one PUT: readers see the old object or the new one, never
    half; locally a temporary file renamed into place gives the same. ``durable`` syncs a local
    file to disk before the rename, for records a power loss must not empty (a log)."""
    fs, path = filesystem(location)
    if is_object_store(location):
        with fs.open_output_stream(path) as stream:
            stream.write(data)
        return
    temporary = _complete_temporary(path, data, durable)
    os.replace(temporary, path)


def _complete_temporary(path: str, data: bytes, durable: bool = False) -> str:
    """A local file's content written in full to its hidden temporary twin (made beside it)."""
    os.makedirs(os.path.dirname(path), exist_ok=True)
    temporary = _temporary(path)
    with open(temporary, "wb") as handle:
        handle.write(data)
        if durable:
            handle.flush()
            os.fsync(handle.fileno())
    return temporary


def create_exclusive(location: str, data: bytes) -> bool:
    """Write a whole file unless it exists; True when this call wrote it.

    Locally a hard link of a complete temporary file (atomic: of two creators one wins). On S3
    one PUT with ``If-None-Match: *`` through boto3 (:func:`s3_client`; pyarrow's client cannot
    send it): of two creators one wins there too. Without boto3, or where the store answers
    that it does not implement the condition, a check then one PUT: two creators within the
    same moment may both write (the later object wins); callers that cannot keep that harmless
    ask :func:`check_exclusive_creates` first."""
    if is_object_store(location):
        created = _conditional_put(location, data)
        if created is not None:
            return created
        if exists(location):
            return False
        write_bytes(location, data)
        return True
    temporary = _complete_temporary(location, data)
    try:
        os.link(temporary, location)
        return True
    except FileExistsError:
        return False
    finally:
        os.unlink(temporary)


# -- conditional writes on object stores ---------------------------------------------------

CONDITIONAL_CREATE = "fs.s3a.create.conditional.enabled"
"""S3A's setting for a store without conditional writes (``false``): lakefeed's own creates
honour it too (docs/cluster.md)."""
LOCKING_PROVIDER = "AWS_S3_LOCKING_PROVIDER"
CONDITIONAL_PUT = "AWS_CONDITIONAL_PUT"
"""delta-rs's settings (storage options or variables) for how its S3 commits are made
exclusive: a DynamoDB lock (``dynamodb``), or no conditional PUT (``disabled``)."""
PROBE = ".lakefeed_conditional_put"
"""The empty object the probe of a bucket creates twice, in the folder it is asked about
(hidden: Delta's and Spark's readers skip names with a leading dot)."""
CONFLICT_RETRIES = 5
"""Tries of a conditional PUT that S3 answered 409 (another conditional write of the same key
was in flight: retry, AWS says)."""
_probed: dict[tuple[S3Settings, str], str | None] = {}
"""(settings, bucket) -> why a create there is not exclusive, None when it is."""


def s3_client(location: str) -> Any | None:
    """A boto3 S3 client with ``location``'s settings (one per settings), None when boto3 is
    not installed (``pip install 'lakefeed[s3]'``)."""
    try:
        import boto3  # noqa: F401 - deferred: an optional dependency (lakefeed[s3])
    except ImportError:
        return None
    return _boto3_client(settings_for(location))


@functools.lru_cache(maxsize=8)
def _boto3_client(settings: S3Settings) -> Any:
    import boto3  # deferred: an optional dependency (lakefeed[s3])

    return boto3.client(
        "s3",
        endpoint_url=settings.endpoint,
        region_name=settings.region or "us-east-1",
        aws_access_key_id=settings.access_key,
        aws_secret_access_key=settings.secret_key,
        aws_session_token=settings.session_token,
    )


def bucket_key(location: str) -> tuple[str, str]:
    """An ``s3://`` location's bucket and key."""
    bucket, _, key = location.split("://", 1)[1].partition("/")
    return bucket, key


def error_code(error: Exception) -> str:
    """The S3 error code of a boto3 ``ClientError`` (``""`` for another error)."""
    return str(getattr(error, "response", {}).get("Error", {}).get("Code", ""))


def _put_if_absent(client: Any, location: str, data: bytes) -> bool | None:
    """One ``PutObject`` with ``If-None-Match: *``: True when it created the object, False when
    one was there (412), None when the store does not implement the condition (501)."""
    bucket, key = bucket_key(location)
    attempt = 0
    while True:
        try:
            client.put_object(Bucket=bucket, Key=key, Body=data, IfNoneMatch="*")
            return True
        except client.exceptions.ClientError as error:
            code = error_code(error)
            if code in ("PreconditionFailed", "412"):
                return False
            if code in ("NotImplemented", "501"):
                return None
            attempt += 1
            if code not in ("ConditionalRequestConflict", "409") or attempt == CONFLICT_RETRIES:
                raise
        time.sleep(0.05 * 2**attempt)


def _conditional_put(location: str, data: bytes) -> bool | None:
    """:func:`_put_if_absent` where boto3 is installed and the settings allow it; else None."""
    client = s3_client(location)
    if client is None or _declared_unconditional(location):
        return None
    return _put_if_absent(client, location, data)


def _declared_unconditional(location: str) -> str | None:
    """What says the store of ``location`` has no exclusive create for lakefeed: S3A's
    :data:`CONDITIONAL_CREATE` set to ``false`` for it, or delta-rs's settings in the
    environment (a DynamoDB lock lakefeed does not take; conditional PUT disabled)."""
    setting = CONDITIONAL_CREATE.removeprefix(S3A_PREFIX)
    scoped = f"{S3A_PREFIX}bucket.{bucket_key(location)[0]}.{setting}"
    for conf in (_own(_key(location)), _REGISTERED.get("", {})):
        for key in (scoped, CONDITIONAL_CREATE):
            if str(conf.get(key.lower(), "")).strip().lower() == "false":
                return f"{key}=false says the store has no conditional writes"
    if os.environ.get(LOCKING_PROVIDER, "").strip().lower() == "dynamodb":
        return (
            f"{LOCKING_PROVIDER}=dynamodb: delta-rs writers of this store commit under a "
            "DynamoDB lock, which lakefeed's commits do not take"
        )
    if os.environ.get(CONDITIONAL_PUT, "").strip().lower() == "disabled":
        return f"{CONDITIONAL_PUT}=disabled says the store has no conditional PUT"
    return None


def exclusive_create_refusal(folder: str) -> str | None:
    """Why a file created in ``folder`` may overwrite another writer's (a create that is not
    exclusive); None when it cannot (always locally). On S3: a setting that says so
    (:func:`_declared_unconditional`), boto3 missing, or the store's answer to a probe, made
    once per bucket in this process: an object created twice with ``If-None-Match: *``, the
    second of which the store must refuse."""
    if not is_object_store(folder):
        return None
    declared = _declared_unconditional(folder)
    if declared:
        return declared
    client = s3_client(folder)
    if client is None:
        return "boto3 is not installed (pip install 'lakefeed[s3]'): no conditional PUT"
    place = (settings_for(folder), bucket_key(folder)[0])
    if place not in _probed:
        _probed[place] = _probe(client, join(folder, PROBE))
    return _probed[place]


def _probe(client: Any, location: str) -> str | None:
    for _ in range(2):  # the first create may find the object of an earlier probe
        created = _put_if_absent(client, location, b"")
        if created is None:
            return "the store answers NotImplemented to If-None-Match"
        if not created:
            return None
    return "the store ignores If-None-Match (it let a second create overwrite the first)"


def check_exclusive_creates(folder: str, what: str) -> None:
    """Refuse ``what`` (a write whose files in ``folder`` must be created exclusively, e.g. a
    Delta commit) where :func:`exclusive_create_refusal` finds a reason, before it writes."""
    why = exclusive_create_refusal(folder)
    if why:
        raise ConfigError(
            f"{what} is refused: it must create files in {folder} only if they are absent, "
            f"and there it cannot ({why}); nothing was written",
            fix="use a store with conditional writes (AWS S3, recent MinIO, moto 5), install "
            "lakefeed[s3], or write this table with an engine that shares the store's lock",
            code=NO_CONDITIONAL_WRITES,
        )


def remove(location: str) -> bool:
    """Delete one file; False when it was not there."""
    fs, path = filesystem(location)
    try:
        fs.delete_file(path)
    except FileNotFoundError:
        return False
    except OSError as error:  # S3 reports a missing key as a plain OSError
        if "not found" in str(error).lower() or "NoSuchKey" in str(error):
            return False
        raise
    return True


def remove_tree(location: str) -> None:
    """Delete a folder and everything under it; gone already is fine."""
    fs, path = filesystem(location)
    if fs.get_file_info(path).type == pafs.FileType.Directory:
        fs.delete_dir(path)


def total_size(location: str) -> int:
    """Bytes of every file under a folder."""
    fs, path = filesystem(location)
    selector = pafs.FileSelector(path, recursive=True, allow_not_found=True)
    return sum(i.size or 0 for i in fs.get_file_info(selector) if i.type == pafs.FileType.File)


def files_under(folder: str) -> list[str]:
    """Paths (relative, ``/``-separated, sorted) of every file below ``folder``."""
    fs, path = filesystem(folder)
    selector = pafs.FileSelector(path, recursive=True, allow_not_found=True)
    infos = fs.get_file_info(selector)
    return sorted(i.path[len(path) :].lstrip("/") for i in infos if i.type == pafs.FileType.File)


def move(source: str, target: str) -> None:
    """Move one file within one store (a rename locally, a server-side copy on S3)."""
    fs, source_path = filesystem(source)
    _, target_path = filesystem(target)
    if not is_object_store(target):
        os.makedirs(os.path.dirname(target_path), exist_ok=True)
    fs.move(source_path, target_path)


def folder_mtime(folder: str) -> float | None:
    """When a folder last changed (epoch seconds), None when absent. A local folder has its own
    time; an object-store prefix has none, so it is its newest object's."""
    fs, path = filesystem(folder)
    if not is_object_store(folder):
        info = fs.get_file_info(path)
        return info.mtime.timestamp() if info.mtime is not None else None
    selector = pafs.FileSelector(path, recursive=True, allow_not_found=True)
    times = [i.mtime.timestamp() for i in fs.get_file_info(selector) if i.mtime is not None]
    return max(times, default=None)


def listing(folder: AnyPath, pattern: str = "*") -> list[AnyPath]:
    """Entries of ``folder`` whose names match ``pattern``, sorted; empty when it is absent."""
    if not folder.is_dir():
        return []
    found: list[AnyPath] = [p for p in folder.iterdir() if fnmatch.fnmatch(p.name, pattern)]
    return sorted(found, key=str)


def stamp(location: str) -> tuple[int, int] | None:
    """(size, modification time in ns) of a file, None when absent: a file rewritten in place
    gets another stamp."""
    fs, path = filesystem(location)
    info = fs.get_file_info(path)
    if info.type != pafs.FileType.File:
        return None
    return int(info.size or 0), int(info.mtime_ns or 0)


def size(location: str) -> int:
    fs, path = filesystem(location)
    return int(fs.get_file_info(path).size or 0)


@dataclass(frozen=True)
class ObjectPath:
    """A key (or key prefix) in an object store, with the part of ``Path``'s interface lakefeed
    uses: joining, names, listing, whole-file reads and writes. Folders are key prefixes: one
    exists as soon as a key lives under it, and ``mkdir`` has nothing to do."""

    uri: str

    def __str__(self) -> str:
        return self.uri

    def __truediv__(self, part: str) -> ObjectPath:
        return ObjectPath(join(self.uri, part))

    @property
    def name(self) -> str:
        return self.uri.rstrip("/").rsplit("/", 1)[-1]

    @property
    def parent(self) -> ObjectPath:
        return ObjectPath(dirname(self.uri.rstrip("/")))

    def with_name(self, name: str) -> ObjectPath:
        return self.parent / name

    def expanduser(self) -> ObjectPath:
        return self

    def resolve(self) -> ObjectPath:
        return self

    def exists(self) -> bool:
        return exists(self.uri)

    def is_dir(self) -> bool:
        return is_dir(self.uri)

    def is_file(self) -> bool:
        fs, path = filesystem(self.uri)
        return fs.get_file_info(path).type == pafs.FileType.File

    def iterdir(self) -> Iterator[ObjectPath]:
        return iter([self / name for name in list_names(self.uri)])

    def glob(self, pattern: str) -> Iterator[ObjectPath]:
        """Names in this folder matching ``pattern`` (one level, no ``**``)."""
        return iter(p for p in self.iterdir() if fnmatch.fnmatch(p.name, pattern))

    def read_bytes(self) -> bytes:
        return read_bytes(self.uri)

    def read_text(self, encoding: str = "utf-8") -> str:
        return self.read_bytes().decode(encoding)

    def write_bytes(self, data: bytes) -> None:
        write_bytes(self.uri, data)

    def write_text(self, text: str, encoding: str = "utf-8") -> None:
        write_bytes(self.uri, text.encode(encoding))

    def unlink(self, missing_ok: bool = False) -> None:
        if not remove(self.uri) and not missing_ok:
            raise FileNotFoundError(self.uri)

    def mkdir(self, parents: bool = False, exist_ok: bool = False) -> None:
        """Nothing to do: a prefix exists once a key is written under it."""

    def rename(self, target: Location) -> ObjectPath:
        """Move every key under this prefix to ``target`` (copy, then delete: not atomic)."""
        fs, source = filesystem(self.uri)
        _, destination = filesystem(str(target))
        selector = pafs.FileSelector(source, recursive=True)
        for info in fs.get_file_info(selector):
            if info.type == pafs.FileType.File:
                fs.copy_file(info.path, destination + info.path[len(source) :])
        remove_tree(self.uri)
        return ObjectPath(str(target))


AnyPath = Union[Path, ObjectPath]  # noqa: UP007 - a runtime alias
Location = Union[str, os.PathLike[str], ObjectPath]  # noqa: UP007 - what functions taking a place accept


def as_path(location: str | os.PathLike[str] | ObjectPath) -> AnyPath:
    """A local ``Path`` (user-expanded, absolute) or an :class:`ObjectPath` for a URI."""
    if isinstance(location, ObjectPath):
        return location
    text = str(location)
    if is_object_store(text):
        return ObjectPath(text.rstrip("/"))
    if text.split("/", 1)[0].lower() in (f"{s}:" for s in OBJECT_SCHEMES):
        raise ConfigError(
            f"{text!r} looks like an s3:// URI that went through pathlib.Path (which folds '//')",
            fix="pass the URI as a string, not as a Path",
            code=MANGLED_URI,
        )
    if text.startswith("file:"):
        text = urlparse(text).path
    return Path(text).expanduser().resolve()
