"""``evalsi bundle`` / ``gate`` / ``rescore``: seal a run as evidence and check it offline."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from evalsi.cli._output import note, print_json
from evalsi.cli._remote import add_server_flag, server_of
from evalsi.core import UserError

BUNDLE = """\
Seal a finished run into a bundle anyone can check offline, check a bundle, or sign it:

  evalsi bundle RUN -o DIR                       write the bundle of run RUN (an id, a unique
                                                 prefix or `latest`) into the new directory DIR
  evalsi bundle validate DIR [--allowed-signers F]
  evalsi bundle sign DIR --key KEY [--force]

A bundle is one directory: metadata.json, config.json (the resolved spec and manifest),
test_plan.json (the plan registered before the first task), records.jsonl, trajectories.jsonl,
tool_calls.jsonl and end_states.jsonl (agent runs), scores.jsonl (every result with its
explanation), cases.jsonl (each scenario over its trials), summary.json (metrics with intervals,
figures per category), gates.json, report.md, and manifest.json (every file's size and sha256),
written last.

validate checks that the bundle is whole and untouched (every listed file's size and sha256,
nothing added, no link, FIFO or device), that its JSON parses line by line, that the plan still
hashes to the value registered before the first task, and that its files agree (run ids, counts,
one result per evaluator per task, metrics, cases and categories recomputed from the records and
scores). Exit 0 valid, 1 invalid, 2 cannot read. A code-drift warning says when the evaluating
code differs from the code installed now. With --allowed-signers it verifies the signature
(manifest.json.sig) and prints the signer's identity and key fingerprint.

sign signs manifest.json with `ssh-keygen -Y sign` in the namespace evalsi-bundle. It never
prompts: for a key with a passphrase, `ssh-add KEY` and pass KEY.pub. It refuses to sign a bundle
that does not validate, and keeps an existing signature unless --force. A verified signature
says manifest.json is byte for byte what the holder of a key in YOUR allowed-signers file signed
(so, with its checksums, every file is unchanged since); it does not say who ran the agent, that
the run happened as recorded, or that the key was not stolen (docs/guides/evidence.md).
"""

GATE = """\
Judge a bundle against the thresholds its test plan registered before the first task: every
hard threshold (per category or metric) must be met over fully evaluated scenarios.
Comparative thresholds are reported and never gate.

With a case policy (spec.casePolicy) it first decides whether the run can be believed
(coverage, completion, evaluator error rate, each printed with its arithmetic), then judges
every case against its pass rate.

Exit codes: 0 every hard threshold met (and every case passed); 1 one is missed, a scenario
in its scope was not fully evaluated, or a case is below its pass rate (named); 2 cannot
judge: the run declared no system, the bundle does not validate (tampered, cut short),
--require-signature and the signature does not verify, or the run is not valid under its
case policy (inconclusive, never failed).
"""

RESCORE = """\
Derive every verdict of a bundle again from its own records with the code installed now,
offline (no model, tool or network call), and compare with what it records. It never writes
into the bundle. Results a model judged are carried as recorded, and named.

Exit codes: 0 MATCH; 1 DIFFER (the same code, and verdicts differ: the first differing results
are listed); 2 cannot rescore (the bundle does not validate, or names an evaluator not
installed here); 3 CODE_CHANGED (the evaluating code differs, and verdicts differ).
"""


def register(commands: Any) -> None:
    b = commands.add_parser(
        "bundle",
        help="seal a run into an evidence bundle; validate or sign one",
        description=BUNDLE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        usage="evalsi bundle RUN -o DIR | bundle validate DIR | bundle sign DIR --key KEY",
    )
    b.add_argument("target", metavar="RUN|validate|sign", help="a run, or validate / sign")
    b.add_argument("directory", metavar="DIR", nargs="?", help="the bundle (validate, sign)")
    b.add_argument("-o", "--output", metavar="DIR", help="bundle RUN: the new directory")
    b.add_argument("--store", metavar="PATH", help="result store (default: .evalsi/evalsi.db)")
    b.add_argument("--key", metavar="KEY", help="sign: the private key (or KEY.pub with ssh-agent)")
    b.add_argument("--force", action="store_true", help="sign: replace an existing signature")
    b.add_argument(
        "--allowed-signers", metavar="FILE", help="validate: verify the signature against FILE"
    )
    b.add_argument("--format", choices=("table", "json"), default="table")
    add_server_flag(b)
    b.set_defaults(handler=bundle)

    g = commands.add_parser(
        "gate",
        help="judge a bundle against its registered thresholds",
        description=GATE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    g.add_argument("--bundle", required=True, metavar="DIR", help="the bundle")
    g.add_argument(
        "--require-signature",
        action="store_true",
        help="cannot judge unless the bundle's signature verifies (needs --allowed-signers)",
    )
    g.add_argument("--allowed-signers", metavar="FILE", help="the keys you trust")
    g.add_argument("--format", choices=("table", "json"), default="table")
    g.set_defaults(handler=gate)

    r = commands.add_parser(
        "rescore",
        help="derive a bundle's verdicts again, offline, and compare",
        description=RESCORE,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    r.add_argument("bundle", metavar="DIR", help="the bundle")
    r.add_argument("--json", metavar="FILE", help="also write the comparison as JSON to FILE")
    r.add_argument("--format", choices=("table", "json"), default="table")
    r.set_defaults(handler=rescore)


def bundle(args: argparse.Namespace) -> int:
    if args.target == "validate":
        return _validate(args)
    if args.target == "sign":
        return _sign(args)
    if args.directory is not None:
        raise UserError(
            f"unexpected {args.directory!r}: write a bundle with `evalsi bundle RUN -o DIR`"
        )
    if not args.output:
        raise UserError(
            "bundle RUN needs -o DIR (a new or empty directory)",
            hint="evalsi bundle latest -o evidence/",
        )
    server = server_of(args)
    if server is not None:
        from evalsi.cli._remote import connect_reader

        with connect_reader(args, server) as client:
            written = client.export_bundle(args.target, args.output)
    else:
        written = write_local(args.store, args.target, args.output)
    if args.format == "json":
        print_json(
            {
                "bundle": str(written.path),
                "run_id": written.run_id,
                "files": written.files,
                "bytes": written.bytes,
                "tasks": written.tasks,
                "declared": written.declared,
            }
        )
    else:
        print(f"Bundle written to: {written.path}")
        print(f"Run ID: {written.run_id}")
        print(f"Files: {written.files} ({written.bytes} bytes), tasks: {written.tasks}")
        if not written.declared:
            note("note: the run declared no system under test; `evalsi gate` cannot judge it")
    return 0


def write_local(store: str | None, run: str, out: str) -> Any:
    """The bundle of a run of the local store (``--bundle`` on eval and run uses it too)."""
    from evalsi.evidence import write_bundle
    from evalsi.runs import open_store

    db = open_store(store, create=False)
    try:
        return write_bundle(db, db.get_run(run).id, out)
    finally:
        db.close()


def _one_dir(args: argparse.Namespace, what: str) -> Path:
    if args.directory is None:
        raise UserError(f"bundle {what} needs the bundle's directory: evalsi bundle {what} DIR")
    return Path(args.directory)


def _validate(args: argparse.Namespace) -> int:
    from evalsi.evidence import validate_bundle

    v = validate_bundle(_one_dir(args, "validate"), allowed_signers=args.allowed_signers)
    if args.format == "json":
        print_json(v.to_dict())
        return v.exit_code
    print(f"Bundle: {v.path}")
    if v.unreadable is not None:
        print(f"Status: UNREADABLE ({v.unreadable})")
        return v.exit_code
    print(f"Run ID: {v.run_id}")
    print(f"Format: {v.format_version}")
    print(f"Files checked: {v.files_checked}")
    print(f"Tasks: {v.tasks}")
    print(f"Declared: {'yes' if v.declared else 'no'}")
    if v.signature is not None:
        s = v.signature
        state = f"verified: {s.identity} ({s.fingerprint})" if s.verified else f"FAIL ({s.reason})"
        print(f"Signature: {state}")
    elif v.signed:
        print("Signature: present, not verified (pass --allowed-signers FILE)")
    for w in v.warnings:
        print(f"warning: {w}", file=sys.stderr)
    for f in v.findings:
        print(f"FAIL: {f}")
    if v.more_findings:
        print(f"FAIL: ... and {v.more_findings} more")
    print(f"Status: {v.status}")
    return v.exit_code


def _sign(args: argparse.Namespace) -> int:
    from evalsi.evidence import sign_manifest, validate_bundle

    directory = _one_dir(args, "sign")
    if not args.key:
        raise UserError(
            "bundle sign needs --key KEY (never defaulted)",
            hint="ssh-keygen -t ed25519 -f release_key; evalsi bundle sign DIR --key release_key",
        )
    v = validate_bundle(directory)
    if not v.valid:
        first = v.unreadable or "; ".join(v.findings[:3])
        raise UserError(f"{directory} does not validate, so it is not signed: {first}")
    signature = sign_manifest(directory, Path(args.key), force=args.force)
    if args.format == "json":
        print_json({"bundle": str(directory), "signature": str(signature)})
    else:
        print(f"Signed: {signature}")
    return 0


def gate(args: argparse.Namespace) -> int:
    from evalsi.evidence import gate_bundle

    outcome = gate_bundle(
        args.bundle,
        require_signature=args.require_signature,
        allowed_signers=args.allowed_signers,
    )
    if args.format == "json":
        print_json(outcome.to_dict())
        return outcome.exit_code
    print(f"Bundle: {outcome.path}")
    if outcome.run_id:
        print(f"Run ID: {outcome.run_id}")
    if outcome.plan_sha256:
        print(f"Plan: test_plan.json ({outcome.plan_sha256[:19]}..., verified)")
    v = outcome.validation
    if v is not None and v.signature is not None and v.signature.verified:
        print(f"Signature: {v.signature.identity} ({v.signature.fingerprint})")
    for r in outcome.results:
        print(r.line())
    for check in outcome.validity:
        state = "valid" if check["valid"] else "NOT VALID"
        print(f"validity: {check['describe']}: {state}")
    if outcome.cases:
        counts = outcome.cases["counts"]
        print(
            f"cases: {counts['pass']} pass, {counts['fail']} fail, {counts['inconclusive']} "
            f"inconclusive (pass rate >= {outcome.cases['pass_rate']:g} over >= "
            f"{outcome.cases['min_eligible']} eligible trial(s))"
        )
    print(f"GATE: {outcome.verdict} ({outcome.reason})")
    return outcome.exit_code


def rescore(args: argparse.Namespace) -> int:
    from evalsi.evidence import rescore_bundle

    where = Path(args.bundle)
    if args.json and _inside(Path(args.json), where):
        raise UserError(f"--json {args.json} is inside the bundle; rescore never writes into it")
    result = rescore_bundle(where)
    data = result.to_dict()
    if args.json:
        import orjson

        Path(args.json).write_bytes(orjson.dumps(data, option=orjson.OPT_INDENT_2) + b"\n")
    if args.format == "json":
        print_json(data)
        return result.exit_code
    print(f"Bundle: {result.path}")
    if result.run_id:
        print(f"Run ID: {result.run_id}")
    code = result.code
    if code:
        print(
            "Code: "
            + ("changed" if code.get("changed") else "the code that wrote the bundle")
            + (
                f" (evaluators: {', '.join(code['evaluators_changed'])})"
                if code.get("evaluators_changed")
                else ""
            )
        )
    print(f"Compared: {result.compared} results, {result.differing} differ")
    for name, why in result.carried.items():
        print(f"carried: {name}: {why}")
    for d in result.differences:
        print(
            f"differs: task ({d.seq}, {d.trial}) {d.evaluator}: recorded {dict(d.recorded)} "
            f"rescored {dict(d.rescored)}"
        )
    print(f"RESCORE: {result.outcome} ({result.reason})")
    return result.exit_code


def _inside(path: Path, directory: Path) -> bool:
    try:
        return path.resolve().is_relative_to(directory.resolve())
    except OSError:
        return True


__all__ = ["register", "write_local"]
