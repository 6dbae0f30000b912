"""The ``neardup`` command line: parse, call the library, format. Data on stdout, messages on stderr."""

from __future__ import annotations

import argparse
import csv
import itertools
import json
import logging
import os
import sys
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any, TextIO, TypeVar, get_args

from neardup import __version__
from neardup.config import DEFAULT_THRESHOLD, FN_WEIGHT, FP_WEIGHT, PARAM_DEFAULTS, PARAM_FIELDS
from neardup.core.minhash import DEFAULT_NUM_PERM, DEFAULT_SCHEME, DEFAULT_SEED, Scheme, check_minhash
from neardup.core.normalize import CaseMode, UnicodeForm
from neardup.core.shingle import ShingleKind, check_shingling
from neardup.core.tuning import check_threshold
from neardup.errors import DatabaseConnectionError, InputError, NeardupError, OutputError, ParamsError
from neardup.readers import (
    DEFAULT_MAX_TEXT_LENGTH,
    FORMATS,
    BadRecord,
    SourceRecord,
    check_paths,
    checked,
    read_records,
    read_text,
)
from neardup.records import SeenIds, check_id

OUTPUT_FORMATS = ("tsv", "csv", "jsonl", "json")
# Redraw the progress line at most this often: a terminal cannot show more, and it costs a syscall.
_PROGRESS_SECONDS = 0.5

EXAMPLES = {
    "init": "neardup init --threshold 0.8",
    "rebuild": "neardup rebuild --threshold 0.9 --k 7",
    "add": "neardup add stories.jsonl.gz --format jsonl --id-field id --text-field body",
    "query": 'neardup query --text "Storms cut power to 40,000 homes" --limit 5',
    "pairs": "neardup pairs --min-jaccard 0.9 --format csv > pairs.csv",
    "clusters": "neardup clusters --format jsonl",
    "check": "neardup check incoming.jsonl --min-jaccard 0.9 --format jsonl",
    "dedup": "neardup dedup new.jsonl --against-index --out new.only.jsonl",
    "remove": "neardup remove ap-001 rt-017",
    "stats": "neardup stats --format json",
    "eval": "neardup eval --sample 2000 --seed 7 --plot report.png",
    "tune": "neardup tune --threshold 0.8 --num-perm 128 --plot scurve.png",
    "db": "neardup db upgrade",
    "serve": "neardup --db postgresql://app@db/archive serve --host 0.0.0.0 --port 8080 --workers 2",
    "token": "neardup token create --scope write --collection news --name ingest-bot",
    "labels": "neardup --collection news labels --format jsonl > labels.jsonl",
    "server": "neardup server status --format json",
}


def _writer(fmt: str, columns: Sequence[str], out: TextIO) -> Any:
    """A function that writes one row in ``fmt``; call it with None at the end."""
    rows: list[dict[str, Any]] = []
    if fmt in ("tsv", "csv"):
        w = csv.writer(out, delimiter="\t" if fmt == "tsv" else ",", lineterminator="\n")
        w.writerow(columns)

        def write(row: Sequence[Any] | None) -> None:
            if row is not None:
                w.writerow(["true" if v is True else "false" if v is False else v for v in row])

        return write

    def write_json(row: Sequence[Any] | None) -> None:
        if row is None:
            if fmt == "json":
                json.dump(rows, out, ensure_ascii=False)
                out.write("\n")
            return
        record = dict(zip(columns, row, strict=True))
        if fmt == "jsonl":
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
        else:
            rows.append(record)

    return write_json


def _emit(fmt: str, columns: Sequence[str], rows: Iterable[Sequence[Any]]) -> None:
    write = _writer(fmt, columns, sys.stdout)
    for row in rows:
        write(row)
    write(None)


@contextmanager
def _database(args: argparse.Namespace) -> Iterator[str]:
    url = args.db or os.environ.get("NEARDUP_DATABASE_URL")
    if url:
        yield url
        return
    from neardup.storage.embedded import default_data_dir, embedded_database

    args.data_directory = str(default_data_dir())
    with embedded_database() as embedded:
        yield embedded


def _open(args: argparse.Namespace, stack: ExitStack) -> Any:
    from neardup.index import Index
    from neardup.storage.connect import redacted

    url = stack.enter_context(_database(args))
    args.database = redacted(url)
    args.url = url
    return stack.enter_context(Index.open(url, args.collection, schema=args.schema))


def _round(x: float) -> float:
    return round(float(x), 6)


def _check_writable(path: str, option: str) -> None:
    """Refuse, before any work, an output path that cannot be written (OutputError naming it)."""
    target = Path(path)
    if target.is_dir():
        raise OutputError(f"{option} {path}: is a directory, not a file")
    folder = target.parent
    if not folder.is_dir():
        raise OutputError(f"{option} {path}: no such directory {str(folder)!r}")
    if not os.access(target if target.exists() else folder, os.W_OK):
        raise OutputError(f"{option} {path}: permission denied")


@contextmanager
def _written(path: str, option: str) -> Iterator[None]:
    """Turns an OSError while writing ``path`` into one OutputError line naming it."""
    try:
        yield
    except OSError as exc:
        raise OutputError(f"{option} {path}: {exc.strerror or exc}") from exc


@contextmanager
def _output(path: str, option: str, *, whole: bool = False) -> Iterator[TextIO]:
    """``path`` opened for writing text. With ``whole``, a regular file is written beside it and
    moved over it only when the block ends without an error, so nobody sees it half-written."""
    target = Path(path)
    staged = whole and (target.is_file() or not target.exists())
    temporary = target.with_name(f".{target.name}.neardup-{os.getpid()}") if staged else target
    try:
        with _written(path, option), temporary.open("w", encoding="utf-8", newline="") as f:
            yield f
        if staged:
            with _written(path, option):
                os.replace(temporary, target)
    finally:
        if staged:
            temporary.unlink(missing_ok=True)


# -- commands ---------------------------------------------------------------------------------


def cmd_init(args: argparse.Namespace) -> int:
    from neardup.index import Index

    with ExitStack() as stack:
        url = stack.enter_context(_database(args))
        kwargs: dict[str, Any] = {name: getattr(args, name) for name in PARAM_FIELDS}
        if args.bands is not None or args.rows is not None:
            kwargs.update(bands=args.bands, rows=args.rows)
        index = stack.enter_context(
            Index.create(
                url,
                args.collection,
                args.threshold,
                store_text=not args.no_store_text,
                schema=args.schema,
                exist_ok=args.exist_ok,
                distributed=True if args.distributed else None,
                shards=args.shards,
                **kwargs,
            )
        )
        where = " (distributed on Citus)" if index.distributed else ""
        banding = index.params.banding(index.threshold)
        print(f"collection {index.name!r} ready{where}: {banding}", file=sys.stderr)
        _emit_params(args.format, index)
    return 0


def _emit_params(fmt: str, index: Any) -> None:
    """The collection's parameters, threshold and text storage, one row each."""
    _emit(
        fmt,
        ["parameter", "value"],
        [*index.params.to_dict().items(), ("threshold", index.threshold), ("store_text", index.store_text)],
    )


def cmd_rebuild(args: argparse.Namespace) -> int:
    changed = {name: value for name in PARAM_FIELDS if (value := getattr(args, name)) is not None}
    with ExitStack() as stack:
        index = _open(args, stack)
        before = (index.params, index.threshold)
        start = time.monotonic()
        index.rebuild(args.threshold, bands=args.bands, rows=args.rows, batch_size=args.batch_size, **changed)
        differences = before[0].differences(index.params)
        if before[1] != index.threshold:
            differences.insert(0, f"threshold: {before[1]!r} != {index.threshold!r}")
        what = "; ".join(d.replace(" != ", " -> ") for d in differences) or "no parameter changed"
        print(
            f"collection {index.name!r} rebuilt in {time.monotonic() - start:.1f} s ({what}): "
            f"{index.params.banding(index.threshold)}",
            file=sys.stderr,
        )
        _emit_params(args.format, index)
    return 0


def _progress(start: float) -> Any:
    last = [0.0]
    tty = sys.stderr.isatty()

    def show(total: Any) -> None:
        now = time.monotonic()
        if tty and now - last[0] >= _PROGRESS_SECONDS:
            last[0] = now
            done = total.added + total.replaced + total.unchanged
            rate = done / max(now - start, 1e-9)
            print(
                f"\r{done:,} documents, {rate:,.0f}/s, {total.new_pairs:,} new pairs", end="", file=sys.stderr
            )

    return show


def cmd_add(args: argparse.Namespace) -> int:
    rejected: list[BadRecord] = []
    check_paths(args.files)
    if args.skip_bad:
        _check_writable(args.rejects, "--rejects")
    with ExitStack() as stack:
        index = _open(args, stack)
        on_bad = rejected.append if args.skip_bad else None
        records = read_records(args.files, args.input_format, args.id_field, args.text_field, on_bad)
        start = time.monotonic()
        try:
            result = index.add(
                checked(records, on_bad, max_text_length=args.max_text_length),
                batch_size=args.batch_size,
                progress=_progress(start),
                jobs=args.jobs,
            )
        except DatabaseConnectionError as exc:
            raise DatabaseConnectionError(
                f"{exc}; the batches before it are stored: run the same command again to finish the import"
            ) from exc
        finally:
            if rejected:
                with _output(args.rejects, "--rejects") as f:
                    for bad in rejected:
                        f.write(
                            json.dumps({"where": bad.where, "reason": bad.reason, "line": bad.raw}) + "\n"
                        )
        if sys.stderr.isatty():
            print(file=sys.stderr)
        print(
            f"added {result.added}, replaced {result.replaced}, unchanged {result.unchanged}, "
            f"empty {result.empty}, rejected {len(rejected)}, new pairs {result.new_pairs} "
            f"in {time.monotonic() - start:.1f} s"
            + (f"; rejected records are in {args.rejects}" if rejected else ""),
            file=sys.stderr,
        )
    return 0


def cmd_query(args: argparse.Namespace) -> int:
    text = args.text if args.text is not None else read_text(args.file or "-")
    with ExitStack() as stack:
        index = _open(args, stack)
        hits = index.query(text, min_jaccard=args.min_jaccard, limit=args.limit)
        _emit(args.format, ["id", "jaccard"], ((i, _round(j)) for i, j in hits))
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    check_paths(args.files)
    with ExitStack() as stack:
        index = _open(args, stack)
        records = read_records(args.files, args.input_format, args.id_field, args.text_field)
        results = index.check(checked(records), min_jaccard=args.min_jaccard, limit=args.limit)
        if args.format in ("jsonl", "json"):
            rows = (
                (r.id, [{"id": i, "jaccard": _round(j)} for i, j in r.matches], len(r.matches))
                for r in results
            )
            _emit(args.format, ["id", "matches", "count"], rows)
        else:  # one row per match; a record without any has one row with empty match columns

            def rows_of(r: Any) -> list[tuple[str, str, float | str]]:
                return [(r.id, i, _round(j)) for i, j in r.matches] or [(r.id, "", "")]

            _emit(args.format, ["id", "match", "jaccard"], (row for r in results for row in rows_of(r)))
    return 0


def cmd_pairs(args: argparse.Namespace) -> int:
    with ExitStack() as stack:
        index = _open(args, stack)
        _emit(
            args.format,
            ["id_a", "id_b", "jaccard"],
            ((a, b, _round(j)) for a, b, j in index.pairs(args.min_jaccard)),
        )
    return 0


def cmd_clusters(args: argparse.Namespace) -> int:
    with ExitStack() as stack:
        index = _open(args, stack)

        def rows() -> Iterator[tuple[int, str, bool]]:
            for n, ids in enumerate(index.clusters(), 1):
                for i, doc_id in enumerate(ids):
                    yield n, doc_id, i == 0

        _emit(args.format, ["cluster", "id", "representative"], rows())
    return 0


def cmd_dedup(args: argparse.Namespace) -> int:
    check_paths(args.files)
    _check_writable(args.out, "--out")
    with ExitStack() as stack:
        index = _open(args, stack)
        kept = removed = 0
        records: Iterable[SourceRecord] = read_records(
            args.files, args.input_format, args.id_field, args.text_field
        )
        if args.against_index:
            records, duplicates = _new_only(index, records, args.batch_size)
            drop: Any = duplicates
        else:
            drop = {doc_id for ids in index.clusters() for doc_id in ids[1:]}
        # Written beside --out and moved over it at the end: an input that fails half-way leaves
        # no half-written output, and --out may name one of the inputs.
        with _output(args.out, "--out", whole=True) as out:
            writer = None
            for rec in records:
                if rec.id in drop:
                    removed += 1
                    continue
                kept += 1
                if rec.raw:
                    out.write(rec.raw if rec.raw.endswith("\n") else rec.raw + "\n")
                else:
                    row = {args.id_field: rec.id, args.text_field: rec.text, **(rec.meta or {})}
                    if writer is None:
                        writer = csv.DictWriter(out, fieldnames=list(row), lineterminator="\n")
                        writer.writeheader()
                    writer.writerow(row)
        why = (
            "duplicates of stored documents or of earlier records"
            if args.against_index
            else "not the representative of their cluster"
        )
        print(f"kept {kept}, dropped {removed} ({why})", file=sys.stderr)
    return 0


def _new_only(
    index: Any, records: Iterable[SourceRecord], batch_size: int
) -> tuple[Iterator[SourceRecord], set[str]]:
    """The records, and a set that holds, by the time each record is yielded, its id if it
    duplicates a stored document or an earlier record of the input (ids are unique in the input)."""
    from neardup.core.stream_dedup import StreamDeduplicator

    within = StreamDeduplicator(index.params, index.threshold)
    duplicates: set[str] = set()

    def batches() -> Iterator[SourceRecord]:
        iterator = iter(records)
        seen = SeenIds()
        while batch := list(itertools.islice(iterator, batch_size)):
            for r in batch:
                if (earlier := seen.place_of(r.id)) is not None:
                    raise InputError(f"{r.where}: id {r.id!r:.80} repeats {earlier}")
                seen.add(r.id, r.where)
            documents = list(checked(batch))
            stored = index.check(documents)
            earlier_in_input = within.feed([d.text for d in documents])
            for d, hit, before in zip(documents, stored, earlier_in_input.tolist(), strict=True):
                if hit.matches or before >= 0:
                    duplicates.add(d.id)
            yield from batch

    return batches(), duplicates


def cmd_remove(args: argparse.Namespace) -> int:
    for n, doc_id in enumerate(args.ids, 1):
        check_id(doc_id, f"ID {n}")
    with ExitStack() as stack:
        index = _open(args, stack)
        found = index.remove(args.ids)
        print(f"removed {found} of {len(set(args.ids))}", file=sys.stderr)
    return 0


def cmd_stats(args: argparse.Namespace) -> int:
    with ExitStack() as stack:
        index = _open(args, stack)
        s = index.stats()
        rows: list[tuple[str, Any]] = [
            ("database", args.database),
            *([("data_directory", args.data_directory)] if getattr(args, "data_directory", None) else []),
            ("collection", s.name),
            ("distributed", index.distributed),
            ("documents", s.documents),
            ("contents", s.contents),
            ("pairs", s.pairs),
            ("identical_pairs", s.identical_pairs),
            ("clusters", s.clusters),
            ("bucket_rows", s.bucket_rows),
            ("bytes_on_disk", s.bytes_on_disk),
            *(
                (f"bytes.{table}.{part}", size)
                for table, sizes in s.bytes_by_table.items()
                for part, size in zip(("rows", "indexes"), sizes, strict=True)
            ),
            ("threshold", s.threshold),
            ("store_text", s.store_text),
            ("expected_fp_rate", _round(s.expected_fp_rate)),
            ("expected_fn_rate", _round(s.expected_fn_rate)),
            *((f"params.{k}", v) for k, v in s.params.to_dict().items()),
            *(
                (f"largest_bucket.{i}", f"band {b} bucket {k}: {n}")
                for i, (b, k, n) in enumerate(s.largest_buckets, 1)
            ),
        ]
        _emit(args.format, ["name", "value"], rows)
    return 0


EVAL_COLUMNS = (
    "low",
    "high",
    "pairs",
    "candidates",
    "found",
    "mean_jaccard",
    "empirical",
    "stderr",
    "theoretical",
    "stored",
)


def cmd_eval(args: argparse.Namespace) -> int:
    if args.plot:
        from neardup.plot import pyplot

        pyplot()  # refuse before the work, not after it, when matplotlib is missing
        _check_writable(args.plot, "--plot")
    with ExitStack() as stack:
        index = _open(args, stack)
        ev = index.evaluate(args.sample, seed=args.seed, floor=args.floor)
        duplicates, not_duplicates = _label_verdicts(args.url, args.schema, args.collection)
    print(str(ev), file=sys.stderr)
    labelled = duplicates + not_duplicates
    if labelled:
        print(
            f"precision by labels: {duplicates / labelled:.4f} ({duplicates} of {labelled} labelled stored "
            "pairs are duplicates)",
            file=sys.stderr,
        )
    if args.plot:
        from neardup.plot import plot_evaluation

        with _written(args.plot, "--plot"):
            plot_evaluation(ev, Path(args.plot))
        print(f"report written to {args.plot}", file=sys.stderr)
    if args.format == "json":
        json.dump({**ev.to_dict(), "labelled_pairs": labelled, "labelled_duplicates": duplicates}, sys.stdout)
        sys.stdout.write("\n")
        return 0

    def cell(v: Any) -> Any:
        return _round(v) if isinstance(v, float) else v

    _emit(args.format, EVAL_COLUMNS, ([cell(getattr(b, c)) for c in EVAL_COLUMNS] for b in ev.bins))
    return 0


def cmd_tune(args: argparse.Namespace) -> int:
    from neardup.core import optimal_params

    if args.plot:
        _check_writable(args.plot, "--plot")
    b = optimal_params(args.threshold, args.num_perm, args.fp_weight, args.fn_weight)
    print(str(b), file=sys.stderr)
    if args.plot:
        from neardup.plot import plot_scurve

        with _written(args.plot, "--plot"):
            plot_scurve(b, Path(args.plot))
        print(f"S-curve written to {args.plot}", file=sys.stderr)
    _emit(
        args.format,
        ["bands", "rows", "threshold_point", "false_positive_rate", "false_negative_rate"],
        [
            (
                b.bands,
                b.rows,
                _round(b.threshold_point),
                _round(b.false_positive_rate),
                _round(b.false_negative_rate),
            )
        ],
    )
    return 0


def cmd_db(args: argparse.Namespace) -> int:
    from neardup.storage import migrate

    with _database(args) as url:
        if args.action == "upgrade":
            migrate.upgrade(url, args.schema)
        elif args.action == "downgrade":
            migrate.downgrade(url, args.schema, args.revision)
        current = migrate.current_revision(url, args.schema)
        print(current or "none")
    return 0


def _label_verdicts(url: str, schema: str, name: str) -> tuple[int, int]:
    """Of the collection's stored pairs that people labelled: (duplicates, not duplicates)."""
    from contextlib import closing

    from neardup.storage import labels, pages
    from neardup.storage.connect import connect
    from neardup.storage.scope import Scope

    with closing(connect(url)) as conn:
        scope = Scope(conn, schema)
        row = pages.collection(scope, name)
        return labels.verdicts(scope.with_collection(row.collection_id)) if row else (0, 0)


def _is_loopback(host: str) -> bool:
    import ipaddress

    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def cmd_serve(args: argparse.Namespace) -> int:
    if args.no_auth and not _is_loopback(args.host):
        print(
            f"neardup: error: --no-auth is refused on {args.host}: without tokens the service may only "
            "listen on a loopback address (127.0.0.1, ::1, localhost)",
            file=sys.stderr,
        )
        return 2
    try:
        import uvicorn

        from neardup.service.app import create_app
        from neardup.service.context import Settings
    except ImportError as exc:
        raise NeardupError(
            f"neardup serve needs the service extra: pip install 'neardup[service]' ({exc})"
        ) from exc
    from neardup.storage import migrate
    from neardup.storage.connect import redacted

    with _database(args) as url:
        try:
            current, head = migrate.current_revision(url, args.schema), migrate.head_revision()
        except DatabaseConnectionError as exc:
            print(f"neardup: warning: {exc} (/healthz says 503 until it answers)", file=sys.stderr)
            current = head = ""
        if current != head:
            print(
                f"neardup: warning: schema {args.schema!r} is at revision {current or 'none'}, this neardup "
                f"needs {head}: run `neardup db upgrade` (requests will get 503 until then)",
                file=sys.stderr,
            )
        print(
            f"neardup: serving {redacted(url)} (schema {args.schema}) on http://{args.host}:{args.port}"
            + (" without tokens" if args.no_auth else ""),
            file=sys.stderr,
        )
        common: dict[str, Any] = {"host": args.host, "port": args.port, "log_level": args.log_level}
        if args.workers > 1:
            os.environ.update(
                NEARDUP_SERVE_URL=url,
                NEARDUP_SERVE_SCHEMA=args.schema,
                NEARDUP_SERVE_AUTH="0" if args.no_auth else "1",
                NEARDUP_SERVE_MAX_BODY=str(args.max_body_bytes),
            )
            uvicorn.run(
                "neardup.service.app:app_from_environment", factory=True, workers=args.workers, **common
            )
        else:
            settings = Settings(url, args.schema, not args.no_auth, args.max_body_bytes)
            uvicorn.run(create_app(settings), **common)
    return 0


def cmd_token(args: argparse.Namespace) -> int:
    from contextlib import closing

    from neardup.errors import ParamsError
    from neardup.service.credentials import digest, new_secret, shown_prefix
    from neardup.storage import migrate, tokens
    from neardup.storage.connect import connect
    from neardup.storage.names import check_collection_name
    from neardup.storage.scope import Scope

    with _database(args) as url:
        if args.action == "create":
            if args.scope is None:
                raise ParamsError("token create needs --scope read, write or admin")
            if args.only_collection is not None:
                check_collection_name(args.only_collection)
            if migrate.current_revision(url, args.schema) != migrate.head_revision():
                migrate.upgrade(url, args.schema)
        with closing(connect(url)) as conn:
            scope = Scope(conn, args.schema)
            migrate.require_head(conn, args.schema)
            if args.action == "create":
                secret = new_secret()
                token_id = tokens.insert(
                    scope, digest(secret), shown_prefix(secret), args.scope, args.only_collection, args.name
                )
                where = f"collection {args.only_collection!r}" if args.only_collection else "every collection"
                print(
                    f"token {token_id} ({shown_prefix(secret)}...): {args.scope} on {where}; "
                    "it is shown once, only its hash is stored",
                    file=sys.stderr,
                )
                print(secret)
            elif args.action == "list":
                _emit(
                    args.format,
                    [
                        "id",
                        "prefix",
                        "scope",
                        "collection",
                        "name",
                        "created_at",
                        "last_used_at",
                        "revoked_at",
                    ],
                    (
                        (
                            t.token_id,
                            t.prefix,
                            t.scope,
                            t.collection or "",
                            t.name,
                            t.created_at.isoformat(),
                            t.last_used_at.isoformat() if t.last_used_at else "",
                            t.revoked_at.isoformat() if t.revoked_at else "",
                        )
                        for t in tokens.all_tokens(scope)
                    ),
                )
            else:
                which = args.token
                ids = [int(which)] if which.isdigit() else tokens.find_by_prefix(scope, which)
                if len(ids) != 1:
                    raise ParamsError(
                        f"{which!r} names {'no' if not ids else len(ids)} live tokens; give the id"
                    )
                if not tokens.revoke(scope, ids[0]):
                    raise ParamsError(f"no live token with id {ids[0]}")
                print(f"token {ids[0]} revoked", file=sys.stderr)
    return 0


def cmd_labels(args: argparse.Namespace) -> int:
    from contextlib import closing

    from neardup.storage import labels, migrate
    from neardup.storage.connect import connect
    from neardup.storage.scope import Scope

    with _database(args) as url, closing(connect(url)) as conn:
        migrate.require_head(conn, args.schema)
        rows = labels.export(Scope(conn, args.schema), None if args.all else args.collection)
        columns = [
            "collection",
            "id_a",
            "id_b",
            "label",
            "note",
            "labelled_by",
            "labelled_at",
            "similarity",
            "method",
        ]
        _emit(args.format, columns, ([r.to_dict()[c] for c in columns] for r in rows))
    return 0


def cmd_server(args: argparse.Namespace) -> int:
    from neardup.storage import embedded

    if args.db or os.environ.get("NEARDUP_DATABASE_URL"):
        print(
            "neardup: a database URL is set (--db or NEARDUP_DATABASE_URL), so commands do not use "
            "the embedded server; its state:",
            file=sys.stderr,
        )
    if args.action == "stop":
        pid = embedded.stop_server()
        print(
            "the embedded server is not running"
            if pid is None
            else f"stopped the embedded server (pid {pid})",
            file=sys.stderr,
        )
        return 0
    s = embedded.server_state()
    rows: list[tuple[str, Any]] = [
        ("running", s.running),
        ("pid", s.pid),
        ("data_directory", str(s.data_dir)),
        ("socket", s.socket_dir and str(s.socket_dir)),
        ("in_use", s.in_use),
        ("idle_timeout", s.idle_timeout),
        ("idle_seconds", None if s.idle_seconds is None else round(s.idle_seconds, 1)),
        ("watchdog_pid", s.watchdog_pid),
    ]
    _emit(args.format, ["name", "value"], rows)
    return 0


# -- option values: each range is checked here, once, so every command takes the same values ----

_T = TypeVar("_T")


def _integer(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


def _number(text: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None


def _option_type(parse: Callable[[str], _T], check: Callable[[_T], object], name: str) -> Callable[[str], _T]:
    """An argparse ``type``: ``parse`` the text, then ``check`` the value (ParamsError says the range)."""

    def convert(text: str) -> _T:
        value = parse(text)
        try:
            check(value)
        except ParamsError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
        return value

    convert.__name__ = name  # argparse names the type in some messages
    return convert


def _in(name: str, low: float, high: float, *, open_low: bool = False) -> Callable[[float], None]:
    def check(value: float) -> None:
        inside = (low < value if open_low else low <= value) and value <= high
        if not inside:  # NaN is outside every range
            bracket = "(" if open_low else "["
            raise ParamsError(f"{name} must be in {bracket}{low:g}, {high:g}], got {value!r}")

    return check


def _at_least(low: int) -> Callable[[float], None]:
    def check(value: float) -> None:
        if not value >= low:
            raise ParamsError(f"must be at least {low}, got {value!r}")

    return check


THRESHOLD = _option_type(_number, check_threshold, "threshold")
MIN_JACCARD = _option_type(_number, _in("min_jaccard", 0, 1), "min_jaccard")
FLOOR = _option_type(_number, _in("floor", 0, 1, open_low=True), "floor")
WEIGHT = _option_type(_number, _in("weight", 0, float("inf")), "weight")
POSITIVE = _option_type(_integer, _at_least(1), "positive")
PORT = _option_type(_integer, _in("port", 0, 65535), "port")
NUM_PERM = _option_type(_integer, lambda n: check_minhash(n, DEFAULT_SEED, DEFAULT_SCHEME), "num_perm")
SEED = _option_type(_integer, lambda n: check_minhash(DEFAULT_NUM_PERM, n, DEFAULT_SCHEME), "seed")
K = _option_type(_integer, lambda n: check_shingling("char", n), "k")
# One option per Params field a caller may set (config.PARAM_FIELDS), for init and rebuild.
PARAM_OPTIONS: dict[str, dict[str, Any]] = {
    "num_perm": {"type": NUM_PERM, "metavar": "N", "help": "signature length"},
    "scheme": {"choices": get_args(Scheme), "help": "MinHash scheme"},
    "seed": {"type": SEED, "help": "seed of the hash functions"},
    "shingle": {"choices": get_args(ShingleKind), "help": "character or word shingles"},
    "k": {"type": K, "help": "shingle length (characters or words)"},
    "unicode_form": {"choices": get_args(UnicodeForm), "help": "Unicode normalisation"},
    "case": {"choices": get_args(CaseMode), "help": "case folding"},
    "collapse_whitespace": {
        "action": argparse.BooleanOptionalAction,
        "help": "treat every run of whitespace as one space",
    },
}


# -- parser -----------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    """The argument parser, with every command and its example."""
    parser = argparse.ArgumentParser(
        prog="neardup", description="A near-duplicate document index in PostgreSQL."
    )
    parser.add_argument("--version", action="version", version=f"neardup {__version__}")
    parser.add_argument(
        "--db", help="database URL (default: $NEARDUP_DATABASE_URL, else the embedded server)"
    )
    parser.add_argument("--collection", default="default", help="collection name (default: default)")
    parser.add_argument("--schema", default="neardup", help="PostgreSQL schema (default: neardup)")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def command(name: str, help_text: str, details: str = "") -> argparse.ArgumentParser:
        p = sub.add_parser(
            name,
            help=help_text,
            description=help_text + (f"\n\n{details}" if details else ""),
            epilog=f"example:\n  {EXAMPLES[name]}",
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        if name not in ("add", "remove", "dedup", "db"):
            p.add_argument(
                "--format", choices=OUTPUT_FORMATS, default="tsv", help="output format (default tsv)"
            )
        return p

    def inputs(p: argparse.ArgumentParser) -> None:
        p.add_argument(
            "files", nargs="+", metavar="FILE", help="files (gzip ok), directories, or - for stdin"
        )
        p.add_argument(
            "--format", dest="input_format", choices=FORMATS, help="input format (default: by name)"
        )
        p.add_argument("--id-field", default="id")
        p.add_argument("--text-field", default="text")

    def params(p: argparse.ArgumentParser, *, defaults: bool) -> None:
        """The options of every stored parameter; with ``defaults``, those of a new collection."""
        kept = "; default: unchanged" if not defaults else ""
        p.add_argument(
            "--threshold",
            type=THRESHOLD,
            default=DEFAULT_THRESHOLD if defaults else None,
            help=f"Jaccard similarity of a near-duplicate, in (0, 1] (default {DEFAULT_THRESHOLD}"
            + (")" if defaults else ", or unchanged)"),
        )
        p.add_argument("--bands", type=POSITIVE, help="LSH bands (with --rows; default: tuned)")
        p.add_argument("--rows", type=POSITIVE, help="rows per band (with --bands; default: tuned)")
        for name, spec in PARAM_OPTIONS.items():
            default = PARAM_DEFAULTS[name]
            shown = f"default {'--' if default is True else '--no-' if default is False else ''}"
            shown += f"{name.replace('_', '-') if isinstance(default, bool) else default}"
            p.add_argument(
                f"--{name.replace('_', '-')}",
                dest=name,
                default=default if defaults else None,
                **{**spec, "help": f"{spec['help']} ({shown}{kept})"},
            )

    p = command("init", "Create the collection (migrating the schema if needed) and print its parameters.")
    params(p, defaults=True)
    p.add_argument("--no-store-text", action="store_true", help="keep signatures only, not the texts")
    p.add_argument(
        "--exist-ok", action="store_true", help="reuse an existing collection with these parameters"
    )
    p.add_argument(
        "--distributed",
        action="store_true",
        help="make it a distributed collection: the database must have the citus extension "
        "(docs/distributed.md)",
    )
    p.add_argument(
        "--shards",
        type=POSITIVE,
        default=None,
        help="with --distributed: shards per table, for a schema's first distributed collection "
        "(default: Citus's citus.shard_count)",
    )
    p.set_defaults(func=cmd_init)

    p = command(
        "rebuild",
        "Change the collection's parameters and recompute its buckets, pairs and clusters.",
        "Only the options given change. A new threshold, bands or rows re-band the stored signatures\n"
        "without reading any text; any other change re-sketches every stored text (the collection\n"
        "must store its texts). Bands and rows are re-tuned for the threshold unless both are given.\n"
        "One transaction: on an error nothing changes.",
    )
    params(p, defaults=False)
    p.add_argument("--batch-size", type=POSITIVE, default=50_000, help="texts re-sketched at a time")
    p.set_defaults(func=cmd_rebuild)

    p = command("add", "Add documents; each batch's verified pairs are stored before it commits.")
    inputs(p)
    p.add_argument("--batch-size", type=POSITIVE, default=50_000, help="documents per transaction")
    p.add_argument(
        "--jobs",
        type=POSITIVE,
        default=1,
        metavar="N",
        help="writer processes, the input split among them by id (default 1); the result is the same",
    )
    p.add_argument(
        "--skip-bad", action="store_true", help="leave bad records out (counted) instead of stopping"
    )
    p.add_argument("--rejects", default="rejected.jsonl", help="with --skip-bad: where to write them")
    p.add_argument(
        "--max-text-length",
        type=POSITIVE,
        default=DEFAULT_MAX_TEXT_LENGTH,
        metavar="CHARS",
        help=f"refuse longer texts as bad records (default {DEFAULT_MAX_TEXT_LENGTH:,} characters)",
    )
    p.set_defaults(func=cmd_add)

    p = command("query", "Stored documents similar to a text, best first.")
    g = p.add_mutually_exclusive_group(required=True)
    g.add_argument("--text")
    g.add_argument("--file", help="a file with the text, or - for stdin")
    g.add_argument("stdin", nargs="?", choices=["-"], help="read the text from stdin")
    p.add_argument(
        "--min-jaccard", type=MIN_JACCARD, help="lowest similarity, in [0, 1] (default: threshold)"
    )
    p.add_argument("--limit", type=POSITIVE, help="at most this many (default: all)")
    p.set_defaults(func=cmd_query)

    p = command("pairs", "Every verified near-duplicate pair: id_a, id_b, jaccard.")
    p.add_argument(
        "--min-jaccard", type=MIN_JACCARD, help="lowest similarity, in [0, 1] (default: threshold)"
    )
    p.set_defaults(func=cmd_pairs)

    p = command("clusters", "Clusters of near-duplicates: cluster, id, representative.")
    p.set_defaults(func=cmd_clusters)

    p = command(
        "check",
        "Each input record's stored near-duplicates, in input order; stores nothing.",
        "TSV and CSV give one row per match (id, match, jaccard), and one row with empty match\n"
        "columns for a record without any; JSONL and JSON give one object per record.",
    )
    p.add_argument("files", nargs="+", metavar="FILE", help="files (gzip ok), directories, or - for stdin")
    p.add_argument("--input-format", choices=FORMATS, help="input format (default: by name)")
    p.add_argument("--id-field", default="id")
    p.add_argument("--text-field", default="text")
    p.add_argument(
        "--min-jaccard", type=MIN_JACCARD, help="lowest similarity reported (default: the threshold)"
    )
    p.add_argument("--limit", type=POSITIVE, help="at most this many matches per record")
    p.set_defaults(func=cmd_check)

    p = command(
        "dedup",
        "Write the input back out, keeping one record per cluster (its representative).",
        "With --against-index, keep only the records that duplicate nothing stored in the collection\n"
        "and no earlier record of the input (the input itself is not stored).",
    )
    inputs(p)
    p.add_argument("--out", required=True, help="output file")
    p.add_argument(
        "--against-index",
        action="store_true",
        help="drop records that duplicate a stored document or an earlier input record",
    )
    p.add_argument(
        "--batch-size", type=POSITIVE, default=10_000, help="records checked per round trip (default 10,000)"
    )
    p.set_defaults(func=cmd_dedup)

    p = command("remove", "Remove documents by id.")
    p.add_argument("ids", nargs="+", metavar="ID")
    p.set_defaults(func=cmd_remove)

    p = command("stats", "Counts, size on disk, fullest buckets and parameters of the collection.")
    p.set_defaults(func=cmd_stats)

    p = command(
        "eval",
        "Measure recall and precision against exact truth on a sample (needs stored texts).",
        "Each sampled content is compared exactly with every stored one. Recall at the threshold, with\n"
        "its 95% interval, and precision go to standard error. Standard output has one row per\n"
        "similarity bin: the sampled pairs, how many of them are LSH candidates and how many are\n"
        "stored, the empirical and theoretical (S-curve) candidate probability with its standard\n"
        "error, and the stored pairs of the whole collection; --format json gives it all as one object.",
    )
    p.add_argument("--sample", type=POSITIVE, default=1000, help="contents to sample (default 1000)")
    p.add_argument("--seed", type=SEED, default=0, help="seed of the sample (default 0)")
    p.add_argument(
        "--floor",
        type=FLOOR,
        help="lowest similarity evaluated, in (0, threshold] (default: half the threshold)",
    )
    p.add_argument("--plot", metavar="PNG", help="also draw the similarity histogram and the S-curve")
    p.set_defaults(func=cmd_eval)

    p = command("tune", "Choose bands and rows for a threshold (no database needed).")
    p.add_argument("--threshold", type=THRESHOLD, required=True, help="in (0, 1]")
    p.add_argument("--num-perm", type=NUM_PERM, default=PARAM_DEFAULTS["num_perm"], help="signature length")
    p.add_argument(
        "--fp-weight", type=WEIGHT, default=FP_WEIGHT, help=f"weight of false positives (default {FP_WEIGHT})"
    )
    p.add_argument(
        "--fn-weight", type=WEIGHT, default=FN_WEIGHT, help=f"weight of false negatives (default {FN_WEIGHT})"
    )
    p.add_argument("--plot", metavar="PNG", help="also draw the S-curve with the FP and FN areas")
    p.set_defaults(func=cmd_tune)

    p = command("db", "Migrate the schema: upgrade, current or downgrade.")
    p.add_argument("action", choices=("upgrade", "current", "downgrade"))
    p.add_argument(
        "--revision", default="base", help="downgrade target (default: base, which drops all data)"
    )
    p.set_defaults(func=cmd_db)

    p = command(
        "serve",
        "Serve the HTTP API and the review pages for every collection of the database.",
        "Clients send `Authorization: Bearer <token>` (see `neardup token`). The OpenAPI document is\n"
        "at /openapi.json, the review pages at /review/. Needs `pip install 'neardup[service]'`.",
    )
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1)")
    p.add_argument("--port", type=PORT, default=8080, help="port (default 8080)")
    p.add_argument("--workers", type=POSITIVE, default=1, help="worker processes (default 1)")
    p.add_argument(
        "--no-auth",
        action="store_true",
        help="no tokens needed (refused unless the host is a loopback address)",
    )
    p.add_argument(
        "--max-body-bytes",
        type=POSITIVE,
        default=32 * 1024 * 1024,
        help="larger request bodies get 413 (default 32 MiB)",
    )
    p.add_argument("--log-level", default="info", choices=("critical", "error", "warning", "info", "debug"))
    p.set_defaults(func=cmd_serve)

    p = command(
        "token",
        "Create, list or revoke API tokens.",
        "create prints the token once, on the last line of standard output; only its SHA-256 is stored.\n"
        "read: query, check, pairs, clusters, documents, review pages; write: also add, delete and\n"
        "label; admin: also create and drop collections. revoke takes the id or the prefix `list` shows.",
    )
    p.add_argument("action", choices=("create", "list", "revoke"))
    p.add_argument("token", nargs="?", default="", help="revoke: the token's id or prefix")
    p.add_argument("--scope", choices=("read", "write", "admin"), help="create: what it may do (required)")
    p.add_argument(
        "--collection",
        dest="only_collection",
        metavar="NAME",
        help="create: limit the token to this collection (default: every collection)",
    )
    p.add_argument("--name", default="", help="create: a label to recognise it by")
    p.set_defaults(func=cmd_token)

    p = command("labels", "Export the labels people gave pairs on the review pages (of --collection).")
    p.add_argument("--all", action="store_true", help="labels of every collection")
    p.set_defaults(func=cmd_labels)

    p = command(
        "server",
        "Show or stop the embedded server (used when no database URL is given).",
        "The embedded server keeps running between commands and stops by itself once unused for\n"
        "$NEARDUP_SERVER_IDLE_TIMEOUT seconds (default 300; 0 stops it as each last command ends).\n"
        "status prints whether it runs, its pid, data directory, socket, idle timeout and how long it\n"
        "has been idle. stop shuts it down now; it refuses, with an error, while a command uses the\n"
        "server rather than wait behind a long import or cut it off: run it again when that ends.",
    )
    p.add_argument("action", choices=("status", "stop"))
    p.set_defaults(func=cmd_server)
    return parser


class _StderrHandler(logging.Handler):
    """Writes log records to whatever ``sys.stderr`` is at the time (tests replace it)."""

    def emit(self, record: logging.LogRecord) -> None:
        print(self.format(record), file=sys.stderr)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 on success, 1 on an error, 2 on bad usage)."""
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as exc:  # bad usage (2), --help or --version (0), already printed
        return exc.code if isinstance(exc.code, int) else 2
    # The embedded server says what it does (as root: which user runs it, where its data is).
    server_log = logging.getLogger("neardup.server")
    if not server_log.handlers:
        handler = _StderrHandler()
        handler.setFormatter(logging.Formatter("neardup: %(message)s"))
        server_log.addHandler(handler)
        server_log.setLevel(logging.INFO)
    # psycopg warns when the rollback after a lost connection fails too; the error itself is
    # reported once, below, so its warnings must not reach stderr through logging's last resort.
    driver_log = logging.getLogger("psycopg")
    if not driver_log.handlers:
        driver_log.addHandler(logging.NullHandler())
    try:
        return int(args.func(args))
    except NeardupError as exc:
        print(f"neardup: error: {exc}", file=sys.stderr)
        return 1
    except BrokenPipeError:
        return 0
    except KeyboardInterrupt:
        print("neardup: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
